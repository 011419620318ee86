//! What-if sweeps: the cartesian product of knob values, compiled and simulated in parallel.
//!
//! A sweep spec is a RON file; every list left out keeps the model's or device's value:
//!
//! ```ron
//! Sweep(
//!     targets: [persistent, pdl, graph],
//!     sms: [66, 132],
//!     bandwidth_gbps: [3350.0, 4480.0],
//!     signal_ns: [250.0, 500.0],
//!     trigger: [early, late],
//!     coresidency: [false, true],
//!     phase_release: [false, true],
//!     up_gate_down_shards: [1, 4],
//!     policy: [round_robin, list],
//! )
//! ```

use indicatif::{ParallelProgressIterator, ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use mkc_ir::device::DeviceProfile;
use mkc_ir::{InputError, Model};
use mkc_scheduler::{compile, CompileOptions, Policy, Target, Trigger};

use crate::timeline::SimOptions;

/// The knob values to combine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename = "Sweep")]
pub struct SweepSpec {
    /// Targets (default: all three).
    pub targets: Vec<Target>,
    /// SM counts.
    pub sms: Vec<u32>,
    /// Read bandwidths, GB/s.
    pub bandwidth_gbps: Vec<f64>,
    /// Counter signal latencies, ns.
    pub signal_ns: Vec<f64>,
    /// PDL trigger placements.
    pub trigger: Vec<Trigger>,
    /// Co-residency allowed or not.
    pub coresidency: Vec<bool>,
    /// Phase-scoped resource release on or off.
    pub phase_release: Vec<bool>,
    /// VTP shards on the up/gate -> down edge (1 = off).
    pub up_gate_down_shards: Vec<u32>,
    /// Persistent policies.
    pub policy: Vec<Policy>,
}

/// One configuration and its predicted step time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    /// Target.
    pub target: &'static str,
    /// Policy (persistent) or `-`.
    pub policy: &'static str,
    /// SMs.
    pub sms: u32,
    /// Bandwidth, GB/s.
    pub bandwidth_gbps: f64,
    /// Signal latency, ns.
    pub signal_ns: f64,
    /// Trigger placement.
    pub trigger: &'static str,
    /// Co-residency.
    pub coresidency: bool,
    /// Phase-scoped release.
    pub phase_release: bool,
    /// Shards on up/gate -> down.
    pub up_gate_down_shards: u32,
    /// Predicted step, µs.
    pub step_us: f64,
    /// Bandwidth floor, µs.
    pub floor_us: f64,
}

impl SweepSpec {
    /// Parses a sweep spec; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<SweepSpec, InputError> {
        ron::from_str(text).map_err(|e| InputError::from_ron(file, &e))
    }
}

fn or<T: Clone>(list: &[T], default: T) -> Vec<T> {
    if list.is_empty() {
        vec![default]
    } else {
        list.to_vec()
    }
}

/// One point of the grid.
#[derive(Clone, Debug)]
struct Point {
    target: Target,
    policy: Policy,
    sms: u32,
    bandwidth: f64,
    signal: f64,
    trigger: Trigger,
    coresidency: bool,
    phase_release: bool,
    shards: u32,
}

