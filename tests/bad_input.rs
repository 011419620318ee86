//! Every bad-input reproducer from the adversarial review, each answered as promised: exit 2
//! with one paragraph naming the file or flag, the field and the fix; a cap with the flag that
//! lifts it for legal but large work; never a panic, a hang or a silently wrong number.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;

use common::{mkc_within, scratch};

fn mkc(args: &[&str]) -> Output {
    mkc_within(args, Duration::from_secs(60))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts exit 2 with one error paragraph and no panic, containing every needle; returns it.
fn refused(args: &[&str], needles: &[&str]) -> String {
    let o = mkc(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in: {err}");
    }
    err
}

/// Writes `text` as `name` in the scratch directory and returns its path.
fn file(name: &str, text: &str) -> String {
    let p = scratch(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// `base` (a file under models/ or devices/) with each `(from, to)` replaced once.
fn edited(base: &str, edits: &[(&str, &str)]) -> String {
    let mut t = std::fs::read_to_string(base).unwrap();
    for (from, to) in edits {
        assert!(t.contains(from), "{base} lacks {from}");
        t = t.replacen(from, to, 1);
    }
    t
}

fn tiny_with(name: &str, edits: &[(&str, &str)]) -> String {
    file(name, &edited("models/tiny.ron", edits))
}

#[test]
fn products_of_fields_cannot_overflow() {
    let m = tiny_with(
        "overflow.ron",
        &[
            ("hidden: 64", "hidden: 4096"),
            ("heads: 4", "heads: 4096"),
            ("kv_heads: 2", "kv_heads: 4096"),
            ("head_dim: 16", "head_dim: 1048576"),
            ("intermediate: 128", "intermediate: 4096"),
        ],
    );
    for cmd in [vec!["compile", &m, "--verify"], vec!["simulate", &m]] {
        refused(&cmd, &[&m, "geometry.head_dim", "heads x head_dim"]);
    }
}

#[test]
fn time_limits_beyond_a_day_are_refused_before_converting() {
    refused(
        &[
            "compile",
            "tiny",
            "--policy",
            "ilp",
            "--ilp-time-limit",
            "1e21",
        ],
        &["--ilp-time-limit", "at most 86400"],
    );
    // Refused by the flag's parser, on any machine, before a GPU is looked for.
    refused(
        &["run", "--watchdog", "1e300"],
        &["--watchdog", "at most 86400"],
    );
    refused(&["bench", "--watchdog", "-1"], &["--watchdog"]);
}

#[test]
fn closed_or_full_stdout_never_panics() {
    let cases: Vec<Vec<&str>> = vec![
        vec!["simulate", "tiny", "--json"],
        vec!["simulate", "tiny"],
        vec!["simulate", "tiny", "--sweep", "sweeps/example.ron"],
        vec![
            "occupancy",
            "--arch",
            "sm_90",
            "--threads",
            "128",
            "--regs",
            "32",
        ],
        vec!["compile", "tiny"],
        vec!["completions", "bash"],
    ];
    for args in &cases {
        // A reader that stops at once (`| head -c0`): quiet success.
        let mut child = Command::new(env!("CARGO_BIN_EXE_mkc"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        // A full device: one line saying so, exit 2.
        if std::path::Path::new("/dev/full").exists() {
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap();
            let o = Command::new(env!("CARGO_BIN_EXE_mkc"))
                .args(args)
                .stdout(full)
                .output()
                .unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("cannot write to standard output"), "{err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}

#[test]
fn a_checkpoint_config_without_heads_is_refused_before_any_gpu_work() {
    let dir = scratch("ckpt-zero-heads");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 0}"#,
    )
    .unwrap();
    let d = dir.to_str().unwrap();
    refused(
        &["run", "tiny", "--weights", d],
        &["num_attention_heads", "is 0"],
    );
    std::fs::write(
        dir.join("config.json"),
        r#"{"model_type": "llama", "hidden_size": "64"}"#,
    )
    .unwrap();
    refused(
        &["run", "tiny", "--weights", d],
        &["hidden_size", "not a whole number"],
    );
}

#[test]
fn legal_but_large_work_is_capped_with_the_flag_that_lifts_it() {
    let long = file(
        "long.ron",
        &edited(
            "models/llama1b.ron",
            &[
                ("generate: 128", "generate: 1000000"),
                ("max_seq_len: 2048", "max_seq_len: 1048576"),
            ],
        ),
    );
    let o = mkc_within(
        &["simulate", &long, "--trajectory", "--target", "persistent"],
        Duration::from_secs(20),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--max-task-steps"), "{}", stderr(&o));
    // The chain targets' attention CTA cannot stage a million scores: refused by field.
    refused(
        &["simulate", &long, "--target", "pdl"],
        &["workload.max_seq_len"],
    );
    // 10^9 configurations are refused before they are allocated.
    let list = |n: usize, v: &str| vec![v; n].join(", ");
    let spec = file(
        "huge.ron",
        &format!(
            "Sweep(sms: [{}], signal_ns: [{}], launch_gap_ns: [{}])",
            list(1000, "66"),
            list(1000, "100.0"),
            list(1000, "100.0")
        ),
    );
    let o = mkc_within(
        &["simulate", "tiny", "--sweep", &spec],
        Duration::from_secs(20),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("3000000000 configurations"),
        "{}",
        stderr(&o)
    );
    // 10^6 configurations of Llama-3.2-1B: refused; a small spec with a raised cap runs.
    let spec = file(
        "million.ron",
        &format!(
            "Sweep(targets: [graph], sms: [{}], signal_ns: [{}])",
            list(1000, "66"),
            list(1000, "1.0")
        ),
    );
    refused(
        &["simulate", "llama1b", "--sweep", &spec],
        &["--max-task-steps"],
    );
    let small = file("small.ron", "Sweep(targets: [graph], sms: [66, 132])");
    refused(
        &[
            "simulate",
            "llama1b",
            "--sweep",
            &small,
            "--max-task-steps",
            "1000",
        ],
        &["--max-task-steps"],
    );
    // The largest lowering is bounded (it once took 7.8 GB): 4,096 layers of Llama-3.2-1B.
    let big = file(
        "big.ron",
        &edited("models/llama1b.ron", &[("layers: 16", "layers: 4096")]),
    );
    refused(
        &["compile", &big, "--verify"],
        &["lowering.matvec_task_pages", "1000000"],
    );
}

#[test]
fn files_that_are_not_regular_files_are_refused_without_reading() {
    #[cfg(unix)]
    {
        let fifo = scratch("model.fifo");
        std::fs::remove_file(&fifo).ok();
        let made = Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let f = fifo.to_str().unwrap();
            let o = mkc_within(&["compile", f], Duration::from_secs(10));
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
            let o = mkc_within(&["compile", "tiny", "--device", f], Duration::from_secs(10));
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            // An output FIFO that nothing reads is refused instead of blocking.
            for args in [
                vec!["compile", "tiny", "-o", f],
                vec!["simulate", "tiny", "--target", "pdl", "--trace", f],
                vec![
                    "simulate",
                    "tiny",
                    "--sweep",
                    "sweeps/example.ron",
                    "--csv",
                    f,
                ],
            ] {
                let o = mkc_within(&args, Duration::from_secs(10));
                assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
                assert!(stderr(&o).contains("nothing reads"), "{}", stderr(&o));
            }
        }
    }
    if std::path::Path::new("/dev/zero").exists() {
        refused(
            &["compile", "/dev/zero"],
            &["/dev/zero", "not a regular file"],
        );
        refused(
            &["simulate", "tiny", "--sweep", "/dev/zero"],
            &["not a regular file"],
        );
    }
}

#[test]
fn kernels_that_cannot_launch_are_refused_by_every_command() {
    for (name, edit) in [
        (
            "smem.ron",
            "kernel: (threads: 256, registers: 64, dynamic_smem_bytes: 4294967295)",
        ),
        (
            "regs.ron",
            "kernel: (threads: 1024, registers: 255, dynamic_smem_bytes: 0)",
        ),
    ] {
        let m = tiny_with(
            name,
            &[(
                "kernel: (threads: 256, registers: 64, dynamic_smem_bytes: 65536)",
                edit,
            )],
        );
        for cmd in [
            vec!["compile", m.as_str()],
            vec!["compile", m.as_str(), "--target", "pdl"],
            vec!["simulate", m.as_str()],
            vec!["simulate", m.as_str(), "--sweep", "sweeps/example.ron"],
        ] {
            refused(&cmd, &[&m, "lowering.kernel", "cannot launch"]);
        }
    }
}

#[test]
fn pdl_on_a_device_without_it_is_refused_everywhere() {
    refused(
        &["compile", "--device", "a100", "--target", "pdl"],
        &["a100", "pdl"],
    );
    let spec = file("pdl.ron", "Sweep(targets: [pdl])");
    refused(
        &["simulate", "tiny", "--device", "a100", "--sweep", &spec],
        &["a100"],
    );
    refused(
        &["simulate", "tiny", "--device", "a100", "--target", "pdl"],
        &["a100"],
    );
}

#[test]
fn every_field_of_a_device_profile_is_used_or_refused() {
    let zero_limits = file(
        "zero.ron",
        &edited(
            "devices/h200.ron",
            &[
                ("registers_per_sm: 65536", "registers_per_sm: 0"),
                ("threads_per_sm: 2048", "threads_per_sm: 0"),
            ],
        ),
    );
    refused(
        &["compile", "tiny", "--device", &zero_limits],
        &["limits.registers_per_sm"],
    );
    // The profile's limits decide occupancy: an SM with half the registers cannot hold the
    // launch plan's QKV CTA (288 threads of 120 registers), and says so.
    let few = file(
        "few.ron",
        &edited(
            "devices/h200.ron",
            &[("registers_per_sm: 65536", "registers_per_sm: 32768")],
        ),
    );
    refused(
        &["simulate", "tiny", "--device", &few, "--target", "pdl"],
        &["k_qkv_rope CTA", "registers"],
    );
    let clock = file(
        "clock.ron",
        &edited(
            "devices/h200.ron",
            &[("sms: 132,", "sms: 132, sm_clock_mhz: 1980,")],
        ),
    );
    refused(
        &["compile", "tiny", "--device", &clock],
        &["sm_clock_mhz", "Device profile format"],
    );
    // Fast SMs are some of the card's, and faster.
    for (name, from, to, words) in [
        (
            "fast_count.ron",
            "count: 12",
            "count: 200",
            ["fast_sms.count", "200 fast SMs of 132"],
        ),
        (
            "fast_speedup.ron",
            "speedup: 1.31",
            "speedup: 0.5",
            ["fast_sms.speedup", "outside 1 to 4"],
        ),
    ] {
        let d = file(name, &edited("devices/h200.ron", &[(from, to)]));
        refused(
            &["compile", "tiny", "--device", &d],
            &[name, words[0], words[1]],
        );
    }
    // A card's knob defaults are checked as a model's are, and cannot replace the kernels.
    let card_knob = file(
        "card_knob.ron",
        &edited(
            "devices/h100.ron",
            &[(
                "persistent_boundary_inflight: Some(1)",
                "persistent_boundary_inflight: Some(17)",
            )],
        ),
    );
    refused(
        &["compile", "tiny", "--device", &card_knob],
        &[
            "card_knob.ron",
            "tuning.persistent_boundary_inflight",
            "between 0 and 16",
        ],
    );
    let card_cu = file(
        "card_cu.ron",
        &edited(
            "devices/h100.ron",
            &[(
                "persistent_boundary_inflight: Some(1)",
                "persistent_boundary_inflight: Some(1), kernels_cu: Some(\"v.cu\")",
            )],
        ),
    );
    refused(
        &["compile", "tiny", "--device", &card_cu],
        &["card_cu.ron", "tuning.kernels_cu", "Fix"],
    );
    let slow = file(
        "slow.ron",
        &edited(
            "devices/h200.ron",
            &[("launch_gap_ns: 1660.0", "launch_gap_ns: 1e308")],
        ),
    );
    refused(
        &["simulate", "tiny", "--device", &slow],
        &["latencies.launch_gap_ns"],
    );
    refused(
        &["simulate", "tiny", "--bandwidth", "1e-300"],
        &["--bandwidth"],
    );
}

#[test]
fn rope_theta_and_norm_eps_must_fit_f32() {
    let m = tiny_with("theta.ron", &[("rope_theta: 10000.0", "rope_theta: 1e39")]);
    refused(&["compile", &m], &["geometry.rope_theta"]);
    let m = tiny_with("eps.ron", &[("norm_eps: 1e-5", "norm_eps: 1e39")]);
    refused(&["compile", &m], &["geometry.norm_eps"]);
}

#[test]
fn occupancy_neither_wraps_nor_misreads_the_architecture() {
    let base = [
        "occupancy",
        "--arch",
        "sm_90",
        "--threads",
        "128",
        "--regs",
        "32",
    ];
    let mut args = base.to_vec();
    args.extend(["--static-smem", "4294967295", "--dyn-smem", "1"]);
    refused(&args, &["4294967296 bytes"]);
    refused(
        &[
            "occupancy",
            "--arch",
            "sm_90aaaa",
            "--threads",
            "128",
            "--regs",
            "32",
        ],
        &["sm_90aaaa"],
    );
    // The carveout is a hint: 0% with a CTA of 2 KiB takes the 8 KiB carveout.
    let mut args = base.to_vec();
    args.extend(["--dyn-smem", "1024", "--carveout", "0", "--json"]);
    let o = mkc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["blocks_per_sm"].as_u64(), v["schema"].as_str()),
        (Some(4), Some("mkc.occupancy/1"))
    );
}

#[test]
fn flags_that_would_be_ignored_are_refused_by_name() {
    let sweep = "sweeps/example.ron";
    for extra in [
        vec!["--target", "pdl"],
        vec!["--grids", "fused"],
        vec!["--trigger", "late"],
        vec!["--coresidency"],
        vec!["--phase-release"],
        vec!["--policy", "list"],
        vec!["--json"],
        vec!["--trace", "t.json"],
        vec!["--trajectory"],
    ] {
        let mut args = vec!["simulate", "tiny", "--sweep", sweep];
        args.extend(&extra);
        refused(&args, &[extra[0]]);
    }
    refused(
        &["simulate", "tiny", "--csv", "x.csv"],
        &["--csv", "--sweep"],
    );
    refused(
        &["compile", "tiny", "--target", "pdl", "--policy", "list"],
        &["--policy"],
    );
    refused(&["compile", "tiny", "--trigger", "late"], &["--trigger"]);
    refused(
        &["compile", "tiny", "--target", "graph", "--trigger", "late"],
        &["--trigger"],
    );
    refused(&["compile", "tiny", "--grids", "fused"], &["--grids"]);
    refused(
        &["compile", "tiny", "--ilp-time-limit", "5"],
        &["--ilp-time-limit"],
    );
    refused(&["compile", "tiny", "--format", "json"], &["--format"]);
    refused(
        &[
            "simulate",
            "tiny",
            "--target",
            "persistent",
            "--coresidency",
        ],
        &["--coresidency"],
    );
    refused(
        &["simulate", "tiny", "--target", "graph", "--trigger", "late"],
        &["--trigger"],
    );
    refused(
        &["run", "--target", "graph", "--trigger", "late"],
        &["--trigger"],
    );
    refused(
        &["bench", "--targets", "graph", "--trigger", "late"],
        &["--trigger"],
    );
    // --summary-json keeps the verify result.
    let o = mkc(&["compile", "tiny", "--verify", "--summary-json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["verified"].as_bool(), v["schema"].as_str()),
        (Some(true), Some("mkc.compile/1"))
    );
}

#[test]
fn kernels_for_another_architecture_are_refused_in_one_line() {
    for arch in ["sm_80", "sm_91", "sm_90"] {
        let err = refused(&["kernels", "--arch", arch], &["sm_90a"]);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn parse_errors_name_the_field_its_range_and_the_right_readme_section() {
    let m = file("utf8.ron", "Model(\n  name: \"x\",\n  geo\u{0}");
    let mut bytes = std::fs::read(&m).unwrap();
    bytes.pop();
    bytes.push(0xff);
    std::fs::write(&m, bytes).unwrap();
    refused(&["compile", &m], &[":3:6", "UTF-8"]);
    for (name, value, needles) in [
        (
            "neg.ron",
            "hidden: -64",
            vec!["geometry.hidden", "-64", "from 1 to 1048576"],
        ),
        (
            "wide.ron",
            "hidden: 4294967296",
            vec!["geometry.hidden", "from 1 to 1048576"],
        ),
        (
            "float.ron",
            "hidden: 64.0",
            vec!["geometry.hidden", "64.0", "whole number"],
        ),
        (
            "string.ron",
            "hidden: \"64\"",
            vec!["geometry.hidden", "whole number"],
        ),
    ] {
        let m = tiny_with(name, &[("hidden: 64", value)]);
        let mut n = needles.clone();
        n.push("Model file format");
        refused(&["compile", &m], &n);
    }
    let m = tiny_with("dtype.ron", &[("dtype: Bf16", "dtype: 1")]);
    let err = refused(&["compile", &m], &["geometry.dtype", "Bf16"]);
    assert!(!err.contains("r#"), "{err}");
    let d = file(
        "dev.ron",
        &edited("devices/h200.ron", &[("sms: 132", "sms: -1")]),
    );
    refused(
        &["compile", "tiny", "--device", &d],
        &["field `sms`", "Device profile format"],
    );
    let spec = file("spec.ron", "Sweep(sms: [8, -2])");
    refused(
        &["simulate", "tiny", "--sweep", &spec],
        &["Sweep spec format"],
    );
    let spec = file("lat.ron", "Sweep(signal_ns: [100.0, -1.0])");
    refused(
        &["simulate", "tiny", "--sweep", &spec],
        &[&spec, "signal_ns[1]"],
    );
    // A long unknown field is echoed cut; a file of 10^7 characters is not read at all.
    let long = "x".repeat(500_000);
    let m = tiny_with("long.ron", &[("layers: 2", &format!("{long}: 2"))]);
    let err = refused(&["compile", &m], &["500000 characters"]);
    assert!(err.len() < 2000, "{} characters", err.len());
    let huge = "x".repeat(10_000_000);
    let m = tiny_with("huge.ron", &[("layers: 2", &format!("{huge}: 2"))]);
    let err = refused(&["compile", &m], &["more than the 1048576", "model file"]);
    assert!(err.len() < 2000, "{} characters", err.len());
    let a = refused(&["compile", "--sms", "-5"], &["--sms", "from 1 to 4096"]);
    let b = refused(&["compile", "--sms=-5"], &["--sms", "from 1 to 4096"]);
    assert_eq!(a, b);
}

#[test]
fn completions_are_generated_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let o = mkc(&["completions", shell]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains("simulate"), "{shell}");
    }
}

/// Each field of a device profile decides something: changed to a value that binds, it
/// changes what `simulate` prints for Llama-3.2-1B, or it is refused. A field parsed and
/// never used would leave the output byte-identical.
#[test]
fn every_device_field_changes_the_prediction_or_is_refused() {
    // Two models, since a limit may bind for one only (tiny fits 3 CTAs per SM, Llama-3.2-1B's
    // declared CTA one).
    let run = |model: &str, device: &str| {
        mkc(&[
            "simulate", model, "--target", "all", "--json", "--device", device,
        ])
    };
    let models = ["tiny", "llama1b"];
    // Whether `(from, to)` changes the output or is refused, against the profile with
    // `context` applied to both (the unheld release binds only where the producer is unheld).
    let decides = |context: &[(&str, &str)], from: &str, to: &str| {
        let name = &from[..from.find(':').unwrap()];
        let base_file = file(
            &format!("base-{name}.ron"),
            &edited("devices/h200.ron", context),
        );
        let base: Vec<Output> = models.iter().map(|m| run(m, &base_file)).collect();
        assert!(base.iter().all(|o| o.status.success()));
        let mut edits = context.to_vec();
        edits.push((from, to));
        let d = file(
            &format!("field-{name}.ron"),
            &edited("devices/h200.ron", &edits),
        );
        let mut decided = false;
        for (m, b) in models.iter().zip(&base) {
            let o = run(m, &d);
            match o.status.code() {
                Some(0) => decided |= stdout(&o) != stdout(b),
                Some(2) => {
                    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
                    decided = true;
                }
                other => panic!("{to}: exit {other:?}: {}", stderr(&o)),
            }
        }
        assert!(decided, "{to} changed nothing for {models:?}");
    };
    for (from, to) in [
        ("sms: 132,", "sms: 8,"),
        ("read_bandwidth_gbps: 4480.0", "read_bandwidth_gbps: 100.0"),
        (
            "sm_read_bandwidth_gbps: 68.0",
            "sm_read_bandwidth_gbps: 1.0",
        ),
        ("registers_per_sm: 65536", "registers_per_sm: 16384"),
        ("threads_per_sm: 2048", "threads_per_sm: 256"),
        ("ctas_per_sm: 32", "ctas_per_sm: 1"),
        ("smem_per_sm: 233472", "smem_per_sm: 102400"),
        (
            "smem_per_block_optin: 232448",
            "smem_per_block_optin: 32768",
        ),
        (
            "smem_reserved_per_cta: 1024",
            "smem_reserved_per_cta: 60000",
        ),
        ("threads_per_block: 1024", "threads_per_block: 128"),
        ("registers_per_thread: 255", "registers_per_thread: 32"),
        ("launch_gap_ns: 1660.0", "launch_gap_ns: 16600.0"),
        ("pdl_wait_release_ns: 500.0", "pdl_wait_release_ns: 5000.0"),
        ("cta_admission_ns: 200.0", "cta_admission_ns: 2000.0"),
        ("signal_visible_ns: 500.0", "signal_visible_ns: 5000.0"),
        (
            "instruction_overhead_ns: 300.0",
            "instruction_overhead_ns: 3000.0",
        ),
        ("load_latency_ns: 1400.0", "load_latency_ns: 14000.0"),
        (
            "release_held_ns: Some(530.0)",
            "release_held_ns: Some(5300.0)",
        ),
        ("speedup: 1.31", "speedup: 2.0"),
        ("count: 12", "count: 66"),
    ] {
        decides(&[], from, to);
    }
    // The h200 profile does not set the held activation latency; one that does decides.
    decides(
        &[(
            "release_held_ns: Some(530.0),",
            "release_held_ns: Some(530.0), load_latency_held_ns: Some(400.0),",
        )],
        "load_latency_held_ns: Some(400.0)",
        "load_latency_held_ns: Some(4000.0)",
    );
    // The profile holds its producer (tuning.persistent_boundary_inflight 1), so the unheld
    // release decides where a model's tuning lifts the hold.
    decides(
        &[(
            "persistent_boundary_inflight: Some(1)",
            "persistent_boundary_inflight: Some(16)",
        )],
        "release_ns: 1300.0",
        "release_ns: 13000.0",
    );
    let barrier = file(
        "barrier.ron",
        &edited(
            "devices/h200.ron",
            &[(
                "launch_gap_ns: 1660.0,",
                "launch_gap_ns: 1660.0, barrier_ns: 60.0,",
            )],
        ),
    );
    refused(&["compile", "tiny", "--device", &barrier], &["barrier_ns"]);
}

/// A persistent ring the kernel's shared memory cannot hold is refused naming the knob and its
/// largest value wherever the kernel would be built or run; `compile` still writes the plan
/// (with the declared CTA, for the simulator) and says why; a knob out of its range is refused
/// naming the file.
#[test]
fn a_persistent_ring_that_does_not_fit_is_refused_with_its_largest_size() {
    let big = file("slots14.ron", "Tuning(persistent_slots: 14)");
    let model = "models/llama1b_tuned.ron";
    refused(
        &["kernels", "--model", model, "--persistent", "--tune", &big],
        &[
            "tuning.persistent_slots 14",
            "Fix: set tuning.persistent_slots to at most 13",
        ],
    );
    let out = scratch("slots14.json");
    let compile = |tune: &str| {
        let args = [
            "compile",
            model,
            "--target",
            "persistent",
            "--tune",
            tune,
            "-o",
        ];
        let mut args = args.to_vec();
        args.push(out.to_str().unwrap());
        mkc(&args)
    };
    let o = compile(&big);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the persistent kernel cannot run this model"),
        "{}",
        stderr(&o)
    );
    let o = compile(&file("slots13.ron", "Tuning(persistent_slots: 13)"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("cannot run"), "{}", stderr(&o));
    // Each knob out of its range is refused by file and field (the stream's cap cannot be 0:
    // the producer would never issue a page).
    for (name, text, field, range) in [
        (
            "slots17.ron",
            "persistent_slots: 17",
            "persistent_slots",
            "between 1 and 16",
        ),
        (
            "inflight17.ron",
            "persistent_boundary_inflight: 17",
            "persistent_boundary_inflight",
            "between 0 and 16",
        ),
        (
            "stream0.ron",
            "persistent_stream_inflight: 0",
            "persistent_stream_inflight",
            "between 1 and 16",
        ),
    ] {
        let tune = file(name, &format!("Tuning({text})"));
        let field = format!("tuning.{field}");
        refused(
            &["compile", model, "--target", "persistent", "--tune", &tune],
            &[name, &field, range],
        );
    }
}

/// A checkpoint MLP wider than the model's, or of width 0, is refused by field: the loader pads,
/// never cuts.
#[test]
fn a_checkpoint_mlp_wider_than_the_model_is_refused_by_field() {
    for (tag, stored) in [("wide", "136"), ("zero", "0")] {
        let m = tiny_with(
            &format!("ckpt_mlp_{tag}.ron"),
            &[(
                "intermediate: 128,",
                &format!("intermediate: 128, checkpoint_intermediate: Some({stored}),"),
            )],
        );
        refused(
            &["simulate", &m],
            &["geometry.checkpoint_intermediate", "Fix"],
        );
    }
}

/// A checkpoint head as wide as the model's or wider, odd, or of width 0 is refused by field
/// (the loader pads, never cuts, and RoPE rotates pairs); a head width the kernels cannot read
/// is refused with the padding that fixes it.
#[test]
fn a_checkpoint_head_not_narrower_than_the_model_is_refused_by_field() {
    for (tag, stored) in [("wide", "24"), ("same", "16"), ("odd", "9"), ("zero", "0")] {
        let m = tiny_with(
            &format!("ckpt_head_{tag}.ron"),
            &[(
                "head_dim: 16,",
                &format!("head_dim: 16, checkpoint_head_dim: Some({stored}),"),
            )],
        );
        refused(&["simulate", &m], &["geometry.checkpoint_head_dim", "Fix"]);
    }
    let m = tiny_with("head_12.ron", &[("head_dim: 16,", "head_dim: 12,")]);
    refused(
        &["simulate", &m],
        &[
            "geometry.head_dim",
            "head_dim to 16 and checkpoint_head_dim: Some(12)",
        ],
    );
}

/// Split-KV parts that could never hold a position, and a shard count that would split one
/// head group's partial records between two counters, are refused by file and field.
#[test]
fn split_kv_parts_beyond_the_history_or_across_shards_are_refused() {
    let model = "models/llama1b_tuned.ron";
    let split = |name: &str, parts: &str, shards: Option<&str>| {
        let mut edits = vec![(
            "attention_split: 4,",
            format!("attention_split: 4, attention_kv_split: {parts},"),
        )];
        if let Some(s) = shards {
            edits.push((
                "vtp_shards: (up_gate_down: 4)",
                format!("vtp_shards: (up_gate_down: 4, attention_o_proj: {s})"),
            ));
        }
        let edits: Vec<(&str, &str)> = edits.iter().map(|(a, b)| (*a, b.as_str())).collect();
        file(name, &edited(model, &edits))
    };
    let past = split("kv_past.ron", "4096", None);
    refused(
        &["compile", &past],
        &[&past, "lowering.attention_kv_split", "max_seq_len"],
    );
    let across = split("kv_across.ron", "2", Some("64"));
    refused(
        &["compile", &across],
        &[&across, "lowering.vtp_shards.attention_o_proj"],
    );
    // Within both, the same parts compile to a verified schedule.
    let fine = split("kv_fine.ron", "4", Some("4"));
    let o = mkc(&["compile", &fine, "--verify"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Attention inside the O-projection is the persistent target's: the chain targets lower the
/// file without it (and say so), compiling to a verified schedule with attention an operator of
/// its own (a GPU run gives them a runner of their own); the options it cannot combine with are
/// refused by file and field.
#[test]
fn attention_inside_the_o_projection_is_the_persistent_targets_alone() {
    let model = "models/llama1b_fused.ron";
    let o = mkc(&["simulate", model, "--target", "all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("pdl and graph lower this model without lowering.attention_in_o_proj"),
        "{}",
        stderr(&o)
    );
    // pdl on the fused file is pdl on the tuned file: the same lowering, the same kernels'
    // figures, the same prediction.
    let pdl = |file: &str| {
        let o = mkc(&["simulate", file, "--target", "pdl", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        v.to_string()
            .replace("llama-3.2-1b-fused", "M")
            .replace("llama-3.2-1b-tuned", "M")
    };
    assert_eq!(pdl(model), pdl("models/llama1b_tuned.ron"));
    let out = scratch("fused_pdl.json");
    let out = out.to_str().unwrap();
    let o = mkc(&["compile", model, "--target", "pdl", "--verify", "-o", out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = mkc_scheduler::Schedule::load(std::path::Path::new(out)).unwrap();
    let kinds: Vec<_> = s.graph.ops.iter().map(|o| o.kind).collect();
    assert!(kinds.contains(&mkc_ir::OpKind::Attention), "{kinds:?}");
    assert_eq!(s.model.unwrap().lowering.attention_in_o_proj, None);
    let split = file(
        "fused_kv.ron",
        &edited(
            model,
            &[(
                "attention_in_o_proj: Some(4),",
                "attention_in_o_proj: Some(4), attention_kv_split: 2,",
            )],
        ),
    );
    refused(
        &["compile", &split, "--target", "persistent"],
        &[&split, "lowering.attention_in_o_proj", "attention_kv_split"],
    );
    let sharded = file(
        "fused_qkv.ron",
        &edited(
            model,
            &[(
                "vtp_shards: (up_gate_down: 4)",
                "vtp_shards: (up_gate_down: 4, qkv_attention: 4)",
            )],
        ),
    );
    refused(
        &["compile", &sharded, "--target", "persistent"],
        &[&sharded, "lowering.attention_in_o_proj", "qkv_attention"],
    );
    let o = mkc(&["compile", model, "--target", "persistent", "--verify"]);
    assert!(o.status.success(), "{}", stderr(&o));
}
