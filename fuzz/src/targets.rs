//! The fuzz targets and their seed corpora.

use mkc_ir::device::DeviceProfile;
use mkc_ir::{InputError, Model};
use mkc_scheduler::{check, compile, CompileOptions, Schedule, Target as Sched};
use mkc_simulator::sweep::SweepSpec;
use mkc_simulator::{simulate, SimOptions};

/// Largest lowering the model target schedules and simulates (bigger ones are only parsed and
/// validated), so that a fuzzing run tries many inputs per second.
const DEEP_TASKS: u64 = 60_000;

/// What a fuzz target reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Model files: parse, validate, then lower, schedule, check and simulate every target.
    Model,
    /// Device profiles: parse and validate, then simulate the tiny model on the device.
    Device,
    /// Sweep specs: parse, count, validate (on the tiny model).
    Sweep,
    /// Schedule files: read back and check structurally, then the independent checker.
    Schedule,
    /// A checkpoint's config.json, as `mkc model` reads it: the geometry, then the lowering
    /// chosen for it (which must validate and fit the kernels), scheduled and simulated.
    Checkpoint,
    /// A record of measured steps (`measured/steps.ron`): parse and check, then the medians
    /// and the per-card summary `mkc calibrate` prints.
    Measured,
}

/// Every target, by the name the driver takes.
pub const TARGETS: &[(&str, Target)] = &[
    ("model", Target::Model),
    ("device", Target::Device),
    ("sweep", Target::Sweep),
    ("schedule", Target::Schedule),
    ("checkpoint", Target::Checkpoint),
    ("measured", Target::Measured),
];

impl Target {
    /// The target named `name`.
    pub fn named(name: &str) -> Option<Target> {
        TARGETS.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
    }

    /// Runs the target on `data`: returns whether mkc accepted it (else it was refused with
    /// a helpful error), and panics on a finding (a panic inside mkc, or figures that are not
    /// sane).
    pub fn run(self, data: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(data) else {
            // Files are read through mkc_ir::input, which refuses invalid UTF-8 by position.
            let err = mkc_ir::input::utf8("fuzz", data.to_vec()).unwrap_err();
            assert!(err.to_string().contains("UTF-8"), "{err}");
            return false;
        };
        match self {
            Target::Model => model(text),
            Target::Device => device(text),
            Target::Sweep => sweep(text),
            Target::Schedule => schedule(text),
            Target::Checkpoint => checkpoint(text),
            Target::Measured => measured(text),
        }
    }

    /// Texts the mutator starts from: the project's own files of this kind.
    pub fn seeds(self) -> Vec<String> {
        match self {
            Target::Model => {
                let mut v: Vec<String> = mkc_ir::embedded::MODELS
                    .iter()
                    .map(|(_, t)| t.to_string())
                    .collect();
                v.push(include_str!("../../models/llama1b_tuned.ron").into());
                v.push(include_str!("../../models/llama3.2-1b.ron").into());
                v.push(include_str!("../../models/llama1b_fused.ron").into());
                v.push(include_str!("../../models/tiny.ron").replace(
                    "tied_embeddings:",
                    "rope_scaling: Some((rope_type: Yarn, factor: 4.0, \
                     original_max_position_embeddings: 32, beta_slow: Some(2.0))),\n        \
                     tied_embeddings:",
                ));
                v
            }
            Target::Device => mkc_ir::embedded::DEVICES
                .iter()
                .map(|(_, t)| t.to_string())
                .collect(),
            Target::Sweep => vec![
                include_str!("../../sweeps/example.ron").into(),
                "Sweep(targets: [pdl], sms: [4, 8], trigger: [early, late], \
                 vtp_shards: [(up_gate_down: 2)], signal_ns: [100.0])"
                    .into(),
            ],
            Target::Schedule => {
                let m = tiny();
                let d = h200();
                let mut v = Vec::new();
                for target in [Sched::Persistent, Sched::Pdl, Sched::Graph] {
                    let opts = CompileOptions {
                        target,
                        ..CompileOptions::default()
                    };
                    let s = compile(&m, &d, &opts).schedule;
                    v.push(serde_json::to_string(&s).expect("serialises"));
                    v.push(ron::to_string(&s).expect("serialises"));
                }
                // Attention inside the O-projection: tasks that add into one vector.
                let mut fused = m.clone();
                fused.lowering.vtp_shards.qkv_attention = 1;
                fused.lowering.vtp_shards.attention_o_proj = 1;
                fused.lowering.attention_in_o_proj = Some(2);
                fused
                    .validate("fuzz")
                    .expect("tiny takes attention inside the O-projection");
                let s = compile(&fused, &d, &CompileOptions::default()).schedule;
                v.push(serde_json::to_string(&s).expect("serialises"));
                v
            }
            Target::Measured => vec![include_str!("../../measured/steps.ron").into()],
            Target::Checkpoint => {
                let mut v: Vec<String> = mkc_ir::embedded::MODELS
                    .iter()
                    .map(|(name, _)| {
                        config_json(&mkc_ir::embedded::resolve_model(name).expect("embedded"))
                    })
                    .collect();
                let scaled = Model::parse(
                    "llama3.2-1b.ron",
                    include_str!("../../models/llama3.2-1b.ron"),
                )
                .expect("parses");
                v.push(config_json(&scaled));
                // Real checkpoints' shapes: padded MLPs and heads (OpenLLaMA's 100-wide heads),
                // SmolLM's narrow rows, Llama-2's and CodeLlama's 32 KiB pages, the 70B's three
                // warps.
                v.extend(
                    [
                        include_str!("../../tests/configs/smollm-135m/config.json"),
                        include_str!("../../tests/configs/smollm-360m/config.json"),
                        include_str!("../../tests/configs/openllama-3b/config.json"),
                        include_str!("../../tests/configs/llama-2-13b/config.json"),
                        include_str!("../../tests/configs/codellama-34b/config.json"),
                        include_str!("../../tests/configs/llama-3-70b/config.json"),
                    ]
                    .map(String::from),
                );
                // YaRN with its optional fields, the attention factor from mscale.
                let mut yarn: serde_json::Value =
                    serde_json::from_str(&config_json(&tiny())).expect("parses");
                yarn["rope_scaling"] = serde_json::json!({"rope_type": "yarn", "factor": 4.0,
                    "original_max_position_embeddings": 32, "beta_fast": 16, "truncate": false,
                    "mscale": 0.707, "mscale_all_dim": 1.0});
                v.push(yarn.to_string());
                v
            }
        }
    }
}

