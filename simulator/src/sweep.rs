//! What-if sweeps: the cartesian product of knob values, compiled and simulated in parallel.
//!
//! A sweep spec is a RON file; every list left out keeps the model's or the device's value.
//! Policies apply to the persistent target only, triggers to pdl only.
//!
//! ```ron
//! Sweep(
//!     targets: [persistent, pdl, graph],
//!     policy: [round_robin, list],
//!     sms: [66, 132],
//!     bandwidth_gbps: [3350.0, 4480.0],
//!     signal_ns: [250.0, 500.0],
//!     launch_gap_ns: [800.0, 1660.0],
//!     pdl_wait_release_ns: [250.0, 500.0],
//!     cta_admission_ns: [200.0],
//!     instruction_overhead_ns: [300.0, 1000.0],
//!     trigger: [early, late],
//!     coresidency: [false, true],
//!     phase_release: [false, true],
//!     // VTP shards per edge; edges left out keep the defaults (1, and 4 on up_gate_down).
//!     vtp_shards: [(up_gate_down: 1), (up_gate_down: 4), (qkv_attention: 2, up_gate_down: 4)],
//!     // Split-KV parts of each attention task's history (`lowering.attention_kv_split`).
//!     attention_kv_split: [1, 2, 4],
//! )
//! ```

use indicatif::{ParallelProgressIterator, ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use mkc_ir::device::DeviceProfile;
use mkc_ir::model::VtpShards;
use mkc_ir::{FileKind, InputError, Model};
use mkc_scheduler::{compile, CompileOptions, Policy, Target, Trigger};

use crate::timeline::SimOptions;

/// The knob values to combine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename = "Sweep")]
pub struct SweepSpec {
    /// Targets (default: all three).
    pub targets: Vec<Target>,
    /// Persistent policies.
    pub policy: Vec<Policy>,
    /// SM counts.
    pub sms: Vec<u32>,
    /// Read bandwidths, GB/s.
    pub bandwidth_gbps: Vec<f64>,
    /// Counter signal latencies, ns.
    pub signal_ns: Vec<f64>,
    /// Graph launch gaps, ns.
    pub launch_gap_ns: Vec<f64>,
    /// PDL wait-release latencies, ns.
    pub pdl_wait_release_ns: Vec<f64>,
    /// CTA admission latencies, ns.
    pub cta_admission_ns: Vec<f64>,
    /// Per-instruction overheads, ns.
    pub instruction_overhead_ns: Vec<f64>,
    /// PDL trigger placements.
    pub trigger: Vec<Trigger>,
    /// Co-residency allowed or not.
    pub coresidency: Vec<bool>,
    /// Phase-scoped resource release on or off.
    pub phase_release: Vec<bool>,
    /// VTP shard configurations (per edge).
    pub vtp_shards: Vec<VtpShards>,
    /// Split-KV parts (`lowering.attention_kv_split`).
    pub attention_kv_split: Vec<u32>,
}

impl SweepSpec {
    /// Parses a sweep spec; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<SweepSpec, InputError> {
        ron::from_str(text).map_err(|e| InputError::from_ron(FileKind::Sweep, file, text, &e))
    }

    /// The number of configurations the spec expands to on `targets` (checked: a product
    /// that overflows counts as `u64::MAX`), computed before anything is allocated.
    pub fn point_count(&self) -> u64 {
        let axis = |n: usize| (n as u64).max(1);
        let shared = [
            self.sms.len(),
            self.bandwidth_gbps.len(),
            self.signal_ns.len(),
            self.launch_gap_ns.len(),
            self.pdl_wait_release_ns.len(),
            self.cta_admission_ns.len(),
            self.instruction_overhead_ns.len(),
            self.coresidency.len(),
            self.phase_release.len(),
            self.vtp_shards.len(),
            self.attention_kv_split.len(),
        ]
        .iter()
        .try_fold(1u64, |acc, &n| acc.checked_mul(axis(n)));
        let targets = if self.targets.is_empty() {
            vec![Target::Persistent, Target::Pdl, Target::Graph]
        } else {
            self.targets.clone()
        };
        targets
            .iter()
            .try_fold(0u64, |acc, t| {
                let own = match t {
                    Target::Persistent => axis(self.policy.len()),
                    Target::Pdl => axis(self.trigger.len()),
                    Target::Graph => 1,
                };
                acc.checked_add(shared?.checked_mul(own)?)
            })
            .unwrap_or(u64::MAX)
    }
}

