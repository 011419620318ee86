//! Ablation builds of the operator kernels: the catalogue's [`Ablation`] (one description for
//! `mkc bench --ablate`, which builds the kernels from it, and `mkc simulate --ablate`).

pub use mkc_catalogue::Ablation;
