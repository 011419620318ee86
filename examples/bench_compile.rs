//! Benchmark of `mkc compile`: wall time of the real command (process start included) for each
//! model, target and heuristic policy; median of several runs. Build the release binary first:
//!
//! ```text
//! cargo build --release && cargo run --release --example bench_compile
//! ```

use std::process::Command;
use std::time::Instant;

const RUNS: usize = 15;

fn main() {
    let exe = std::env::var("MKC").unwrap_or_else(|_| "target/release/mkc".to_string());
    println!("model     target      policy        median ms   max ms   ({RUNS} runs each, {exe})");
    for model in ["llama1b", "llama3b", "llama8b"] {
        for (target, policy) in [
            ("persistent", "round-robin"),
            ("persistent", "list"),
            ("pdl", "-"),
            ("graph", "-"),
        ] {
            let mut args = vec!["compile", model, "--target", target];
            if policy != "-" {
                args.extend(["--policy", policy]);
            }
            let mut times: Vec<f64> = (0..RUNS)
                .map(|_| {
                    let start = Instant::now();
                    let out = Command::new(&exe).args(&args).output().expect("mkc runs");
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    start.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            times.sort_by(f64::total_cmp);
            println!(
                "{model:<9} {target:<11} {policy:<13} {:>9.1} {:>8.1}",
                times[RUNS / 2],
                times[RUNS - 1]
            );
        }
    }
}