/// One configuration: every knob's value.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Target.
    pub target: Target,
    /// Persistent policy.
    pub policy: Policy,
    /// PDL trigger.
    pub trigger: Trigger,
    /// Device after the device knobs.
    pub device: DeviceProfile,
    /// Execution-model knobs.
    pub sim: SimOptions,
    /// VTP shards.
    pub vtp: VtpShards,
    /// Split-KV parts.
    pub kv_split: u32,
}

/// One knob setting, applied to a point.
#[derive(Clone, Debug)]
enum Knob {
    Policy(Policy),
    Sms(u32),
    Bandwidth(f64),
    Signal(f64),
    LaunchGap(f64),
    PdlRelease(f64),
    Admission(f64),
    Overhead(f64),
    Trigger(Trigger),
    Coresidency(bool),
    PhaseRelease(bool),
    Vtp(VtpShards),
    KvSplit(u32),
}

impl Knob {
    fn apply(&self, p: &mut Point) {
        let l = &mut p.device.latencies;
        match self {
            Knob::Policy(v) => p.policy = *v,
            Knob::Sms(v) => p.device.sms = *v,
            Knob::Bandwidth(v) => p.device.read_bandwidth_gbps = *v,
            Knob::Signal(v) => l.signal_visible_ns = *v,
            Knob::LaunchGap(v) => l.launch_gap_ns = *v,
            Knob::PdlRelease(v) => l.pdl_wait_release_ns = *v,
            Knob::Admission(v) => l.cta_admission_ns = *v,
            Knob::Overhead(v) => l.instruction_overhead_ns = *v,
            Knob::Trigger(v) => p.trigger = *v,
            Knob::Coresidency(v) => p.sim.coresidency = *v,
            Knob::PhaseRelease(v) => p.sim.phase_release = *v,
            Knob::Vtp(v) => p.vtp = v.clone(),
            Knob::KvSplit(v) => p.kv_split = *v,
        }
    }
}

/// Expands the spec into its grid: for each target, the product of the axes that apply to it.
pub fn grid(model: &Model, device: &DeviceProfile, spec: &SweepSpec) -> Vec<Point> {
    let targets = if spec.targets.is_empty() {
        vec![Target::Persistent, Target::Pdl, Target::Graph]
    } else {
        spec.targets.clone()
    };
    let mut out = Vec::new();
    for target in targets {
        let mut axes: Vec<Vec<Knob>> = vec![
            spec.sms.iter().map(|&v| Knob::Sms(v)).collect(),
            spec.bandwidth_gbps
                .iter()
                .map(|&v| Knob::Bandwidth(v))
                .collect(),
            spec.signal_ns.iter().map(|&v| Knob::Signal(v)).collect(),
            spec.launch_gap_ns
                .iter()
                .map(|&v| Knob::LaunchGap(v))
                .collect(),
            spec.pdl_wait_release_ns
                .iter()
                .map(|&v| Knob::PdlRelease(v))
                .collect(),
            spec.cta_admission_ns
                .iter()
                .map(|&v| Knob::Admission(v))
                .collect(),
            spec.instruction_overhead_ns
                .iter()
                .map(|&v| Knob::Overhead(v))
                .collect(),
            spec.coresidency
                .iter()
                .map(|&v| Knob::Coresidency(v))
                .collect(),
            spec.phase_release
                .iter()
                .map(|&v| Knob::PhaseRelease(v))
                .collect(),
            spec.vtp_shards.iter().cloned().map(Knob::Vtp).collect(),
            spec.attention_kv_split
                .iter()
                .map(|&v| Knob::KvSplit(v))
                .collect(),
        ];
        match target {
            Target::Persistent => {
                axes.insert(0, spec.policy.iter().map(|&v| Knob::Policy(v)).collect())
            }
            Target::Pdl => axes.push(spec.trigger.iter().map(|&v| Knob::Trigger(v)).collect()),
            Target::Graph => {}
        }
        let mut points = vec![Point {
            target,
            policy: Policy::RoundRobin,
            trigger: Trigger::Early,
            device: device.clone(),
            sim: SimOptions::default(),
            vtp: model.lowering.vtp_shards.clone(),
            kv_split: model.lowering.kv_parts(),
        }];
        for values in axes.iter().filter(|a| !a.is_empty()) {
            points = points
                .iter()
                .flat_map(|p| {
                    values.iter().map(move |k| {
                        let mut q = p.clone();
                        k.apply(&mut q);
                        q
                    })
                })
                .collect();
        }
        out.extend(points);
    }
    out
}

