//! Fuzz targets for everything mkc reads from a user: the model parser (through lowering,
//! scheduling, the checker and the simulator), device profiles, sweep specs, and schedule
//! files through the checker (as regalloc2 fuzzes its checker). A target returns normally for
//! any input that mkc answers as promised (accepted with sane figures, or refused with an
//! error); a panic is a finding.
//!
//! [`Mutator`] derives inputs from the project's own files (models, devices, sweeps, compiled
//! schedules): structure-aware enough to get past the parser, random enough to reach the
//! corners. The driver (`cargo run -p mkc-fuzz --release -- TARGET`) and the bounded property
//! test in the root package's tests both use it; it needs no nightly toolchain.

pub mod mutate;
pub mod targets;

pub use mutate::{Mutator, Rng};
pub use targets::{Target, TARGETS};
