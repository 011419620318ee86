//! End-to-end tests of the `mkc` binary: the summary contract, determinism, and bad input.

use std::process::{Command, Output};

mod common;

use common::scratch;

fn mkc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mkc"))
        .args(args)
        .output()
        .expect("mkc runs")
}

/// `mkc ARGS... FILE` with its kernel-figure cache in `cache`.
fn mkc_cached(args: &[&str], file: &std::path::Path, cache: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mkc"))
        .args(args)
        .arg(file)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("mkc runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn summary(args: &[&str]) -> serde_json::Value {
    let o = mkc(args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("one JSON object")
}

#[test]
fn llama1b_summary_has_the_anchors_shape() {
    let s = summary(&[
        "compile",
        "models/llama1b.ron",
        "--target",
        "persistent",
        "--summary-json",
    ]);
    assert_eq!(s["target"], "persistent");
    assert_eq!(s["operators"], 81);
    assert_eq!(s["kernels"], 1);
    assert_eq!(s["sms"], 132);
    assert_eq!(s["weight_bytes"], 2_471_628_800u64);
    // A run allocates every weight once (tied embeddings: the LM head is the embedding), the
    // KV cache of 16 layers x 8 KV heads x 2048 positions x 64 x 2 (keys, values) bf16, and
    // down's split-K scratch (2048 x 8192 bf16 with the MLP in 4 shards).
    let mem = &s["gpu_memory"];
    assert_eq!(mem["weights"], s["weight_bytes"]);
    assert_eq!(mem["kv_cache"], 16 * 8 * 2048 * 64 * 2 * 2);
    assert_eq!(mem["scratch"], 2048 * 8192 * 2);
    assert_eq!(s["vtp_shards"], 16 * 8);
    // Tasks of one 16 KiB page (4 for the LM head): 768 QKV + 8 attention + 512 O-proj +
    // 4096 up/gate + 2048 down per layer, 8016 LM-head tasks.
    let tasks = 16 * (768 + 8 + 512 + 4096 + 2048) + 8016;
    assert_eq!(s["tasks"], tasks);
    let (min, max) = (
        s["instructions_per_sm"]["min"].as_u64().unwrap(),
        s["instructions_per_sm"]["max"].as_u64().unwrap(),
    );
    // An instruction is a run of one operator's tasks: round robin gives every SM one run of
    // each operator with more tasks than SMs (4 per layer and the LM head) and deals
    // attention's 8 tasks per layer in turn (128 over 132 SMs).
    assert_eq!((min, max), (16 * 4 + 1, 16 * 4 + 2));
    assert_eq!(s["edges"]["programmatic"], 0);
}

#[test]
fn chain_targets_count_their_edges() {
    // Per operator (the default): 5 grids per layer and the LM head.
    let args = ["compile", "llama1b", "--summary-json"];
    let pdl = summary(&[&args[..], &["--target", "pdl"]].concat());
    assert_eq!(pdl["kernels"], 81);
    assert_eq!(pdl["edges"]["programmatic"], 80);
    assert_eq!(pdl["edges"]["full"], 0);
    assert!(pdl.get("instructions_per_sm").is_none());
    let graph = summary(&[&args[..], &["--target", "graph"]].concat());
    assert_eq!(graph["edges"]["programmatic"], 0);
    assert_eq!(graph["edges"]["full"], 80);
}

#[test]
fn sms_override_and_other_models() {
    let s = summary(&[
        "compile",
        "llama8b",
        "--sms",
        "100",
        "--policy",
        "list",
        "--summary-json",
    ]);
    assert_eq!(s["sms"], 100);
    assert_eq!(s["operators"], 32 * 5 + 1);
    // Llama-3.1-8B: untied head, 4096 hidden, 14336 intermediate, 8 KV heads of 128.
    let per_layer: u64 = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336 + 2 * 4096;
    assert_eq!(
        s["weight_bytes"],
        2 * (32 * per_layer + 128256 * 4096 + 4096)
    );
}

#[test]
fn output_is_byte_identical_run_to_run() {
    for (target, ext) in [("persistent", "ron"), ("pdl", "json"), ("graph", "ron")] {
        let mut files = Vec::new();
        for run in 0..2 {
            let path = scratch(&format!("{target}{run}.{ext}"));
            let mut args = vec!["compile", "tiny", "--target", target];
            if target == "persistent" {
                args.extend(["--policy", "list"]);
            }
            args.extend(["-o", path.to_str().unwrap()]);
            let o = mkc(&args);
            assert!(o.status.success(), "{}", stderr(&o));
            files.push((std::fs::read(&path).unwrap(), stdout(&o)));
        }
        assert_eq!(files[0], files[1], "{target} differs between runs");
        assert!(!files[0].0.is_empty());
    }
}

#[test]
fn verify_flag_reports_success() {
    let o = mkc(&["compile", "tiny", "--policy", "ilp", "--verify"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("verified"));
    assert!(stdout(&o).contains("proven optimal"));
}

/// Writes `text` as a model file, runs `mkc compile` on it, and returns stderr after checking
/// for exit code 2 and no panic.
fn bad_model(name: &str, text: &str) -> String {
    let path = scratch(name);
    std::fs::write(&path, text).unwrap();
    let o = mkc(&["compile", path.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(path.to_str().unwrap()),
        "names the file: {err}"
    );
    err
}

fn tiny_with(from: &str, to: &str) -> String {
    let text = std::fs::read_to_string("models/tiny.ron").unwrap();
    assert!(text.contains(from), "tiny.ron lacks {from}");
    text.replace(from, to)
}

#[test]
fn malformed_ron_names_line_and_column() {
    let text = tiny_with("layers: 2,", "layers: two,");
    let line = 1 + text
        .lines()
        .position(|l| l.contains("layers: two"))
        .unwrap();
    let column = 1 + text.lines().nth(line - 1).unwrap().find("two").unwrap();
    let err = bad_model("syntax.ron", &text);
    assert!(
        err.contains(&format!(":{line}:{column}:")),
        "line {line}, column {column}: {err}"
    );
    assert!(
        err.contains("field `geometry.layers`")
            && err.contains("found `two`")
            && err.contains("from 1 to 4096"),
        "{err}"
    );
    let err = bad_model("unknown.ron", &tiny_with("layers: 2,", "layerz: 2,"));
    assert!(err.contains("layerz"), "{err}");
}

#[test]
fn impossible_geometry_names_the_field_and_fix() {
    let err = bad_model("heads.ron", &tiny_with("heads: 4,", "heads: 3,"));
    assert!(
        err.contains("geometry.heads") && err.contains("does not divide"),
        "{err}"
    );
    assert!(err.contains("Fix:"), "{err}");
    let err = bad_model("kv.ron", &tiny_with("kv_heads: 2,", "kv_heads: 3,"));
    assert!(err.contains("geometry.kv_heads"), "{err}");
}

#[test]
fn tiles_and_shards_that_do_not_divide_are_refused() {
    let err = bad_model(
        "tile.ron",
        &tiny_with("matvec_task_pages: 2,", "matvec_task_pages: 3,"),
    );
    assert!(err.contains("lowering.matvec_task_pages"), "{err}");
    let err = bad_model(
        "lm.ron",
        &tiny_with("lm_head_task_pages: 8,", "lm_head_task_pages: 7,"),
    );
    assert!(err.contains("lowering.lm_head_task_pages"), "{err}");
    let err = bad_model(
        "page.ron",
        &tiny_with("page_bytes: 512,", "page_bytes: 100,"),
    );
    assert!(err.contains("lowering.page_bytes"), "{err}");
    let err = bad_model(
        "shard.ron",
        &tiny_with("up_gate_down: 4", "up_gate_down: 3"),
    );
    assert!(err.contains("lowering.vtp_shards.up_gate_down"), "{err}");
    // 128 rows / 32 shards = 4-row shards, smaller than an 8-row QKV task.
    let err = bad_model(
        "small.ron",
        &tiny_with("(up_gate_down: 4)", "(up_gate_down: 4, qkv_attention: 32)"),
    );
    assert!(err.contains("whole producer tasks"), "{err}");
}

#[test]
fn unknown_target_device_and_model_exit_2() {
    for args in [
        vec!["compile", "tiny", "--target", "megakernel"],
        vec!["compile", "tiny", "--device", "h900"],
        vec!["compile", "no-such-model.ron"],
        vec!["compile", "tiny", "--sms", "0"],
    ] {
        let o = mkc(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = mkc(&["compile", "tiny", "--device", "h900"]);
    assert!(stderr(&o).contains("--device") && stderr(&o).contains("h200"));
    let o = mkc(&["compile", "tiny", "--target", "megakernel"]);
    assert!(stderr(&o).contains("persistent"), "lists the valid targets");
}

#[test]
fn schedule_files_round_trip() {
    for (ext, target) in [("ron", "persistent"), ("json", "pdl")] {
        let path = scratch(&format!("roundtrip.{ext}"));
        let o = mkc(&[
            "compile",
            "tiny",
            "--target",
            target,
            "-o",
            path.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = std::fs::read_to_string(&path).unwrap();
        let s: mkc_scheduler::Schedule = if ext == "ron" {
            ron::from_str(&text).expect("RON parses back")
        } else {
            serde_json::from_str(&text).expect("JSON parses back")
        };
        assert!(mkc_scheduler::check::check(&s).is_empty());
        assert_eq!(s.target.name(), target);
    }
}

#[test]
fn simulate_json_reports_every_target() {
    let o = mkc(&["simulate", "tiny", "--target", "all", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "mkc.simulate/1");
    let reports = v["targets"].as_object().expect("an object keyed by target");
    let mut names: Vec<&str> = reports.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["graph", "pdl", "persistent"]);
    for (name, r) in reports {
        assert_eq!(r["target"], name.as_str());
        assert_eq!(r["device"], "h200");
        let (step, floor) = (
            r["step_us"].as_f64().unwrap(),
            r["floor_us"].as_f64().unwrap(),
        );
        assert!(step >= floor && floor > 0.0, "{step} {floor}");
        assert!(r["boundaries"].as_array().unwrap().len() == 2 * 5);
        assert!(r["occupancy"][0]["blocks_per_sm"].as_u64().unwrap() >= 1);
    }
    // tiny's 512-byte pages are a what-if: the kernels stream 8 KiB or more. Said once, with
    // every target it refuses, and the JSON on stdout stays whole.
    let err = stderr(&o);
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("note:")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(
        notes[0].contains("lowering.page_bytes")
            && notes[0].contains("`mkc run` refuses this plan (persistent, pdl, graph)"),
        "{err}"
    );
}

/// `simulate --ablate` predicts `bench --ablate`'s rungs for every target, in its words, in
/// the table and the JSON; a sweep does not take it.
#[test]
fn simulate_ablate_predicts_every_rung_of_the_ladder() {
    let o = mkc(&["simulate", "tiny", "--ablate", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for (name, r) in v["targets"].as_object().unwrap() {
        let full = r["step_us"].as_f64().unwrap();
        let rungs = r["ablation"].as_array().unwrap();
        let removed: Vec<&str> = rungs
            .iter()
            .map(|x| x["removed"].as_str().unwrap())
            .collect();
        let mut want = vec![
            "attention",
            "loads",
            "compute",
            "attention+loads",
            "attention+loads+waits",
            "attention+loads+waits+compute",
        ];
        // The dependency chain alone, and split, are the persistent kernel's rungs only.
        if name == "persistent" {
            want.extend([
                "weights",
                "attention+weights",
                "loads+weights",
                "compute+weights",
                "attention+loads+waits+compute+weights",
            ]);
        }
        assert_eq!(removed, want, "{name}");
        for x in rungs {
            let step = x["step_us"].as_f64().unwrap();
            assert!(step <= full + 1e-6, "{name}: {step} > {full}");
            assert!((x["saved_us"].as_f64().unwrap() - (full - step)).abs() < 1e-6);
        }
    }
    let table = mkc(&["simulate", "tiny", "--ablate", "--target", "persistent"]);
    assert!(table.status.success(), "{}", stderr(&table));
    assert_eq!(
        stdout(&table).matches(" without ").count(),
        mkc_catalogue::Ablation::ladder(true).count()
    );
    // Without the flag the report has no ablation.
    let plain = mkc(&["simulate", "tiny", "--json"]);
    assert!(!stdout(&plain).contains("\"ablation\""));
    let sweep = mkc(&[
        "simulate",
        "tiny",
        "--ablate",
        "--sweep",
        "sweeps/example.ron",
    ]);
    assert_eq!(sweep.status.code(), Some(2), "{}", stderr(&sweep));
    assert!(stderr(&sweep).contains("--ablate"), "{}", stderr(&sweep));
}

/// `simulate --sensitivity` predicts the step with each nonzero latency term halved, largest
/// saving first; each figure is the step `--device` with that profile gives; a sweep does not
/// take it.
#[test]
fn simulate_sensitivity_halves_each_latency_term() {
    let o = mkc(&["simulate", "tiny", "--sensitivity", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let profile = std::fs::read_to_string("devices/h200.ron").unwrap();
    for (name, r) in v["targets"].as_object().unwrap() {
        let full = r["step_us"].as_f64().unwrap();
        let terms = r["sensitivity"].as_array().unwrap();
        let names: std::collections::BTreeSet<&str> =
            terms.iter().map(|t| t["term"].as_str().unwrap()).collect();
        assert_eq!(names.len(), terms.len(), "{name}: a term twice");
        assert!(names.contains("load_latency_ns") && names.contains("release_ns"));
        let saved: Vec<f64> = terms
            .iter()
            .map(|t| t["saved_us"].as_f64().unwrap())
            .collect();
        assert!(saved.windows(2).all(|w| w[0] >= w[1]), "{name}: {saved:?}");
        for t in terms {
            let step = t["step_us"].as_f64().unwrap();
            assert!((t["saved_us"].as_f64().unwrap() - (full - step)).abs() < 1e-6);
        }
        // The release term, halved by hand in a profile file, gives the same step.
        let release = terms.iter().find(|t| t["term"] == "release_ns").unwrap();
        let ns = release["ns"].as_f64().unwrap();
        let from = format!("release_ns: {ns:.1},");
        assert!(profile.contains(&from), "h200.ron lacks `{from}`");
        let file = scratch(&format!("half_release_{name}.ron"));
        std::fs::write(
            &file,
            profile.replace(&from, &format!("release_ns: {},", ns / 2.0)),
        )
        .unwrap();
        let o = mkc(&[
            "simulate",
            "tiny",
            "--device",
            file.to_str().unwrap(),
            "--target",
            name,
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let step = v["targets"][name]["step_us"].as_f64().unwrap();
        assert!(
            (step - release["step_us"].as_f64().unwrap()).abs() < 1e-6,
            "{name}"
        );
    }
    let table = mkc(&[
        "simulate",
        "tiny",
        "--sensitivity",
        "--target",
        "persistent",
    ]);
    assert!(table.status.success(), "{}", stderr(&table));
    assert!(stdout(&table).contains(" half load_latency_ns "));
    assert!(!stdout(&mkc(&["simulate", "tiny", "--json"])).contains("\"sensitivity\""));
    let sweep = mkc(&[
        "simulate",
        "tiny",
        "--sensitivity",
        "--sweep",
        "sweeps/example.ron",
    ]);
    assert_eq!(sweep.status.code(), Some(2), "{}", stderr(&sweep));
    assert!(
        stderr(&sweep).contains("--sensitivity"),
        "{}",
        stderr(&sweep)
    );
}

#[test]
fn simulate_writes_a_perfetto_trace_and_a_sweep_csv() {
    let trace = scratch("trace.json");
    let o = mkc(&[
        "simulate",
        "tiny",
        "--target",
        "pdl",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // It says where it wrote.
    assert!(
        stderr(&o).contains(trace.to_str().unwrap()),
        "{}",
        stderr(&o)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "X"));
    assert!(
        events.iter().any(|e| e["ph"] == "s"),
        "flow arrows for waits"
    );
    // With a trace, the step's operator boundaries: one line, and in the JSON one entry per
    // kind of edge whose counts cover every pair of consecutive operators; none without.
    assert!(
        stdout(&o).contains("operator boundaries, median us (count): qkv_rope->attention"),
        "{}",
        stdout(&o)
    );
    let json = |extra: &[&str]| {
        let mut args = vec!["simulate", "tiny", "--target", "pdl", "--json"];
        args.extend(extra);
        summary(&args)["targets"]["pdl"].clone()
    };
    let with = json(&["--trace", trace.to_str().unwrap()]);
    let edges = with["edges"].as_array().expect("edges with --trace");
    let ops = mkc_ir::lower::lower(&mkc_ir::embedded::resolve_model("tiny").unwrap())
        .ops
        .len();
    let counted: u64 = edges.iter().map(|e| e["count"].as_u64().unwrap()).sum();
    assert_eq!(counted as usize, ops - 1);
    assert!(edges.iter().all(|e| e["median_us"].as_f64().unwrap() > 0.0));
    assert!(json(&[]).get("edges").is_none());

    let spec = scratch("sweep.ron");
    std::fs::write(
        &spec,
        "Sweep(targets: [persistent, graph], sms: [4, 8], phase_release: [false, true])",
    )
    .unwrap();
    let o = mkc(&["simulate", "tiny", "--sweep", spec.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = stdout(&o);
    assert_eq!(csv.lines().count(), 1 + 2 * 2 * 2);
    assert!(csv.starts_with("target,policy,trigger,sms"));
    std::fs::write(&spec, "Sweep(targetz: [])").unwrap();
    let o = mkc(&["simulate", "tiny", "--sweep", spec.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("targetz"));
}

#[test]
fn occupancy_json_and_errors() {
    let o = mkc(&[
        "occupancy",
        "--arch",
        "sm_90",
        "--threads",
        "128",
        "--regs",
        "32",
        "--dyn-smem",
        "115712",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["blocks_per_sm"], 2);
    assert_eq!(v["limiter"], "shared_memory");
    for key in ["registers", "shared_memory", "warps", "blocks"] {
        assert!(v["limits"][key].is_u64(), "{key}");
    }
    let o = mkc(&[
        "occupancy",
        "--arch",
        "sm_90",
        "--threads",
        "1024",
        "--regs",
        "65",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot launch"), "{}", stderr(&o));
    let o = mkc(&[
        "occupancy",
        "--arch",
        "sm_75",
        "--threads",
        "128",
        "--regs",
        "32",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn gpu_commands_without_a_gpu_exit_2_with_one_line() {
    for args in [
        vec!["run", "tiny", "--target", "graph", "--tokens", "4"],
        vec!["bench", "tiny", "--trials", "1", "--tokens", "4"],
        vec!["probe", "coresidency"],
        vec!["probe", "latency", "--json"],
        vec!["probe", "l2"],
        vec!["probe", "matvec", "--json"],
        vec!["probe", "pages"],
        vec!["probe", "attention", "--json"],
    ] {
        let o = mkc(&args);
        let err = stderr(&o);
        if o.status.success() {
            eprintln!(
                "GPU present: `mkc {}` ran; the no-GPU path is not exercised",
                args.join(" ")
            );
            continue;
        }
        if err.contains("no CUDA device") || err.contains("no NVRTC") {
            eprintln!("SKIPPED GPU run (`mkc {}`): {}", args.join(" "), err.trim());
            assert_eq!(o.status.code(), Some(2), "{err}");
            assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        } else {
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let o = mkc(&["run", "tiny", "--target", "persistent"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The grouping of operators into fused grids is gone (measured slower; docs/perf.md).
    let o = mkc(&["bench", "tiny", "--grids", "fused"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // An unknown probe is refused by name before anything is compiled.
    let o = mkc(&["probe", "bandwidth"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("coresidency"), "{}", stderr(&o));
    // The page probe's model is read and checked before the GPU is opened: a model the
    // kernels cannot run is refused naming its field, on any machine.
    let o = mkc(&["probe", "pages", "--model", "tiny"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("page_bytes"), "{}", stderr(&o));
    // The attention probe's too.
    let o = mkc(&["probe", "attention", "--model", "tiny"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("page_bytes"), "{}", stderr(&o));
}

#[test]
fn kernels_compile_or_say_nvrtc_is_missing() {
    // The kernels cannot stream the tiny model's 64-column rows: refused naming the field.
    let o = mkc(&["kernels", "--model", "tiny"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("page_bytes"), "{}", stderr(&o));
    let cubin = scratch("kernels.cubin");
    let o = mkc(&[
        "kernels",
        "--model",
        "llama1b",
        "--json",
        "--cubin",
        cubin.to_str().unwrap(),
    ]);
    if o.status.success() {
        let all: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(all["schema"], "mkc.kernels/1");
        // The cubin written is the one the figures come from: each kernel's code hash is
        // found in it.
        let image = std::fs::read(&cubin).unwrap();
        assert_eq!(&image[..4], b"\x7fELF");
        let hashes = mkc_backend::kernels::text_hashes(&image);
        for k in all["kernels"].as_array().unwrap() {
            let name = k["name"].as_str().unwrap();
            let found = hashes.iter().find(|(n, _)| n == name);
            let hash = found.map(|(_, h)| format!("{h:016x}"));
            assert_eq!(hash.as_deref(), k["code_hash"].as_str(), "{name}");
        }
        let v = &all["kernels"];
        let names: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap())
            .collect();
        for k in [
            "k_qkv_rope",
            "k_attention",
            "k_o_proj",
            "k_up_gate",
            "k_down",
            "k_lm_head",
        ] {
            assert!(names.contains(&k), "{k} in {names:?}");
        }
        // Every kernel carries a 16-hex-digit hash of its machine code.
        for k in v.as_array().unwrap() {
            let h = k["code_hash"].as_str().unwrap();
            assert!(
                h.len() == 16 && u64::from_str_radix(h, 16).unwrap() != 0,
                "{k}"
            );
        }
    } else {
        eprintln!("SKIPPED kernel compilation: {}", stderr(&o).trim());
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains("NVRTC"));
    }
    // A cubin that cannot be written is refused naming the option.
    let o = mkc(&[
        "kernels",
        "--model",
        "llama1b",
        "--cubin",
        "/nonexistent-dir/k.cubin",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--cubin") && stderr(&o).contains("Fix:"),
        "{}",
        stderr(&o)
    );
}

/// `mkc kernels --device` builds with the card's knob defaults wherever the model leaves a knob
/// unset, and a knob the model sets wins: the Hopper profiles' producer limits change
/// k_persistent against a profile that sets none (a100's); the h100 also caps the stream
/// outside the boundary window, so lifting that cap on the h100 gives the h200's machine code
/// and lifting both gives the a100's.
#[test]
fn a_card_profile_fills_the_knobs_the_model_leaves_unset() {
    let unlimited = scratch("unlimited.ron");
    std::fs::write(
        &unlimited,
        "Tuning(persistent_boundary_inflight: Some(16), persistent_stream_inflight: Some(16))",
    )
    .unwrap();
    let uncapped = scratch("uncapped.ron");
    std::fs::write(&uncapped, "Tuning(persistent_stream_inflight: Some(16))").unwrap();
    let hash = |device: &str, tune: Option<&std::path::Path>| {
        let mut args = vec!["kernels", "--persistent", "--json", "--device", device];
        if let Some(t) = tune {
            args.extend(["--tune", t.to_str().unwrap()]);
        }
        let o = mkc(&args);
        if !o.status.success() {
            assert!(stderr(&o).contains("NVRTC"), "{}", stderr(&o));
            return None;
        }
        let all: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let k = all["kernels"].as_array().unwrap().iter();
        let found = k.clone().find(|k| k["name"] == "k_persistent");
        Some(found.expect("k_persistent built")["code_hash"].clone())
    };
    let Some(unset) = hash("a100", None) else {
        eprintln!("SKIPPED: no NVRTC");
        return;
    };
    let h100 = hash("h100", None).unwrap();
    let h200 = hash("h200", None).unwrap();
    assert_ne!(h100, unset, "the h100 profile's limits are built in");
    assert_ne!(h200, unset, "the h200 profile's boundary limit is built in");
    assert_ne!(h100, h200, "only the h100 caps the stream");
    assert_eq!(hash("h100", Some(&uncapped)).unwrap(), h200);
    assert_eq!(hash("h100", Some(&unlimited)).unwrap(), unset);
}

/// A schedule compiled for a device carries that card's knob defaults in its model's tuning
/// (what the kernels built for the card use), and a knob the tuning file sets stays its own.
#[test]
fn a_schedule_compiled_for_a_card_carries_its_knobs() {
    let card = mkc_ir::embedded::resolve_device("h100").unwrap().tuning;
    assert!(!card.is_default(), "the h100 profile sets a knob");
    let compiled = |name: &str, tune: Option<&str>| {
        let out = scratch(name);
        let mut args = vec![
            "compile",
            "llama1b",
            "--target",
            "persistent",
            "--device",
            "h100",
        ];
        args.extend(["-o", out.to_str().unwrap()]);
        if let Some(t) = tune {
            args.extend(["--tune", t]);
        }
        let o = mkc(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        // A knob the card fills is attributed to its profile, one it does not is not mentioned.
        let said = stderr(&o).contains("the h100 device profile sets tuning.");
        assert_eq!(said, tune.is_none(), "{}", stderr(&o));
        let s = mkc_scheduler::Schedule::load(&out).unwrap();
        s.model.expect("the schedule embeds its model").tuning
    };
    assert_eq!(compiled("card.ron", None), card);
    let own = scratch("own_knob.ron");
    std::fs::write(
        &own,
        "Tuning(persistent_boundary_inflight: Some(16), persistent_stream_inflight: Some(8))",
    )
    .unwrap();
    let mine = mkc_ir::Tuning {
        persistent_boundary_inflight: Some(16),
        persistent_stream_inflight: Some(8),
        ..Default::default()
    };
    assert_eq!(
        compiled("own.ron", Some(own.to_str().unwrap())),
        mine.or_card(&card)
    );
}

#[test]
fn a_trace_file_that_cannot_be_created_fails_before_any_gpu_work() {
    let o = mkc(&[
        "bench",
        "tiny",
        "--cta-phases",
        "--cta-trace-out",
        "/nonexistent-dir/trace.csv",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("--cta-trace-out") && e.contains("Fix:") && !e.contains("CUDA"),
        "{e}"
    );
    // It needs the trace it writes.
    let o = mkc(&["bench", "tiny", "--cta-trace-out", "/tmp/x.csv"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--cta-phases"), "{}", stderr(&o));
}

#[test]
fn a_timeline_file_that_cannot_be_created_fails_before_any_gpu_work() {
    for (cmd, target) in [
        ("run", "--target=persistent"),
        ("bench", "--targets=pdl,persistent"),
    ] {
        let o = mkc(&[cmd, "tiny", target, "--timeline", "/nonexistent-dir/t.json"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        // bench names the per-target file it could not create.
        let file = if cmd == "run" { "t.json" } else { "t.pdl.json" };
        assert!(
            e.contains("--timeline")
                && e.contains(file)
                && e.contains("Fix:")
                && !e.contains("CUDA"),
            "{e}"
        );
    }
}

/// The backend's tuning knobs are data (the model file's `tuning` section or `--tune FILE`),
/// written into the schedule; the environment changes nothing.
#[test]
fn tuning_is_data_and_the_environment_changes_nothing() {
    let knobs = scratch("knobs.ron");
    std::fs::write(&knobs, "Tuning(consumer_warps: 4, o_ctas: 100)").unwrap();
    let k = knobs.to_str().unwrap();
    let out = scratch("tuned.json");
    let o = mkc(&[
        "compile",
        "tiny",
        "--target",
        "pdl",
        "--tune",
        k,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(s["tuning"]["consumer_warps"], 4);
    assert_eq!(s["tuning"]["o_ctas"], 100);
    let bad = scratch("bad_knobs.ron");
    std::fs::write(&bad, "Tuning(consumer_warps: 9)").unwrap();
    let o = mkc(&["compile", "tiny", "--tune", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("tuning.consumer_warps") && stderr(&o).contains("between 1 and 8"),
        "{}",
        stderr(&o)
    );
    let kernels = |env: &[(&str, &str)], extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mkc"));
        c.args(["kernels", "--model", "llama1b", "--json"])
            .args(extra);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("mkc runs")
    };
    let plain = kernels(&[], &[]);
    if !plain.status.success() {
        assert!(stderr(&plain).contains("NVRTC"), "{}", stderr(&plain));
        eprintln!("SKIPPED: no NVRTC (the environment check needs compiled kernels)");
        return;
    }
    let env = [
        ("MKC_CONSUMER_WARPS", "4"),
        ("MKC_ATT_THREADS", "256"),
        ("MKC_STREAM_SMEM", "100000"),
        ("MKC_WARM_DEPTH", "0"),
    ];
    assert_eq!(
        stdout(&kernels(&env, &[])),
        stdout(&plain),
        "the environment changed the kernels"
    );
    let tuned: serde_json::Value =
        serde_json::from_str(&stdout(&kernels(&[], &["--tune", k]))).unwrap();
    let down = tuned["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "k_down")
        .unwrap()
        .clone();
    assert_eq!(down["threads"], 5 * 32, "4 consumer warps and the producer");
}

/// A compiled schedule is read back by `simulate`, `run` and `bench`: it is timed as written,
/// and each flag the schedule fixes is refused rather than ignored.
#[test]
fn edited_task_runs_are_refused_on_read_back() {
    let path = scratch("runs.json");
    let p = path.to_str().unwrap();
    let o = mkc(&["compile", "tiny", "--target", "pdl", "-o", p]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let runs = |v: &mut serde_json::Value| -> serde_json::Value {
        v["plan"]["chain"]["kernels"][0]["runs"].clone()
    };
    assert!(runs(&mut v).is_array(), "{}", runs(&mut v));
    for (edit, needle) in [
        // A run beyond its operator's tasks: refused by the structure check (it once panicked
        // the simulator), and a run shifted within them: refused by the checker.
        (serde_json::json!([0, 100000]), "plan.kernels[0]"),
        (serde_json::json!([1, 1]), "invariants"),
    ] {
        let mut bad = v.clone();
        bad["plan"]["chain"]["kernels"][0]["runs"][0] = edit;
        let bad_path = scratch("runs_bad.json");
        std::fs::write(&bad_path, bad.to_string()).unwrap();
        for cmd in ["simulate", "run", "bench"] {
            let o = mkc(&[cmd, bad_path.to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
            assert!(stderr(&o).contains(needle), "{cmd}: {}", stderr(&o));
            assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
        }
    }
}

/// A persistent schedule whose stream breaks the stream-order invariant (an SM's stream
/// reversed: it would wait on counters its own later instructions signal, and deadlock) is
/// refused by the checker before anything is simulated or launched.
#[test]
fn a_persistent_stream_out_of_order_is_refused_before_launch() {
    let path = scratch("persistent-order.json");
    let p = path.to_str().unwrap();
    let o = mkc(&["compile", "llama1b", "--target", "persistent", "-o", p]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["plan"]["persistent"]["streams"][0]
        .as_array_mut()
        .unwrap()
        .reverse();
    let bad = scratch("persistent-order-bad.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    for cmd in ["simulate", "run", "bench"] {
        let o = mkc(&[cmd, bad.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("not in global order"),
            "{cmd}: {}",
            stderr(&o)
        );
        assert!(
            !stderr(&o).contains("CUDA"),
            "{cmd} reached the GPU: {}",
            stderr(&o)
        );
    }
}

#[test]
fn compiled_schedules_are_read_back() {
    for (target, ext) in [("pdl", "json"), ("persistent", "ron"), ("graph", "ron")] {
        let path = scratch(&format!("readback-{target}.{ext}"));
        let p = path.to_str().unwrap();
        let o = mkc(&["compile", "tiny", "--target", target, "-o", p]);
        assert!(o.status.success(), "{}", stderr(&o));
        let from_file = summary(&["simulate", p, "--json"]);
        let from_model = summary(&["simulate", "tiny", "--target", target, "--json"]);
        assert_eq!(from_file["targets"], from_model["targets"], "{target}");
        for flag in [
            vec!["--policy", "list"],
            vec!["--device", "h100"],
            vec!["--sms", "8"],
            vec!["--trajectory"],
        ] {
            let mut args = vec!["simulate", p];
            args.extend(&flag);
            let o = mkc(&args);
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            assert!(stderr(&o).contains(flag[0]) && stderr(&o).contains("compiled schedule"));
        }
    }
    let pdl = scratch("readback-pdl.json");
    let p = pdl.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["run", p, "--trigger", "late"],
            "--trigger would be ignored",
        ),
        (vec!["run", p, "--target", "graph"], "pdl schedule"),
        (
            vec!["bench", p, "--trigger", "late"],
            "--trigger would be ignored",
        ),
        (vec!["run", p], "CUDA"),
    ] {
        let o = mkc(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    // A persistent schedule is runnable too: here it stops only for want of a GPU.
    let persistent = scratch("readback-persistent.ron");
    let o = mkc(&["run", persistent.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("CUDA"), "{}", stderr(&o));
}

#[test]
fn chain_plans_take_the_compiled_resources_where_nvrtc_is_installed() {
    let cache = scratch("resource-cache");
    // The grids of the plan `--resources R` writes: (resources, registers) of each.
    let run = |resources: &str| -> Result<Vec<(String, u64)>, String> {
        let file = scratch(&format!("resources-{resources}.json"));
        let args = [
            "compile",
            "llama1b",
            "--target",
            "pdl",
            "--resources",
            resources,
            "-o",
        ];
        let out = mkc_cached(&args, &file, &cache);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        Ok(v["plan"]["chain"]["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["resources"].as_str().unwrap().to_string(),
                    k["registers"].as_u64().unwrap(),
                )
            })
            .collect())
    };
    let declared = run("declared").unwrap();
    assert!(declared.iter().all(|(r, _)| r == "declared"));
    let auto = run("auto").unwrap();
    match run("compiled") {
        Ok(compiled) => {
            assert!(compiled.iter().all(|(r, _)| r == "compiled"));
            assert_eq!(auto, compiled, "auto uses NVRTC where it is installed");
            // The default build's declared registers are its compiled ones (a backend test).
            let regs = |v: &[(String, u64)]| v.iter().map(|(_, g)| *g).collect::<Vec<_>>();
            assert_eq!(regs(&compiled), regs(&declared));
            // One build, one cache entry, read back by every later run.
            assert_eq!(std::fs::read_dir(cache.join("mkc")).unwrap().count(), 1);
            assert_eq!(run("auto").unwrap(), compiled);
        }
        Err(err) => {
            assert!(err.contains("NVRTC"), "{err}");
            assert_eq!(
                auto, declared,
                "auto falls back to the declared resources without NVRTC"
            );
            eprintln!("SKIPPED the compiled half: no NVRTC library found");
        }
    }
}

#[test]
fn the_gpu_commands_take_a_persistent_policy_only_beside_the_persistent_target() {
    for args in [
        &["run", "llama1b", "--policy", "list"][..],
        &[
            "bench",
            "llama1b",
            "--targets",
            "pdl,graph",
            "--policy",
            "list",
        ],
    ] {
        let o = mkc(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("--policy applies to the persistent target"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    // Beside the persistent target it is taken (here only the missing GPU stops the run).
    let o = mkc(&[
        "bench",
        "llama1b",
        "--targets",
        "persistent",
        "--policy",
        "list",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!stderr(&o).contains("--policy"), "{}", stderr(&o));
}

#[test]
fn the_persistent_plan_takes_the_compiled_kernels_resources_where_nvrtc_is_installed() {
    let file = scratch("persistent-resources.json");
    let cache = scratch("persistent-resource-cache");
    let run = |resources: &str| {
        let args = [
            "compile",
            "llama1b",
            "--target",
            "persistent",
            "--resources",
            resources,
            "-o",
        ];
        mkc_cached(&args, &file, &cache)
    };
    let plan = || -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        v["plan"]["persistent"].clone()
    };
    let o = run("declared");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(plan()["source"], "declared");
    let o = run("compiled");
    if !o.status.success() {
        assert!(stderr(&o).contains("NVRTC"), "{}", stderr(&o));
        eprintln!("SKIPPED the compiled half: no NVRTC library found");
        return;
    }
    let p = plan();
    assert_eq!(p["source"], "compiled");
    // k_persistent's CTA: 7 consumer warps (tuning.persistent_warps' default) and the
    // producer, all of the largest operator's shared memory.
    assert_eq!(p["resources"]["threads"], 7 * 32 + 32);
    assert!(p["resources"]["dynamic_smem_bytes"].as_u64().unwrap() >= 144_000);
}

/// `mkc model DIR` writes a model file for a checkpoint's config.json that the other commands
/// take as it is: TinyLlama-1.1B's shape (its MLP's quarter, 1408 columns, a K chunk whose last
/// lane round is partial, takes the measured-fastest four shards).
/// A directory without a config.json, or a config of another architecture, exits 2 naming it.
#[test]
fn model_writes_a_model_file_for_a_checkpoint_config() {
    let dir = scratch("tinyllama");
    std::fs::create_dir_all(&dir).unwrap();
    let config = serde_json::json!({
        "model_type": "llama", "hidden_act": "silu", "hidden_size": 2048,
        "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
        "num_key_value_heads": 4, "vocab_size": 32000, "tie_word_embeddings": false,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let file = scratch("tinyllama.ron");
    let o = mkc(&[
        "model",
        dir.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
        "--name",
        "tinyllama",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    let m = mkc_ir::Model::parse("tinyllama.ron", &text).unwrap();
    assert_eq!(m.name, "tinyllama");
    assert_eq!((m.geometry.intermediate, m.geometry.kv_heads), (5632, 4));
    assert_eq!(m.lowering.vtp_shards.up_gate_down, 4);
    let c = mkc(&["compile", file.to_str().unwrap(), "--verify"]);
    assert!(c.status.success(), "{}", stderr(&c));
    // The directory itself is a MODEL argument: the same model, without the file.
    let from_dir = summary(&[
        "compile",
        dir.to_str().unwrap(),
        "--verify",
        "--summary-json",
    ]);
    let from_file = summary(&["compile", file.to_str().unwrap(), "--summary-json"]);
    assert_eq!(from_dir["tasks"], from_file["tasks"]);
    assert_eq!(from_dir["weight_bytes"], from_file["weight_bytes"]);
    assert!(from_dir["tasks"].as_u64().unwrap() > 0, "{from_dir}");
    // A trained context shorter than the default KV capacity bounds the workload; one with no
    // room for a prompt and a token is refused by key.
    let mut short = config.clone();
    short["max_position_embeddings"] = serde_json::json!(512);
    std::fs::write(dir.join("config.json"), short.to_string()).unwrap();
    let o = mkc(&["model", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = mkc_ir::Model::parse("short.ron", &stdout(&o)).unwrap();
    assert_eq!(m.workload.max_seq_len, 512);
    short["max_position_embeddings"] = serde_json::json!(1);
    std::fs::write(dir.join("config.json"), short.to_string()).unwrap();
    let e = mkc(&["model", dir.to_str().unwrap()]);
    assert_eq!(e.status.code(), Some(2));
    assert!(
        stderr(&e).contains("max_position_embeddings"),
        "{}",
        stderr(&e)
    );
    // No config.json; another architecture.
    let empty = scratch("no-config");
    std::fs::create_dir_all(&empty).unwrap();
    let e = mkc(&["model", empty.to_str().unwrap()]);
    assert_eq!(e.status.code(), Some(2));
    assert!(stderr(&e).contains("config.json"), "{}", stderr(&e));
    std::fs::write(empty.join("config.json"), r#"{"model_type": "qwen2"}"#).unwrap();
    let e = mkc(&["model", empty.to_str().unwrap()]);
    assert_eq!(e.status.code(), Some(2));
    assert!(stderr(&e).contains("model_type"), "{}", stderr(&e));
}

/// A checkpoint shape of `tests/configs/` (its config.json): the model `mkc model` writes for
/// it, and `mkc simulate`'s JSON for the directory, once `mkc compile --verify` has passed.
fn model_and_simulation(name: &str) -> (mkc_ir::Model, serde_json::Value) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/configs")
        .join(name);
    let dir = dir.to_str().unwrap();
    let o = mkc(&["model", dir]);
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    let m = mkc_ir::Model::parse(name, &stdout(&o)).unwrap();
    let c = mkc(&["compile", dir, "--verify"]);
    assert!(c.status.success(), "{name}: {}", stderr(&c));
    let s = mkc(&["simulate", dir, "--json"]);
    assert!(s.status.success(), "{name}: {}", stderr(&s));
    (m, serde_json::from_str(&stdout(&s)).unwrap())
}

/// Llama-2-13B's config: its gate and up rows (5,120 columns, 20 KiB a pair) fit no 16 KiB
/// page, so `mkc model` writes 32 KiB pages with the consumer warps their ring fits, and the
/// file compiles, verifies and simulates on every target.
#[test]
fn model_takes_32_kib_pages_for_rows_a_16_kib_page_cannot_hold() {
    let (m, v) = model_and_simulation("llama-2-13b");
    assert_eq!(m.lowering.page_bytes, 32768);
    let warps = m.tuning.consumer_warps.expect("fewer consumer warps");
    assert!(warps < 8, "{warps} warps");
    for target in ["persistent", "pdl", "graph"] {
        let step = v["targets"][target]["step_us"].as_f64().unwrap();
        let floor = v["targets"][target]["floor_us"].as_f64().unwrap();
        assert!(
            step >= floor && floor > 0.0,
            "{target}: {step} against {floor}"
        );
    }
}

/// Llama-3-70B's config (and Llama-2-70B's, CodeLlama-70B's shape): QKV's RoPE pairs of 8,192
/// columns need 32 KiB pages, and down stages its whole 28,672-float input beside its ring, so
/// `mkc model` writes three consumer warps (four do not fit an SM), 8-page tasks (fewer pages a
/// task lower to more tasks than the scheduler takes), and a plan whose GPU memory fits one
/// H200; the directory compiles, verifies and simulates on every target.
#[test]
fn model_lowers_the_70b_llamas_with_three_warps() {
    let (m, v) = model_and_simulation("llama-3-70b");
    assert_eq!(
        (
            m.lowering.page_bytes,
            m.tuning.consumer_warps,
            m.lowering.matvec_task_pages
        ),
        (32768, Some(3), 8)
    );
    assert!(mkc_ir::lower::task_count(&m) <= mkc_ir::validate_bounds::MAX_TASKS);
    for target in ["persistent", "pdl", "graph"] {
        let step = v["targets"][target]["step_us"].as_f64().unwrap();
        let floor = v["targets"][target]["floor_us"].as_f64().unwrap();
        assert!(
            step >= floor && floor > 30_000.0,
            "{target}: {step} against {floor}"
        );
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/configs/llama-3-70b");
    let s = summary(&["compile", dir, "--target", "pdl", "--summary-json"]);
    let bytes: f64 = ["weights", "kv_cache", "activations", "scratch"]
        .iter()
        .map(|k| s["gpu_memory"][k].as_f64().unwrap())
        .sum();
    let gib = bytes / (1u64 << 30) as f64;
    assert!((130.0..139.0).contains(&gib), "{gib} GiB");
}

/// SmolLM-135M's config: rows of 576 columns (lane rounds of 256, the last partial), 9 query
/// and 3 KV heads, tied embeddings. `mkc model` lowers it with 16 KiB pages holding the most
/// rows that divide the operators' (12 of QKV's 960), and the checkpoint directory compiles,
/// verifies and simulates on every target.
#[test]
fn model_lowers_rows_that_are_no_multiple_of_256_columns() {
    let (m, v) = model_and_simulation("smollm-135m");
    assert_eq!(
        (m.lowering.page_bytes, m.tuning.consumer_warps),
        (16384, None)
    );
    let qkv = mkc_ir::work::matvec(&m, mkc_ir::OpKind::QkvRope).unwrap();
    assert_eq!((qkv.k, qkv.page_rows()), (576, 12));
    for target in ["persistent", "pdl", "graph"] {
        let step = v["targets"][target]["step_us"].as_f64().unwrap();
        assert!(step > 0.0, "{target}: {step}");
    }
}

/// `--prompt-len` and `--tokens` make the workload the simulator predicts (its KV length, the
/// persistent layout), as `run` and `bench` take them; past the KV capacity, or beside a
/// schedule file (whose workload is fixed), they are refused naming the fix.
#[test]
fn simulate_takes_the_runs_workload() {
    let step = |extra: &[&str]| {
        let mut a = vec!["simulate", "llama1b", "--target", "persistent", "--json"];
        a.extend_from_slice(extra);
        let o = mkc(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let r = &v["targets"]["persistent"];
        (
            r["kv_len"].as_u64().unwrap(),
            r["step_us"].as_f64().unwrap(),
        )
    };
    let (kv, short) = step(&[]);
    let (long_kv, long) = step(&["--prompt-len", "1024", "--tokens", "64"]);
    assert_eq!(long_kv, 1024 + 32);
    assert!(
        kv < long_kv && short < long,
        "{kv}: {short} against {long_kv}: {long}"
    );
    let o = mkc(&[
        "simulate",
        "llama1b",
        "--prompt-len",
        "2048",
        "--tokens",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("max_seq_len") && stderr(&o).contains("Fix:"));
    let file = scratch("workload-schedule.json");
    let c = mkc(&["compile", "tiny", "-o", file.to_str().unwrap()]);
    assert!(c.status.success(), "{}", stderr(&c));
    let o = mkc(&["simulate", file.to_str().unwrap(), "--tokens", "4"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--tokens"), "{}", stderr(&o));
}

/// A model that leaves `lowering.attention_kv_split` unset takes the part count its run's
/// workload chooses (4 at a 1,024-token prompt, said on stderr; 1 at the file's P32/D128, said
/// nowhere), a compiled schedule records it, and a model file's own value stays.
#[test]
fn the_runs_workload_chooses_unset_split_kv_parts() {
    let parts_in = |model: &str, extra: &[&str]| {
        let file = scratch(&format!("parts-{}.json", extra.len()));
        let mut a = vec![
            "compile",
            model,
            "--target",
            "pdl",
            "-o",
            file.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        let o = mkc(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let parts = v["model"]["lowering"]["attention_kv_split"].as_u64();
        (parts, stderr(&o))
    };
    let tuned = "models/llama1b_tuned.ron";
    let (short, said) = parts_in(tuned, &[]);
    assert_eq!(short, Some(1));
    assert!(!said.contains("attention_kv_split"), "{said}");
    let (long, said) = parts_in(tuned, &["--prompt-len", "1024", "--tokens", "64"]);
    assert_eq!(long, Some(4));
    assert!(said.contains("attention_kv_split = 4"), "{said}");
    let fixed = scratch("two-parts.ron");
    let text = std::fs::read_to_string(tuned).unwrap().replace(
        "attention_split: 4,",
        "attention_split: 4, attention_kv_split: 2,",
    );
    std::fs::write(&fixed, text).unwrap();
    let (kept, said) = parts_in(
        fixed.to_str().unwrap(),
        &["--prompt-len", "1024", "--tokens", "64"],
    );
    assert_eq!(kept, Some(2));
    assert!(!said.contains("attention_kv_split"), "{said}");
}

/// `mkc calibrate` puts each recorded step beside the same prediction `mkc simulate` makes at
/// the recorded card and bandwidth, with its error; a model path is relative to the record.
#[test]
fn calibrate_puts_each_measurement_beside_the_simulators_step() {
    let dir = scratch("calibrate");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let tiny = std::fs::read_to_string("models/tiny.ron").unwrap();
    std::fs::write(dir.join("tiny.ron"), tiny).unwrap();
    let record = dir.join("sub/steps.ron");
    std::fs::write(
        &record,
        r#"Record(steps: [
            MeasuredStep(lease: "X", card: "h100", model: "../tiny.ron", target: Pdl,
                bandwidth_gbps: 2000.0, measured_us: [50.0, 70.0, 60.0]),
            MeasuredStep(lease: "Y", card: "h200", model: "llama1b", target: Persistent,
                bandwidth_gbps: 4000.0, measured_us: [700.0]),
            MeasuredStep(lease: "Z", card: "h100", model: "../tiny.ron", target: Pdl,
                rung: "attention+loads", bandwidth_gbps: 2000.0, measured_us: [40.0]),
        ])"#,
    )
    .unwrap();
    let cache = dir.join("cache");
    let v: serde_json::Value = {
        let o = mkc_cached(&["calibrate", "--json"], &record, &cache);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str(&stdout(&o)).expect("one JSON object")
    };
    assert_eq!(v["schema"], "mkc.calibrate/1");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    for (step, (model, target, device, bw, measured)) in steps.iter().zip([
        (dir.join("tiny.ron"), "pdl", "h100", "2000", 60.0),
        (
            std::path::PathBuf::from("llama1b"),
            "persistent",
            "h200",
            "4000",
            700.0,
        ),
    ]) {
        let model = model.display().to_string();
        let o = mkc_cached(
            &[
                "simulate",
                "--target",
                target,
                "--device",
                device,
                "--bandwidth",
                bw,
                "--json",
            ],
            std::path::Path::new(&model),
            &cache,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let sim: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let predicted = sim["targets"][target]["step_us"].as_f64().unwrap();
        assert_eq!(step["measured_us"].as_f64().unwrap(), measured);
        assert!((step["predicted_us"].as_f64().unwrap() - predicted).abs() < 1e-9);
        let err = 100.0 * (predicted - measured) / measured;
        assert!((step["error_percent"].as_f64().unwrap() - err).abs() < 1e-9);
    }
    // A rung is the simulator's prediction of that rung of `mkc bench --ablate`.
    let tiny_file = dir.join("tiny.ron");
    let o = mkc_cached(
        &[
            "simulate",
            "--target",
            "pdl",
            "--device",
            "h100",
            "--bandwidth",
            "2000",
            "--ablate",
            "--json",
        ],
        &tiny_file,
        &cache,
    );
    let sim: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rung = sim["targets"]["pdl"]["ablation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["removed"] == "attention+loads")
        .expect("the rung");
    assert_eq!(steps[2]["rung"], "attention+loads");
    assert!(
        (steps[2]["predicted_us"].as_f64().unwrap() - rung["step_us"].as_f64().unwrap()).abs()
            < 1e-9
    );
    assert!(steps[0].get("rung").is_none());
    // Per card (its whole, then each target's): h100's two pdl steps, h200's one persistent.
    let cards: Vec<(String, String, u64)> = v["cards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let target = c["target"].as_str().unwrap_or("all").to_string();
            (
                c["card"].as_str().unwrap().to_string(),
                target,
                c["count"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("h100", "all", 2),
        ("h100", "pdl", 2),
        ("h200", "all", 1),
        ("h200", "persistent", 1),
    ];
    assert_eq!(
        cards,
        want.map(|(c, t, n)| (c.to_string(), t.to_string(), n))
    );
    // Only the steps of one card; none of an unknown one.
    let o = mkc_cached(&["calibrate", "--card", "h200", "--json"], &record, &cache);
    let one: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(one["steps"].as_array().unwrap().len(), 1);
    let o = mkc_cached(&["calibrate", "--card", "b200"], &record, &cache);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("b200") && stderr(&o).contains("Fix"),
        "{}",
        stderr(&o)
    );
    // Another profile for one card moves that card's steps only; a card the record lacks, or
    // a malformed pair, is refused.
    let slow = dir.join("slow_h200.ron");
    std::fs::write(
        &slow,
        std::fs::read_to_string("devices/h200.ron")
            .unwrap()
            .replace("release_ns: 1300.0", "release_ns: 9000.0")
            .replace(
                "release_held_ns: Some(530.0)",
                "release_held_ns: Some(9000.0)",
            ),
    )
    .unwrap();
    let with = format!("h200={}", slow.display());
    let o = mkc_cached(
        &["calibrate", "--json", "--profile", &with],
        &record,
        &cache,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let w: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let (a, b) = (&v["steps"], &w["steps"]);
    assert_eq!(
        a[0]["predicted_us"], b[0]["predicted_us"],
        "h100's step stays"
    );
    assert!(
        b[1]["predicted_us"].as_f64() > a[1]["predicted_us"].as_f64(),
        "h200's moves"
    );
    for bad in [
        format!("b200={}", slow.display()),
        "h200".to_string(),
        "h200=".into(),
    ] {
        let o = mkc_cached(&["calibrate", "--profile", &bad], &record, &cache);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(stderr(&o).contains("Fix"), "{bad}: {}", stderr(&o));
    }
    // A step whose model is missing is named by its index.
    std::fs::write(
        &record,
        std::fs::read_to_string(&record)
            .unwrap()
            .replace("../tiny.ron", "../gone.ron"),
    )
    .unwrap();
    let o = mkc_cached(&["calibrate"], &record, &cache);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("steps[0]") && stderr(&o).contains("gone.ron"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run whose check the host cannot hold is refused before anything is read or allocated,
/// with both figures and the fix, not killed by the system for memory: the CPU reference keeps
/// a 70B's weights (131 GiB), generated or a checkpoint's. Without the check (`--no-check`)
/// the host holds none (a checkpoint is uploaded tensor by tensor) and the run goes on.
#[test]
fn weights_the_host_cannot_hold_are_refused_before_reading() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/configs/llama-3-70b");
    let need = 131u64 << 30;
    if mkc_backend::memory::host_available().is_none_or(|a| a >= need) {
        eprintln!("SKIPPED: this host holds a 70B's weights (or does not say what it has)");
        return;
    }
    let o = mkc(&["run", dir, "--weights", "random:1", "--tokens", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("host memory") && e.contains("--no-check") && e.contains("Fix"),
        "{e}"
    );
    let o = mkc(&[
        "run",
        dir,
        "--weights",
        "random:1",
        "--tokens",
        "1",
        "--no-check",
    ]);
    assert!(!stderr(&o).contains("host memory"), "{}", stderr(&o));
    // A checkpoint of that shape: refused before its files are read; with --no-check they
    // are opened (this one's is no safetensors file, and is refused as such).
    let ckpt = scratch("host-70b");
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::copy(format!("{dir}/config.json"), ckpt.join("config.json")).unwrap();
    std::fs::write(ckpt.join("model.safetensors"), b"not read").unwrap();
    let c = ckpt.to_str().unwrap();
    let o = mkc(&["run", dir, "--weights", c, "--tokens", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("host memory"), "{}", stderr(&o));
    let o = mkc(&["run", dir, "--weights", c, "--tokens", "1", "--no-check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        !e.contains("host memory") && e.contains("model.safetensors"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&ckpt);
}