/// One configuration and its predicted step time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    /// Target.
    pub target: &'static str,
    /// Policy (persistent) or `-`.
    pub policy: &'static str,
    /// Trigger (pdl) or `-`.
    pub trigger: &'static str,
    /// SMs.
    pub sms: u32,
    /// Bandwidth, GB/s.
    pub bandwidth_gbps: f64,
    /// Signal latency, ns.
    pub signal_ns: f64,
    /// Launch gap, ns.
    pub launch_gap_ns: f64,
    /// PDL wait release, ns.
    pub pdl_wait_release_ns: f64,
    /// CTA admission, ns.
    pub cta_admission_ns: f64,
    /// Per-instruction overhead, ns.
    pub instruction_overhead_ns: f64,
    /// Co-residency.
    pub coresidency: bool,
    /// Phase-scoped release.
    pub phase_release: bool,
    /// VTP shards per edge, `qkv_attention/attention_o_proj/o_proj_up_gate/up_gate_down/down_qkv/down_lm_head`.
    pub vtp_shards: String,
    /// Split-KV parts.
    pub attention_kv_split: u32,
    /// Predicted step, µs.
    pub step_us: f64,
    /// Bandwidth floor, µs.
    pub floor_us: f64,
}

fn vtp_label(v: &VtpShards) -> String {
    format!(
        "{}/{}/{}/{}/{}/{}",
        v.qkv_attention,
        v.attention_o_proj,
        v.o_proj_up_gate,
        v.up_gate_down,
        v.down_qkv,
        v.down_lm_head
    )
}

/// Checks every knob value before any time is spent, naming the spec's own fields: SM
/// counts, bandwidths and latencies against the device profile's ranges, each shard set
/// against the model's lowering rules.
fn validate(model: &Model, spec: &SweepSpec, spec_file: &str) -> Result<(), InputError> {
    use mkc_ir::device::{check_bandwidth, check_latency, SMS_RANGE};
    for (i, &n) in spec.sms.iter().enumerate() {
        if !(SMS_RANGE.0..=SMS_RANGE.1).contains(&n) {
            return Err(InputError::invalid(
                spec_file,
                format!("sms[{i}]"),
                format!("{n} SMs is out of range"),
                format!("use SM counts from {} to {}", SMS_RANGE.0, SMS_RANGE.1),
            ));
        }
    }
    for (i, &v) in spec.bandwidth_gbps.iter().enumerate() {
        check_bandwidth(
            spec_file,
            &format!("bandwidth_gbps[{i}]"),
            v,
            "give read bandwidths in GB/s, e.g. 4480.0",
        )?;
    }
    for (field, list) in [
        ("signal_ns", &spec.signal_ns),
        ("launch_gap_ns", &spec.launch_gap_ns),
        ("pdl_wait_release_ns", &spec.pdl_wait_release_ns),
        ("cta_admission_ns", &spec.cta_admission_ns),
        ("instruction_overhead_ns", &spec.instruction_overhead_ns),
    ] {
        for (i, &v) in list.iter().enumerate() {
            check_latency(spec_file, &format!("{field}[{i}]"), v)?;
        }
    }
    // Each shard set with each part count (a shard count may split one part count's records).
    let shards = listed(&spec.vtp_shards, &model.lowering.vtp_shards);
    let parts = listed(&spec.attention_kv_split, &model.lowering.kv_parts());
    for (vi, v) in &shards {
        for (ki, k) in &parts {
            let mut m = model.clone();
            m.lowering.vtp_shards = v.clone();
            m.lowering.attention_kv_split = Some(*k);
            m.validate(spec_file).map_err(|e| match e {
                InputError::Invalid {
                    file,
                    field,
                    problem,
                    fix,
                } => {
                    let mut field = field;
                    if let Some(i) = vi {
                        field = field.replace("lowering.vtp_shards.", &format!("vtp_shards[{i}]."));
                    }
                    if let Some(i) = ki {
                        field = field.replace(
                            "lowering.attention_kv_split",
                            &format!("attention_kv_split[{i}]"),
                        );
                    }
                    InputError::Invalid {
                        file,
                        field,
                        problem,
                        fix,
                    }
                }
                other => other,
            })?;
        }
    }
    Ok(())
}

