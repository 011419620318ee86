//! mkc's CUDA backend: the operator kernels (NVRTC, compiled at run time for sm_90a), the
//! deterministic weights and the CPU reference that checks them, and the runner that executes a
//! chain schedule (`graph` or `pdl`) as one CUDA graph per decode step.
//!
//! Start at [`kernels`] (what runs), then [`gpu`] (how a schedule becomes launches and graphs).
//! Nothing here needs a GPU to build; without one, [`gpu::Gpu::open`] returns
//! [`BackendError::NoDevice`].

pub mod abi;
pub mod ablation;
pub mod attention_parts;
mod checkpoint;
pub mod checkpoint_reader;
pub mod error;
pub mod fragments;
pub mod gpu;
pub mod kernels;
pub mod launch_plan;
pub mod line_fit;
pub mod memory;
pub mod persistent_plan;
pub mod reference;
pub mod timeline;
pub mod weights;

pub use checkpoint::{config_shape, parse_config_shape, ConfigShape};
pub use error::BackendError;
