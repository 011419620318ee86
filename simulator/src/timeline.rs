//! Shared types of the step timelines: options (the what-if knobs), per-task spans, results.

use serde::{Deserialize, Serialize};

use mkc_catalogue::Ablation;
use mkc_ir::device::DeviceProfile;
use mkc_ir::{Task, TaskId};
use mkc_scheduler::Trigger;

/// What-if knobs of a simulation. Device numbers (bandwidth, latencies, SMs) are changed on the
/// [`DeviceProfile`] itself; these are the execution-model choices.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SimOptions {
    /// Override the pdl schedule's trigger placement.
    pub trigger: Option<Trigger>,
    /// Allow a successor grid's CTAs to share an SM with a predecessor's (sum rule).
    pub coresidency: bool,
    /// Phase-scoped resource release: a CTA frees its slot once its loads are done, so the
    /// successor's CTA (its loader) enters early.
    pub phase_release: bool,
    /// Carveout preference in percent (`None`: driver default, the full capacity).
    pub carveout_pct: Option<u32>,
    /// Dependent work removed, as `mkc bench --ablate` removes it from the kernels.
    #[serde(default)]
    pub ablate: Ablation,
}

/// Whether a unit of `kind` still reads activations after its wait under `ablate` (the
/// catalogue's [`Ablation`]: attention's own reads, or the streaming operators').
pub fn reads_activations(ablate: &Ablation, kind: mkc_ir::OpKind) -> bool {
    if kind == mkc_ir::OpKind::Attention {
        !ablate.attention
    } else {
        !ablate.loads
    }
}

/// How long after its wait a unit of `kind`'s activations land: the device's
/// `load_latency_ns`, or nothing where `ablate` removes its reads.
pub fn activation_latency(ablate: &Ablation, kind: mkc_ir::OpKind, device: &DeviceProfile) -> f64 {
    if reads_activations(ablate, kind) {
        device.latencies.load_latency_ns
    } else {
        0.0
    }
}

/// [`run_dependent_bytes`] of a run of tasks of one operator of `kind`, less the activation
/// reads `ablate` removes (its writes stay).
pub fn ablated_dependent_bytes<'g>(
    ablate: &Ablation,
    kind: mkc_ir::OpKind,
    tasks: impl IntoIterator<Item = &'g Task>,
) -> f64 {
    if reads_activations(ablate, kind) {
        run_dependent_bytes(tasks)
    } else {
        tasks.into_iter().map(|t| t.cost.write_bytes as f64).sum()
    }
}

/// When one task ran, and where.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Span {
    /// The task.
    pub task: TaskId,
    /// The SM it ran on.
    pub sm: u32,
    /// When its independent loads (weights, KV history) started.
    pub load_start: f64,
    /// When its dependent phase (after every wait) started.
    pub start: f64,
    /// When it finished and signalled.
    pub end: f64,
}

impl Span {
    /// A span not yet filled in (times NaN until the task runs).
    pub fn unset(n: usize) -> Vec<Span> {
        vec![
            Span {
                task: TaskId(0),
                sm: 0,
                load_start: f64::NAN,
                start: f64::NAN,
                end: f64::NAN,
            };
            n
        ]
    }
}

/// One simulated decode step.
#[derive(Clone, Debug)]
pub struct StepTimeline {
    /// Step time including the per-step launch, ns.
    pub step_ns: f64,
    /// Spans indexed by task id.
    pub spans: Vec<Span>,
}

/// Bytes streamed before the wait (weights, KV history) at KV length `kv_len`.
pub fn independent_bytes(task: &Task, kv_len: u32) -> f64 {
    (task.cost.weight_bytes + task.cost.kv_bytes_per_token * kv_len as u64) as f64
}

/// Bytes moved after the wait (activations in, results out).
pub fn dependent_bytes(task: &Task) -> f64 {
    (task.cost.activation_read_bytes + task.cost.write_bytes) as f64
}

/// The bytes one run of tasks (a chain CTA's task run, a persistent instruction) moves after
/// its wait: its tasks' activations and writes, where an input the previous task of the run
/// staged is not loaded again.
pub fn run_dependent_bytes<'g>(tasks: impl IntoIterator<Item = &'g Task>) -> f64 {
    let mut dependent = 0.0;
    let mut last_reads: Option<&[mkc_ir::Access]> = None;
    for task in tasks {
        let staged = last_reads == Some(task.reads.as_slice());
        dependent += if staged {
            task.cost.write_bytes as f64
        } else {
            dependent_bytes(task)
        };
        last_reads = Some(task.reads.as_slice());
    }
    dependent
}

/// Bytes per ns of the whole device and of one SM at most.
pub fn bandwidths(device: &DeviceProfile) -> (f64, f64) {
    (device.read_bandwidth_gbps, device.sm_read_bandwidth_gbps)
}