/// A lowering axis's values with their index in the spec's list, or the model's own value
/// (no index) where the spec leaves the list out.
fn listed<T: Clone>(list: &[T], model_value: &T) -> Vec<(Option<usize>, T)> {
    if list.is_empty() {
        vec![(None, model_value.clone())]
    } else {
        list.iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| (Some(i), v))
            .collect()
    }
}

/// Simulates one point at the model's typical KV length.
fn simulate_point(model: &Model, p: &Point) -> SweepRow {
    let mut m = model.clone();
    m.lowering.vtp_shards = p.vtp.clone();
    m.lowering.attention_kv_split = Some(p.kv_split);
    let opts = CompileOptions {
        target: p.target,
        policy: p.policy,
        trigger: p.trigger,
        ..CompileOptions::default()
    };
    let s = compile(&m, &p.device, &opts).schedule;
    let kv = s.graph.typical_kv_len;
    let t = crate::simulate_step(&s, &p.device, &p.sim, kv);
    let r = crate::report::summarize(&s, &p.device, &t, kv);
    let l = &p.device.latencies;
    SweepRow {
        target: p.target.name(),
        policy: if p.target == Target::Persistent {
            p.policy.name()
        } else {
            "-"
        },
        trigger: match (p.target, p.trigger) {
            (Target::Pdl, Trigger::Early) => "early",
            (Target::Pdl, Trigger::Late) => "late",
            _ => "-",
        },
        sms: p.device.sms,
        bandwidth_gbps: p.device.read_bandwidth_gbps,
        signal_ns: l.signal_visible_ns,
        launch_gap_ns: l.launch_gap_ns,
        pdl_wait_release_ns: l.pdl_wait_release_ns,
        cta_admission_ns: l.cta_admission_ns,
        instruction_overhead_ns: l.instruction_overhead_ns,
        coresidency: p.sim.coresidency,
        phase_release: p.sim.phase_release,
        vtp_shards: vtp_label(&p.vtp),
        attention_kv_split: p.kv_split,
        step_us: r.step_us,
        floor_us: r.floor_us,
    }
}

/// Work a sweep or a trajectory does unless the caller lifts the cap (`--max-task-steps`), in
/// simulated task-steps: ~10,000 configurations or steps of Llama-3.2-1B (25,640 tasks), a
/// minute or two on two cores.
pub const DEFAULT_MAX_TASK_STEPS: u64 = 300_000_000;

/// Runs every configuration (in parallel, with a progress bar and an estimate on a terminal),
/// refusing a spec whose configurations times the model's tasks exceed `max_task_steps` before
/// allocating them.
pub fn run(
    model: &Model,
    device: &DeviceProfile,
    spec: &SweepSpec,
    spec_file: &str,
    max_task_steps: u64,
) -> Result<Vec<SweepRow>, InputError> {
    let count = spec.point_count();
    let tasks = mkc_ir::lower::task_count(model);
    let work = count.saturating_mul(tasks);
    if work > max_task_steps {
        return Err(InputError::invalid(
            spec_file,
            "the knob lists",
            format!(
                "the spec expands to {} configurations of {tasks} tasks each, more than the cap \
                 of {max_task_steps} task-steps",
                if count == u64::MAX {
                    "more than 2^64".to_string()
                } else {
                    count.to_string()
                }
            ),
            format!(
                "shorten the lists, or raise the cap with --max-task-steps {}",
                if work == u64::MAX {
                    "N".to_string()
                } else {
                    work.to_string()
                }
            ),
        ));
    }
    validate(model, spec, spec_file)?;
    let points = grid(model, device, spec);
    let bar = ProgressBar::new(points.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} configurations, {eta} left")
            .expect("a valid template"),
    );
    Ok(points
        .par_iter()
        .progress_with(bar)
        .map(|p| simulate_point(model, p))
        .collect())
}