/// config.json of `m` as Hugging Face writes it for Llama (Llama 3's RoPE scaling under
/// `rope_parameters`, as transformers 5 writes it).
fn config_json(m: &Model) -> String {
    let g = &m.geometry;
    let mut c = serde_json::json!({
        "model_type": "llama", "hidden_act": "silu", "hidden_size": g.hidden,
        "intermediate_size": g.intermediate, "num_hidden_layers": g.layers,
        "num_attention_heads": g.heads, "num_key_value_heads": g.kv_heads,
        "head_dim": g.head_dim, "vocab_size": g.vocab,
        "tie_word_embeddings": g.tied_embeddings, "rope_theta": g.rope_theta,
        "rms_norm_eps": g.norm_eps, "attention_bias": false, "mlp_bias": false,
    });
    if let Some(r) = &g.rope_scaling {
        c["rope_parameters"] = serde_json::json!({"rope_type": "llama3",
            "rope_theta": g.rope_theta, "factor": r.factor, "low_freq_factor": r.low_freq_factor,
            "high_freq_factor": r.high_freq_factor,
            "original_max_position_embeddings": r.original_max_position_embeddings});
    }
    serde_json::to_string_pretty(&c).expect("serialises")
}

fn tiny() -> Model {
    mkc_ir::embedded::resolve_model("tiny").expect("embedded")
}

fn h200() -> DeviceProfile {
    mkc_ir::embedded::resolve_device("h200").expect("embedded")
}

/// A refusal must be a whole paragraph saying how to fix it, never empty.
fn refused(e: &InputError) -> bool {
    let s = e.to_string();
    assert!(s.contains("Fix") || s.contains("README"), "unhelpful: {s}");
    false
}

/// Schedules, checks and simulates `m` on `d` for every target the pair can run.
fn deep(m: &Model, d: &DeviceProfile) {
    for target in [Sched::Persistent, Sched::Pdl, Sched::Graph] {
        if let Err(e) = mkc_simulator::check_setup(m, "fuzz", d, &[target]) {
            refused(&e);
            continue;
        }
        let opts = CompileOptions {
            target,
            ..CompileOptions::default()
        };
        let s = compile(m, d, &opts).schedule;
        let v = check::check(&s);
        assert!(
            v.is_empty(),
            "a valid model compiled to a broken schedule:\n{v}"
        );
        match simulate(&s, d, &SimOptions::default(), None) {
            Ok((r, _)) => {
                let st = &r.step;
                assert!(
                    st.step_us.is_finite()
                        && st.floor_us > 0.0
                        && st.step_us >= st.floor_us * (1.0 - 1e-9)
                        && (0.0..=1.0 + 1e-9).contains(&st.bandwidth_fraction)
                        && (0.0..=1.0 + 1e-9).contains(&st.sm_busy_fraction),
                    "insane figures for {}: step {} floor {} bw {} busy {}",
                    target.name(),
                    st.step_us,
                    st.floor_us,
                    st.bandwidth_fraction,
                    st.sm_busy_fraction
                );
            }
            Err(e) => panic!("check_setup passed but simulate refused: {e}"),
        }
    }
}

