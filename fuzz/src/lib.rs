//! Fuzz targets for everything mkc reads from a user: the model parser (through lowering,
//! scheduling, the checker and the simulator), device profiles, sweep specs, schedule files
//! through the checker (as regalloc2 fuzzes its checker), and checkpoint configs through the
//! lowering `mkc model` chooses. A target returns normally for
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A bounded run of every target on a fixed seed: the targets build, run and find nothing.
    #[test]
    fn every_target_survives_a_bounded_run() {
        for &(name, target) in TARGETS {
            let seeds = target.seeds();
            let mut m = Mutator::new(0x5eed ^ name.len() as u64);
            let mut accepted = 0;
            for _ in 0..400 {
                let base = &seeds[m.rng.below(seeds.len())];
                accepted += target.run(&m.mutate(base)) as u32;
            }
            // The mutations start from valid inputs (the example sweep is larger than the
            // target's cap, so not every seed is accepted).
            assert!(
                seeds.iter().any(|s| target.run(s.as_bytes())),
                "{name}: every seed is refused"
            );
            assert!(accepted > 0, "{name}: no mutation was accepted");
        }
    }
}