/// The rows as CSV with a header.
pub fn to_csv(rows: &[SweepRow]) -> String {
    let mut s = String::from(
        "target,policy,trigger,sms,bandwidth_gbps,signal_ns,launch_gap_ns,pdl_wait_release_ns,\
         cta_admission_ns,instruction_overhead_ns,coresidency,phase_release,vtp_shards,\
         attention_kv_split,step_us,floor_us\n",
    );
    for r in rows {
        s += &format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.3}\n",
            r.target,
            r.policy,
            r.trigger,
            r.sms,
            r.bandwidth_gbps,
            r.signal_ns,
            r.launch_gap_ns,
            r.pdl_wait_release_ns,
            r.cta_admission_ns,
            r.instruction_overhead_ns,
            r.coresidency,
            r.phase_release,
            r.vtp_shards,
            r.attention_kv_split,
            r.step_us,
            r.floor_us
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_apply_only_where_they_mean_something() {
        let model = mkc_ir::embedded::resolve_model("tiny").unwrap();
        let device = mkc_ir::embedded::resolve_device("h200").unwrap();
        let spec = SweepSpec::parse(
            "spec",
            "Sweep(policy: [round_robin, list], trigger: [early, late], sms: [4, 8], \
             vtp_shards: [(up_gate_down: 1), (qkv_attention: 2, up_gate_down: 4)])",
        )
        .unwrap();
        let points = grid(&model, &device, &spec);
        let count = |t| points.iter().filter(|p| p.target == t).count();
        // persistent: 2 policies x 2 SM counts x 2 shard sets; pdl: 2 triggers x 2 x 2; graph: 2 x 2.
        assert_eq!(
            (
                count(Target::Persistent),
                count(Target::Pdl),
                count(Target::Graph)
            ),
            (8, 8, 4)
        );
        assert!(points
            .iter()
            .any(|p| p.vtp.qkv_attention == 2 && p.vtp.up_gate_down == 4 && p.vtp.down_qkv == 1));
        let bad = SweepSpec::parse("spec", "Sweep(sms: [0])").unwrap();
        let err = run(&model, &device, &bad, "spec", DEFAULT_MAX_TASK_STEPS)
            .unwrap_err()
            .to_string();
        assert!(err.contains("field `sms[0]`"), "{err}");
        assert_eq!(spec.point_count(), points.len() as u64);
        let huge = SweepSpec::parse(
            "spec",
            &format!(
                "Sweep(sms: [{}], signal_ns: [{}], launch_gap_ns: [{}])",
                vec!["8"; 1000].join(","),
                vec!["1.0"; 1000].join(","),
                vec!["1.0"; 1000].join(",")
            ),
        )
        .unwrap();
        let err = run(&model, &device, &huge, "spec", DEFAULT_MAX_TASK_STEPS)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("3000000000 configurations") && err.contains("--max-task-steps"),
            "{err}"
        );
    }

    /// Split-KV part counts are an axis of every target, each row saying its own; a count the
    /// model cannot take, alone or with a listed shard set, is refused by its index.
    #[test]
    fn split_kv_parts_are_an_axis_named_in_rows_and_errors() {
        let model = mkc_ir::embedded::resolve_model("tiny").unwrap();
        let device = mkc_ir::embedded::resolve_device("h200").unwrap();
        let spec = SweepSpec::parse("spec", "Sweep(attention_kv_split: [1, 2, 4])").unwrap();
        let rows = run(&model, &device, &spec, "spec", DEFAULT_MAX_TASK_STEPS).unwrap();
        assert_eq!(rows.len() as u64, spec.point_count());
        assert_eq!(rows.len(), 9, "three targets x three part counts");
        for parts in [1, 2, 4] {
            assert_eq!(
                rows.iter()
                    .filter(|r| r.attention_kv_split == parts)
                    .count(),
                3
            );
        }
        assert!(to_csv(&rows)
            .lines()
            .next()
            .unwrap()
            .contains("attention_kv_split"));
        // tiny's history is at most 64 positions.
        let past = SweepSpec::parse("spec", "Sweep(attention_kv_split: [2, 65])").unwrap();
        let err = run(&model, &device, &past, "spec", DEFAULT_MAX_TASK_STEPS)
            .unwrap_err()
            .to_string();
        assert!(err.contains("field `attention_kv_split[1]`"), "{err}");
    }
}