fn model(text: &str) -> bool {
    match Model::parse("fuzz", text) {
        Err(e) => refused(&e),
        Ok(mut m) => {
            // As the commands settle it: split-KV parts the file leaves unset are the
            // workload's choice, a power of two the model still validates with.
            if m.lowering.attention_kv_split.is_none() {
                let parts = mkc_catalogue::kv_parts_for(&m);
                assert!(
                    parts.is_power_of_two()
                        && parts <= mkc_catalogue::kv_parts::MAX_CHOSEN_KV_PARTS
                );
                m.lowering.attention_kv_split = Some(parts);
                m.validate("fuzz")
                    .expect("the chosen split-KV parts validate");
            }
            if mkc_ir::lower::task_count(&m) <= DEEP_TASKS {
                deep(&m, &h200());
            }
            true
        }
    }
}

fn device(text: &str) -> bool {
    match DeviceProfile::parse("fuzz", text) {
        Err(e) => refused(&e),
        Ok(d) => {
            deep(&tiny(), &d);
            true
        }
    }
}

fn sweep(text: &str) -> bool {
    match SweepSpec::parse("fuzz", text) {
        Err(e) => refused(&e),
        Ok(spec) => {
            let _ = spec.point_count();
            // Every check runs; at most eight configurations of the tiny model are simulated.
            let tiny = tiny();
            let cap = 8 * mkc_ir::lower::task_count(&tiny);
            match mkc_simulator::sweep::run(&tiny, &h200(), &spec, "fuzz", cap) {
                Err(e) => refused(&e),
                Ok(rows) => {
                    for r in rows {
                        assert!(r.step_us.is_finite() && r.step_us >= r.floor_us * (1.0 - 1e-9));
                    }
                    true
                }
            }
        }
    }
}

fn measured(text: &str) -> bool {
    use mkc_simulator::measured::{median, summarise, Record, Row};
    match Record::parse("fuzz", text) {
        Err(e) => refused(&e),
        Ok(r) => {
            // Each step's figure as calibrate takes it, beside a prediction 1% over it.
            let rows: Vec<Row> = r
                .steps
                .iter()
                .map(|s| {
                    let m = median(&s.measured_us);
                    assert!(
                        m.is_finite() && m > 0.0,
                        "median {m} of {:?}",
                        s.measured_us
                    );
                    Row {
                        lease: s.lease.clone(),
                        card: s.card.clone(),
                        model: s.model.clone(),
                        target: mkc_scheduler::Target::from(s.target).name(),
                        rung: s.rung.clone(),
                        measured_us: m,
                        predicted_us: m * 1.01,
                        error_percent: 1.0,
                    }
                })
                .collect();
            let cards = summarise(&rows);
            let whole = cards.iter().filter(|c| c.target.is_none());
            assert_eq!(whole.map(|c| c.count).sum::<usize>(), rows.len());
            assert!(cards.iter().all(|c| c.within_aim == c.count));
            true
        }
    }
}

fn schedule(text: &str) -> bool {
    match Schedule::parse("fuzz", text) {
        Err(e) => refused(&e),
        Ok(s) => {
            // Any structurally sound schedule, however wrong, gets violations, never a panic;
            // one the checker passes is timed as `mkc simulate FILE` would time it.
            if check::check(&s).is_empty() {
                let _ = simulate(&s, &s.device, &SimOptions::default(), None);
            }
            true
        }
    }
}

fn checkpoint(text: &str) -> bool {
    let helpful = |s: String| {
        assert!(s.contains("Fix") || s.contains("README"), "unhelpful: {s}");
        false
    };
    let (g, context) = match mkc_backend::parse_config_shape(std::path::Path::new("fuzz"), text) {
        Ok(shape) => (shape.geometry, shape.context),
        Err(e) => return helpful(e.to_string()),
    };
    let workload = mkc_ir::model::Workload::within_context(context);
    match mkc_catalogue::choose_lowering("fuzz", &g, &workload) {
        Err(e) => helpful(e.to_string()),
        Ok(m) => {
            // What `mkc model` writes is a model the kernels take, and reads back as itself.
            m.validate("fuzz").expect("the chosen lowering validates");
            mkc_catalogue::check_model(&m).expect("the chosen lowering fits the kernels");
            // The geometry is the config's, its MLP and heads perhaps zero-padded wider.
            let stored = m.geometry.checkpoint_intermediate;
            assert_eq!(stored.is_some(), m.geometry.intermediate != g.intermediate);
            assert_eq!(stored.unwrap_or(g.intermediate), g.intermediate);
            assert!(m.geometry.intermediate >= g.intermediate);
            let head = m.geometry.checkpoint_head_dim;
            assert_eq!(head.is_some(), m.geometry.head_dim != g.head_dim);
            assert!(m.geometry.head_dim >= g.head_dim && m.geometry.head_dim < g.head_dim + 8);
            assert_eq!(m.geometry.as_stored(), g);
            if mkc_ir::lower::task_count(&m) <= DEEP_TASKS {
                deep(&m, &h200());
            }
            true
        }
    }
}
