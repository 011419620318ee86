//! The bounded fuzz property CI runs: random mutations of the model files (the fuzz crate's
//! mutation engine) through `mkc compile --verify` and `mkc simulate --json`. Each run must
//! exit 0 with sane figures (finite, step at or above the floor, fractions within 0-1) or exit
//! 2 with an error paragraph; never a panic, an internal error or a run past the time limit.

use std::time::Duration;

use proptest::prelude::*;

/// A run past this is a hang (the largest legal model compiles and simulates in ~10 s).
const LIMIT: Duration = Duration::from_secs(90);

mod common;

/// Runs mkc on `args`: (exit code, stdout, stderr), panicking past [`LIMIT`].
fn mkc(args: &[&str]) -> (Option<i32>, String, String) {
    let o = common::mkc_within(args, LIMIT);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

const SEEDS: &[&str] = &[
    include_str!("../models/tiny.ron"),
    include_str!("../models/llama1b.ron"),
    include_str!("../models/llama1b_tuned.ron"),
    include_str!("../models/llama3.2-1b.ron"),
];

fn sane(json: &str) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let targets = v["targets"].as_object().ok_or("no targets")?;
    for (name, r) in targets {
        let f = |k: &str| r[k].as_f64().ok_or(format!("{name}: {k} is not a number"));
        let (step, floor) = (f("step_us")?, f("floor_us")?);
        let (bw, busy) = (f("bandwidth_fraction")?, f("sm_busy_fraction")?);
        if !(step.is_finite() && floor > 0.0 && step >= floor * (1.0 - 1e-9)) {
            return Err(format!("{name}: step {step} against floor {floor}"));
        }
        if !((0.0..=1.0 + 1e-9).contains(&bw) && (0.0..=1.0 + 1e-9).contains(&busy)) {
            return Err(format!("{name}: fractions {bw} {busy}"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_models_are_compiled_and_simulated_or_refused(seed in 0usize..SEEDS.len(), rng in any::<u64>()) {
        let mut m = mkc_fuzz::Mutator::new(rng);
        let data = m.mutate(SEEDS[seed]);
        let path = common::scratch(&format!("m{rng}.ron"));
        std::fs::write(&path, &data).unwrap();
        let p = path.to_str().unwrap();
        for args in [vec!["compile", p, "--verify"], vec!["simulate", p, "--json"]] {
            let (code, out, err) = mkc(&args);
            prop_assert!(!err.contains("panicked"), "{args:?}: {err}\ninput:\n{}", String::from_utf8_lossy(&data));
            match code {
                Some(0) if args[0] == "simulate" => {
                    if let Err(why) = sane(&out) {
                        prop_assert!(false, "{args:?}: {why}\ninput:\n{}", String::from_utf8_lossy(&data));
                    }
                }
                Some(0) => prop_assert!(out.contains("verified"), "{out}"),
                // The error paragraph, after any note of the knobs the device profile filled in.
                Some(2) => {
                    let error = err.lines().skip_while(|l| l.starts_with("mkc: ")).collect::<Vec<_>>().join("\n");
                    prop_assert!(error.starts_with("error: ") && error.contains("Fix") || error.contains("README"), "{args:?}: {err}");
                }
                other => prop_assert!(false, "{args:?} exited {other:?}: {err}\ninput:\n{}", String::from_utf8_lossy(&data)),
            }
        }
        std::fs::remove_file(&path).ok();
    }
}
