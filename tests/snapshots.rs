//! Snapshot tests, as cranelift's filetests: the tiny model's schedules, the compile summaries,
//! the `mkc kernels` table and `mkc calibrate`'s are compared with the files under `tests/snapshots/`. A change
//! that alters one fails here with the first differing line; when the change is intended,
//! `MKC_BLESS=1 cargo test --release --test snapshots` rewrites the files, and the diff of
//! the commit shows what changed.

use std::path::PathBuf;
use std::process::Command;

mod common;

use common::scratch;

fn snapshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// Compares `actual` with the snapshot `name`, or rewrites it when blessing.
fn check(name: &str, actual: &str) {
    let path = snapshot_dir().join(name);
    if std::env::var_os("MKC_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no snapshot {}: run MKC_BLESS=1 cargo test --release --test snapshots",
            path.display()
        )
    });
    if expected != actual {
        let (n, (e, a)) = expected
            .lines()
            .chain(std::iter::repeat("<end>"))
            .zip(actual.lines().chain(std::iter::repeat("<end>")))
            .enumerate()
            .find(|(_, (e, a))| e != a)
            .expect("the texts differ somewhere");
        panic!(
            "{name} differs from its snapshot at line {}:\n  expected: {e}\n  actual:   {a}\n\
             If the change is intended: MKC_BLESS=1 cargo test --release --test snapshots",
            n + 1
        );
    }
}

fn mkc(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_mkc"))
        .args(args)
        .output()
        .expect("mkc runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.success(), text(&o.stdout), text(&o.stderr))
}

#[test]
fn tiny_schedules_match_their_snapshots() {
    for target in ["persistent", "pdl", "graph"] {
        let out = scratch(&format!("{target}.json"));
        let (ok, _, err) = mkc(&[
            "compile",
            "tiny",
            "--target",
            target,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(ok, "{err}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        // Pretty, so that a difference is a line.
        let text = serde_json::to_string_pretty(&v).unwrap() + "\n";
        check(&format!("tiny_{target}.schedule.json"), &text);
    }
}

#[test]
fn compile_summaries_match_their_snapshots() {
    for (model, target) in [
        ("tiny", "persistent"),
        ("tiny", "pdl"),
        ("llama1b", "persistent"),
        ("llama1b", "pdl"),
    ] {
        // Declared resources: the same text with or without NVRTC installed.
        let (ok, out, err) = mkc(&[
            "compile",
            model,
            "--target",
            target,
            "--resources",
            "declared",
        ]);
        assert!(ok, "{err}");
        check(&format!("{model}_{target}.summary.txt"), &out);
    }
}

#[test]
fn the_kernels_table_matches_its_snapshot() {
    let (ok, out, err) = mkc(&["kernels"]);
    if !ok {
        assert!(err.contains("NVRTC"), "{err}");
        eprintln!("SKIPPED: no NVRTC library found (the kernels table needs compiled kernels)");
        return;
    }
    check("llama1b.kernels.txt", &out);
}

/// The simulator against every recorded GPU measurement (`mkc calibrate`): a change to the
/// model or a profile shows, in this snapshot's diff, which measured steps it moved and how far.
#[test]
fn calibration_matches_its_snapshot() {
    let record = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("measured/steps.ron");
    let (ok, out, err) = mkc(&["calibrate", record.to_str().unwrap()]);
    assert!(ok, "{err}");
    if out.lines().next().is_some_and(|l| l.contains("no NVRTC")) {
        eprintln!("SKIPPED: no NVRTC library found (bench's predictions use compiled kernels)");
        return;
    }
    // The record's path as the repository names it, wherever the checkout is.
    let text = out.replace(record.to_str().unwrap(), "measured/steps.ron");
    check("calibrate.txt", &text);
}
