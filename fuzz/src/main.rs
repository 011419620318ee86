//! The stable-toolchain fuzz driver: mutates the seed corpus of a target for a while and
//! stops at the first panic, writing the input that caused it.
//!
//! `cargo run -p mkc-fuzz --release -- TARGET [SECONDS] [SEED]` (targets: model, device,
//! sweep, schedule, checkpoint; `all` runs each in turn). A reproducer lands in
//! `fuzz/artifacts/TARGET-SEED-N.txt`; rerun it with `-- TARGET --replay FILE`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use mkc_fuzz::{Mutator, Target, TARGETS};

fn usage() -> ! {
    eprintln!(
        "usage: mkc-fuzz TARGET|all [SECONDS] [SEED] | TARGET --replay FILE (targets: {})",
        TARGETS
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first() else { usage() };
    if args.get(1).map(String::as_str) == Some("--replay") {
        let target = Target::named(name).unwrap_or_else(|| usage());
        let data = std::fs::read(args.get(2).unwrap_or_else(|| usage())).unwrap_or_else(|e| {
            eprintln!("cannot read the reproducer: {e}");
            std::process::exit(2)
        });
        let accepted = target.run(&data);
        println!(
            "no panic ({})",
            if accepted { "accepted" } else { "refused" }
        );
        return;
    }
    let seconds: u64 = args
        .get(1)
        .map_or(Some(60), |s| s.parse().ok())
        .unwrap_or_else(|| usage());
    let seed: u64 = args.get(2).map_or_else(
        || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        },
        |s| s.parse().unwrap_or_else(|_| usage()),
    );
    let targets: Vec<(&str, Target)> = if name == "all" {
        TARGETS.to_vec()
    } else {
        vec![(
            name.as_str(),
            Target::named(name).unwrap_or_else(|| usage()),
        )]
    };
    // Panics are findings, reported below; the default hook's message would repeat them.
    std::panic::set_hook(Box::new(|_| {}));
    for (name, target) in &targets {
        let budget = Duration::from_secs(seconds / targets.len() as u64);
        let (runs, accepted, failure) = fuzz(*target, seed, budget);
        match failure {
            None => println!("{name}: {runs} inputs ({accepted} accepted), no panic (seed {seed})"),
            Some((n, data, message)) => {
                let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts");
                std::fs::create_dir_all(&dir).ok();
                let path = dir.join(format!("{name}-{seed}-{n}.txt"));
                std::fs::write(&path, &data).ok();
                println!(
                    "{name}: input {n} (seed {seed}) panicked: {message}\n  reproducer: {}",
                    path.display()
                );
                std::process::exit(1);
            }
        }
    }
}

/// A finding: the input's number, its bytes and the panic's message.
type Finding = (u64, Vec<u8>, String);

/// Runs `target` on mutated seeds for `budget`: the count of inputs, of those accepted, and
/// the first that panicked.
fn fuzz(target: Target, seed: u64, budget: Duration) -> (u64, u64, Option<Finding>) {
    let seeds = target.seeds();
    let mut m = Mutator::new(seed);
    let start = Instant::now();
    let (mut n, mut accepted) = (0, 0);
    while start.elapsed() < budget {
        let base = &seeds[m.rng.below(seeds.len())];
        let data = m.mutate(base);
        n += 1;
        match catch_unwind(AssertUnwindSafe(|| target.run(&data))) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(p) => {
                let message = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                return (n, accepted, Some((n, data, message)));
            }
        }
    }
    (n, accepted, None)
}
