//! The GPU runner: one context, the compiled module, device buffers for weights, activations,
//! split-K partial sums and the KV cache, and one CUDA graph per target built from a chain
//! schedule.
//!
//! Every driver call is checked and named. Each decode step is one graph launch preceded by a
//! memset of the position (no kernel resets anything: partial sums are overwritten each step,
//! argmax slots are one per position). A watchdog polls each step's completion event.
//!
//! Modules: `device` (context, buffers, events), `abi` (the kernels' parameter structs),
//! `setup` (compile, load, allocate, fill), `launch` (grids and graph capture), `run` (the
//! workload under a watchdog, timings), `operators` (each operator kernel alone on random
//! inputs against the CPU), `trace` (CTA phase traces), `ablate` (chains with one
//! kind of dependent work removed), `info` (driver figures), `probe` (hardware facts:
//! co-residency, latency under load, L2 as a weight source).

mod ablate;
mod device;
mod info;
mod launch;
mod operators;
mod persistent;
mod probe;
mod run;
mod setup;
mod trace;

use cudarc::driver::{result, sys};
use mkc_ir::Model;

pub use device::Gpu;
pub use info::loaded_kernel_info;
pub use launch::StepGraph;
pub use operators::{OperatorCheck, OutputCheck, OPERATOR_TOLERANCE};
pub use probe::{
    chase_cycle, heads_per_task, occupancy_kernels, page_inputs, probe_attention,
    probe_coresidency, probe_l2, probe_latency, probe_matvec, probe_occupancy, probe_page_math,
    probe_partition, probe_sm_speeds, AttentionBuild, AttentionProbe, AttentionRow, AttentionShape,
    Deal, KernelShape, L2Probe, L2Row, L2Warmed, LatencyProbe, LoadedLatency, MatvecRow,
    OccupancyQuery, PageMathProbe, PageMathRow, PairProbe, PartitionProbe, PartitionRow, ProbeSide,
    ProfileTerm, ReleaseCost, SmSpeedProbe, StreamKind, ATTENTION_LENGTHS, ATTENTION_REPEATS,
    L2_MIXED_MIB, L2_REPEATS, L2_WARMERS, LOADED_CASES, MATVEC_REPEATS, MATVEC_SHAPES,
    OCCUPANCY_KERNELS, PAGE_MATH_CASES, PAGE_MATH_REPEATS, PAGE_MATH_STREAM_CASES,
    PARTITION_REPEATS, PROBE_REGISTERS, RESIDENT_SMEM, SM_SPEED_REPEATS, SM_SPEED_SLOTS,
};
pub use run::{RunOptions, RunOutput};
pub use setup::WeightSource;
pub use trace::{GridTrace, TRACE_SLOTS};

use crate::abi::{KGlobals, KLayer, KModel};
use crate::ablation::Ablation;
use crate::kernels::KernelInfo;
use device::{stalled, DevBuf};

/// An operator's kernel: its kind and function.
type OpFn = (mkc_ir::OpKind, sys::CUfunction);

/// The project's one median (the upper middle of an even count), for the probes.
use mkc_ir::stats::median;

/// The runner: module, buffers and launch logic for one model.
pub struct Runner {
    model: Model,
    km: KModel,
    globals: KGlobals,
    layers: Vec<KLayer>,
    stream: sys::CUstream,
    module: sys::CUmodule,
    funcs: Vec<OpFn>,
    /// The traced build of the operators, loaded on first use by `trace_step`.
    traced: Option<(sys::CUmodule, Vec<OpFn>)>,
    /// Ablation builds of the operators, each loaded on first use by `capture_ablated`.
    ablated: Vec<(Ablation, sys::CUmodule, Vec<OpFn>)>,
    read_bw: sys::CUfunction,
    /// Kernel figures from the compiler, with this model's dynamic shared memory.
    pub kernel_info: Vec<KernelInfo>,
    bufs: Vec<DevBuf>,
    /// Bytes of `bufs`, checked after allocation against `memory::DeviceMemory`.
    allocated: u64,
    _gpu: Gpu,
}

impl Drop for Runner {
    fn drop(&mut self) {
        if stalled() {
            std::mem::forget(std::mem::take(&mut self.bufs));
            return;
        }
        self.sync("drop").ok();
        self.bufs.clear();
        // SAFETY: created in `new`, destroyed once.
        unsafe {
            result::stream::destroy(self.stream).ok();
            result::module::unload(self.module).ok();
            if let Some((m, _)) = self.traced.take() {
                result::module::unload(m).ok();
            }
            for (_, m, _) in self.ablated.drain(..) {
                result::module::unload(m).ok();
            }
        }
    }
}

/// SMs of the runner's GPU.
pub fn sm_count(r: &Runner) -> u32 {
    r._gpu.sms as u32
}
