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

/// What an attention task's KV chunks after its first cost it at KV length `kv_len` (its part of
/// it under split-KV, `lowering.attention_kv_split`), where
/// its shared memory stages `chunk` positions at once (`mkc_catalogue::attention_chunk` for a
/// chain grid, the persistent layout's for the persistent kernel): two dependent passes per
/// further chunk (K for the scores, V for the output), each `attention_kv_pass_ns` plus
/// `attention_kv_ns_per_kib` for its rows. Nothing where the history fits one chunk, without a
/// model, or under the attention ablation.
pub fn attention_extra_chunks_ns(
    model: Option<&mkc_ir::Model>,
    chunk: Option<u32>,
    kv_len: u32,
    ablate: &Ablation,
    device: &DeviceProfile,
) -> f64 {
    let (Some(m), Some(chunk)) = (model, chunk.filter(|&c| c > 0)) else {
        return 0.0;
    };
    // A task reads its part of the history (split-KV): the first part is the longest.
    let kv_len = m.attention_part_len(kv_len);
    if ablate.attention || kv_len <= chunk {
        return 0.0;
    }
    let lat = &device.latencies;
    let further = (kv_len.div_ceil(chunk) - 1) as f64;
    // bf16 K (or V) rows past the first chunk, per pass.
    let kib = (kv_len - chunk) as f64 * m.geometry.head_dim as f64 * 2.0 / 1024.0;
    2.0 * (further * lat.attention_kv_pass_ns + kib * lat.attention_kv_ns_per_kib)
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

/// How long after its wait a unit of `kind`'s activations land: `latency_ns` (the target's
/// load latency), or nothing where `ablate` removes its reads.
pub fn activation_latency(ablate: &Ablation, kind: mkc_ir::OpKind, latency_ns: f64) -> f64 {
    if reads_activations(ablate, kind) {
        latency_ns
    } else {
        0.0
    }
}

/// What a unit of `kind` pays after its wait to merge split-KV partial records into its input
/// (`kv_merge_ns`): the O-projection's, where `model` splits attention's KV history into parts
/// and `ablate` leaves its reads (the loads ablation skips the merge with the rest of the
/// staging); nothing elsewhere. Both targets run the same merge.
pub fn merge_ns(
    model: Option<&mkc_ir::Model>,
    kind: mkc_ir::OpKind,
    ablate: &Ablation,
    device: &DeviceProfile,
) -> f64 {
    let split = model.is_some_and(|m| m.lowering.kv_parts() > 1);
    if kind == mkc_ir::OpKind::OProj && split && reads_activations(ablate, kind) {
        device.latencies.kv_merge_ns
    } else {
        0.0
    }
}

/// The consumer warps of one persistent instruction taking its weight pages in turn: page p
/// goes to warp p % warps, which computes it in `page_compute_ns`, or `page_compute_mma_ns`
/// where the instruction's page loop runs on the tensor cores (none where `ablate.compute`),
/// after both the page and the warp are ready. What finishes last is when the instruction's
/// products are done. (The chain model does not charge page math: with the same figure it
/// over-predicts Llama-3.2-1B's pdl chain by 12%; docs/perf.md.)
#[derive(Clone, Debug)]
pub struct PageMath {
    free: Vec<f64>,
    taken: usize,
    page_ns: f64,
    /// A page's math by the FMA loop and by the tensor cores.
    fma_ns: f64,
    mma_ns: f64,
}

impl PageMath {
    /// `warps` consumer warps (at least one) on `device`, under `ablate`.
    pub fn new(warps: u32, ablate: &Ablation, device: &DeviceProfile) -> PageMath {
        let of = |tensor_cores| {
            if ablate.compute {
                0.0
            } else {
                device.latencies.page_compute(tensor_cores)
            }
        };
        PageMath {
            free: vec![0.0; warps.max(1) as usize],
            taken: 0,
            page_ns: of(false),
            fma_ns: of(false),
            mma_ns: of(true),
        }
    }

    /// A new instruction whose warps may start at `at` (its activations are staged), its page
    /// loop on the tensor cores or not (`mkc_catalogue::tensor_core_shape`).
    pub fn start(&mut self, at: f64, tensor_cores: bool) {
        self.free.fill(at);
        self.taken = 0;
        self.page_ns = if tensor_cores {
            self.mma_ns
        } else {
            self.fma_ns
        };
    }

    /// One page, ready at `ready`, to the next warp in turn.
    pub fn take(&mut self, ready: f64) {
        let w = self.taken % self.free.len();
        self.free[w] = self.free[w].max(ready) + self.page_ns;
        self.taken += 1;
    }

    /// Work every warp does together, `ns` long, once all are free and `ready` has passed
    /// (a task's attention, before its pages: it fills their input).
    pub fn together(&mut self, ready: f64, ns: f64) {
        let at = self.done().max(ready) + ns;
        self.free.fill(at);
    }

    /// When the last warp is done (the instruction's start if it took nothing).
    pub fn done(&self) -> f64 {
        self.free.iter().copied().fold(f64::MIN, f64::max)
    }
}

/// Weight pages of `page_bytes` in a load of `bytes` (a part page counts as one).
pub fn pages_in(bytes: f64, page_bytes: f64) -> usize {
    (bytes.max(0.0) / page_bytes).ceil() as usize
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

/// When each task of the step ended, ns, indexed by task id (NaN: it did not run): the input
/// of [`mkc_ir::edges::layer_edges`].
pub fn task_ends(t: &StepTimeline) -> Vec<f64> {
    t.spans.iter().map(|s| s.end).collect()
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
    let c = &task.cost;
    c.weight_bytes as f64 + c.kv_bytes_per_token as f64 * c.kv_positions(kv_len) as f64
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

#[cfg(test)]
mod tests {
    use super::*;

    fn math(warps: u32, page_ns: f64, compute_ablated: bool) -> PageMath {
        let mut device = mkc_ir::embedded::resolve_device("h200").unwrap();
        device.latencies.page_compute_ns = page_ns;
        let ablate = Ablation {
            compute: compute_ablated,
            ..Ablation::default()
        };
        PageMath::new(warps, &ablate, &device)
    }

    /// An instruction whose page loop runs on the tensor cores pays the profile's
    /// `page_compute_mma_ns` per page, the next one the FMA figure again; without the figure,
    /// both pay `page_compute_ns`; the compute ablation removes both.
    #[test]
    fn tensor_core_pages_cost_their_own_figure() {
        let mut device = mkc_ir::embedded::resolve_device("h200").unwrap();
        device.latencies.page_compute_ns = 10.0;
        device.latencies.page_compute_mma_ns = Some(4.0);
        let mut m = PageMath::new(1, &Ablation::default(), &device);
        let pages = |m: &mut PageMath, tensor_cores| {
            m.start(0.0, tensor_cores);
            m.take(0.0);
            m.take(0.0);
            m.done()
        };
        assert_eq!(pages(&mut m, true), 8.0);
        assert_eq!(pages(&mut m, false), 20.0);
        device.latencies.page_compute_mma_ns = None;
        let mut fma = PageMath::new(1, &Ablation::default(), &device);
        assert_eq!(pages(&mut fma, true), 20.0);
        let ablated = Ablation {
            compute: true,
            ..Ablation::default()
        };
        let mut none = PageMath::new(1, &ablated, &device);
        assert_eq!(pages(&mut none, true), 0.0);
    }

    /// Two passes per KV chunk after the first, each a round trip plus its rows at the SM's
    /// rate; nothing while the history fits one chunk, without a model, or ablated.
    #[test]
    fn attention_pays_two_passes_per_further_kv_chunk() {
        let mut device = mkc_ir::embedded::resolve_device("h100").unwrap();
        device.latencies.attention_kv_pass_ns = 1000.0;
        device.latencies.attention_kv_ns_per_kib = 16.0;
        let m = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        let hd = m.geometry.head_dim as f64;
        let none = Ablation::default();
        let at = |kv, ablate: &Ablation, device: &DeviceProfile| {
            attention_extra_chunks_ns(Some(&m), Some(100), kv, ablate, device)
        };
        assert_eq!(at(100, &none, &device), 0.0);
        // 201 positions: two further chunks, 101 rows past the first per pass.
        let want = 2.0 * (2.0 * 1000.0 + 101.0 * hd * 2.0 / 1024.0 * 16.0);
        let got = at(201, &none, &device);
        assert!((got - want).abs() < 1e-9, "{got}");
        let ablated = Ablation {
            attention: true,
            ..none
        };
        assert_eq!(at(201, &ablated, &device), 0.0);
        assert_eq!(
            attention_extra_chunks_ns(None, Some(100), 201, &none, &device),
            0.0
        );
        assert_eq!(
            attention_extra_chunks_ns(Some(&m), Some(0), 201, &none, &device),
            0.0
        );
        device.latencies.attention_kv_ns_per_kib = 0.0;
        assert_eq!(at(201, &none, &device), 4000.0);
    }

    #[test]
    fn warps_take_pages_in_turn_each_no_sooner_than_it_is_ready() {
        // Seven pages ready at once on three warps: three rounds of 10 ns after the start.
        let mut m = math(3, 10.0, false);
        m.start(100.0, false);
        for _ in 0..7 {
            m.take(0.0);
        }
        assert_eq!(m.done(), 130.0);
        // A page that lands late starts when it lands, on the next warp in turn.
        m.start(0.0, false);
        m.take(0.0);
        m.take(50.0);
        assert_eq!(m.done(), 60.0);
        // Nothing taken: done at the start.
        m.start(7.0, false);
        assert_eq!(m.done(), 7.0);
    }

    #[test]
    fn pages_landing_faster_than_one_warp_computes_queue_and_ablated_math_is_free() {
        // Four pages land at 10, 20, 30, 40; one warp of 15 ns each.
        let mut m = math(1, 15.0, false);
        m.start(0.0, false);
        for landed in [10.0, 20.0, 30.0, 40.0] {
            m.take(landed);
        }
        assert_eq!(m.done(), 70.0); // from the first landing (10), 4 x 15: the warp is the bottleneck
        let mut free = math(1, 15.0, true);
        free.start(0.0, false);
        for landed in [10.0, 20.0, 30.0, 40.0] {
            free.take(landed);
        }
        assert_eq!(free.done(), 40.0);
        assert_eq!(pages_in(16384.0 * 2.5, 16384.0), 3);
        assert_eq!(pages_in(0.0, 16384.0), 0);
    }
}