/// Expands the spec into its grid of configurations.
fn grid(model: &Model, device: &DeviceProfile, spec: &SweepSpec) -> Vec<Point> {
    let targets = if spec.targets.is_empty() {
        vec![Target::Persistent, Target::Pdl, Target::Graph]
    } else {
        spec.targets.clone()
    };
    let mut out = Vec::new();
    for &target in &targets {
        let policies = match target {
            Target::Persistent => or(&spec.policy, Policy::RoundRobin),
            _ => vec![Policy::RoundRobin],
        };
        let triggers = match target {
            Target::Pdl => or(&spec.trigger, Trigger::Early),
            _ => vec![Trigger::Early],
        };
        for &policy in &policies {
            for &sms in &or(&spec.sms, device.sms) {
                for &bandwidth in &or(&spec.bandwidth_gbps, device.read_bandwidth_gbps) {
                    for &signal in &or(&spec.signal_ns, device.latencies.signal_visible_ns) {
                        for &trigger in &triggers {
                            for &coresidency in &or(&spec.coresidency, false) {
                                for &phase_release in &or(&spec.phase_release, false) {
                                    for &shards in &or(
                                        &spec.up_gate_down_shards,
                                        model.lowering.vtp_shards.up_gate_down,
                                    ) {
                                        out.push(Point {
                                            target,
                                            policy,
                                            sms,
                                            bandwidth,
                                            signal,
                                            trigger,
                                            coresidency,
                                            phase_release,
                                            shards,
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Runs every configuration (in parallel, with a progress bar on a terminal).
pub fn run(
    model: &Model,
    device: &DeviceProfile,
    spec: &SweepSpec,
    spec_file: &str,
) -> Result<Vec<SweepRow>, InputError> {
    let points = grid(model, device, spec);
    // Validate every distinct shard count and SM count before spending time.
    for p in &points {
        let mut m = model.clone();
        m.lowering.vtp_shards.up_gate_down = p.shards;
        m.validate(spec_file)?;
        let positive = p.bandwidth.is_finite() && p.bandwidth > 0.0;
        let non_negative = p.signal.is_finite() && p.signal >= 0.0;
        if p.sms == 0 || !positive || !non_negative {
            return Err(InputError::invalid(
                spec_file,
                "sms / bandwidth_gbps / signal_ns",
                "a value is zero or negative",
                "use positive SM counts and bandwidths and non-negative latencies",
            ));
        }
    }
    let bar = ProgressBar::new(points.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} configurations, {eta} left")
            .expect("a valid template"),
    );
    let rows = points
        .par_iter()
        .progress_with(bar)
        .map(|p| {
            let mut m = model.clone();
            m.lowering.vtp_shards.up_gate_down = p.shards;
            let mut d = device.clone().with_sms(p.sms);
            d.read_bandwidth_gbps = p.bandwidth;
            d.latencies.signal_visible_ns = p.signal;
            let opts = CompileOptions {
                target: p.target,
                policy: p.policy,
                trigger: p.trigger,
                ..CompileOptions::default()
            };
            let s = compile(&m, &d, &opts).schedule;
            let sim = SimOptions {
                coresidency: p.coresidency,
                phase_release: p.phase_release,
                ..SimOptions::default()
            };
            let kv = s.graph.typical_kv_len;
            let t = crate::simulate_step(&s, &d, &sim, kv);
            let r = crate::report::summarize(&s, &d, &t, kv);
            SweepRow {
                target: p.target.name(),
                policy: if p.target == Target::Persistent {
                    p.policy.name()
                } else {
                    "-"
                },
                sms: p.sms,
                bandwidth_gbps: p.bandwidth,
                signal_ns: p.signal,
                trigger: match (p.target, p.trigger) {
                    (Target::Pdl, Trigger::Early) => "early",
                    (Target::Pdl, Trigger::Late) => "late",
                    _ => "-",
                },
                coresidency: p.coresidency,
                phase_release: p.phase_release,
                up_gate_down_shards: p.shards,
                step_us: r.step_us,
                floor_us: r.floor_us,
            }
        })
        .collect();
    Ok(rows)
}

/// The rows as CSV with a header.
pub fn to_csv(rows: &[SweepRow]) -> String {
    let mut s = String::from(
        "target,policy,sms,bandwidth_gbps,signal_ns,trigger,coresidency,phase_release,\
         up_gate_down_shards,step_us,floor_us\n",
    );
    for r in rows {
        s += &format!(
            "{},{},{},{},{},{},{},{},{},{:.3},{:.3}\n",
            r.target,
            r.policy,
            r.sms,
            r.bandwidth_gbps,
            r.signal_ns,
            r.trigger,
            r.coresidency,
            r.phase_release,
            r.up_gate_down_shards,
            r.step_us,
            r.floor_us
        );
    }
    s
}
