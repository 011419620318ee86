//! The persistent target on the GPU: the plan encoded and uploaded once, the monotonic counters
//! zeroed once, the co-residency of one CTA per SM proven by the driver's occupancy figure
//! before anything launches, and one launch of `k_persistent` per step captured as the step's
//! graph. After each step the host reads the kernel's stall record: a wait that spun past the
//! watchdog stopped every CTA and is reported naming the SM, instruction and counter.

use std::ffi::c_void;

use cudarc::driver::{result, sys};
use mkc_ir::OpKind;
use mkc_scheduler::{Schedule, Target};

use super::device::DevBuf;
use super::launch::{arg, StepGraph};
use super::setup::{func, load_module, opt_in_smem};
use super::Runner;
use crate::abi::TRACE_SLOTS;
use crate::abi::{KCounterRef, KInstr, KPersistent};
use crate::error::{check, BackendError};
use crate::timeline::TracedWork;

/// How long one counter wait may spin before the kernel stops, ns.
const WAIT_LIMIT_NS: u64 = 2_000_000_000;

/// What a persistent step graph reads: its module, plan, counters and stall record. Built as
/// soon as the module is loaded, so that any later failure unloads and frees what it holds.
pub(crate) struct PersistentState {
    module: sys::CUmodule,
    bufs: Vec<DevBuf>,
    stall: u64,
    /// The plan's instructions and the graph's operators (kernel id, layer, label, kind), to
    /// name a stalled or traced instruction.
    instrs: Vec<KInstr>,
    ops: Vec<(i32, Option<u32>, String, OpKind)>,
}

impl Drop for PersistentState {
    fn drop(&mut self) {
        if super::device::stalled() {
            return;
        }
        // SAFETY: loaded by `capture_persistent`, unloaded once, after its graph.
        unsafe { result::module::unload(self.module) }.ok();
    }
}

impl PersistentState {
    /// Uploads `data` to a new device buffer the state keeps.
    fn upload<T>(&mut self, data: &[T], what: &str) -> Result<u64, BackendError> {
        let b = DevBuf::new(std::mem::size_of_val(data), what)?;
        if !data.is_empty() {
            super::device::upload(b.ptr, data, what)?;
        }
        let p = b.ptr;
        self.bufs.push(b);
        Ok(p)
    }

    /// Instruction `i`'s operator and task run, as its stall is reported.
    fn label(&self, i: usize) -> String {
        let Some(ins) = self.instrs.get(i) else {
            return format!("instruction {i} is not in the plan");
        };
        let op = self
            .op_of(ins)
            .map_or_else(|| format!("op {}", ins.op), |(label, _)| label.to_string());
        format!("{op} tasks {}..{}", ins.first, ins.first + ins.count)
    }

    /// The label and kind of the operator `ins` runs.
    fn op_of(&self, ins: &KInstr) -> Option<(&str, OpKind)> {
        self.ops
            .iter()
            .find(|(id, layer, ..)| *id == ins.op && layer.is_none_or(|l| l as i32 == ins.layer))
            .map(|(_, _, label, kind)| (label.as_str(), *kind))
    }
}

impl Runner {
    /// Builds the persistent kernel, uploads `schedule`'s plan and captures one step: a single
    /// launch of one CTA per SM, refused unless the driver says every CTA is co-resident.
    pub(super) fn capture_persistent(
        &self,
        schedule: &Schedule,
    ) -> Result<StepGraph, BackendError> {
        self.capture_persistent_with(schedule, &[], 0)
    }

    /// [`Runner::capture_persistent`] with a build of the kernel with `defines` (an ablation,
    /// or tracing), and `trace` (null, or one record per instruction for a traced build).
    pub(super) fn capture_persistent_with(
        &self,
        schedule: &Schedule,
        defines: &[(&str, u32)],
        trace: u64,
    ) -> Result<StepGraph, BackendError> {
        let m = &self.model;
        let sms = self._gpu.sms as u32;
        let plan = crate::persistent_plan::encode(schedule, m, sms)?;
        let compiled = crate::kernels::compile_persistent_with("sm_90a", m, defines)?;
        let mut state = PersistentState {
            module: load_module(&compiled.cubin, "the persistent kernel")?,
            bufs: Vec::new(),
            stall: 0,
            instrs: Vec::new(),
            ops: schedule
                .graph
                .ops
                .iter()
                .map(|o| (crate::abi::op_id(o.kind), o.layer, o.label(), o.kind))
                .collect(),
        };
        let f = func(state.module, mkc_catalogue::PERSISTENT_ENTRY)?;
        let threads = mkc_catalogue::persistent_threads(&m.tuning);
        let smem = mkc_catalogue::persistent_dynamic_smem(m);
        opt_in_smem(f, smem, mkc_catalogue::PERSISTENT_ENTRY)?;
        // Co-residency: every CTA of the grid must be resident at once, or a CTA waiting on a
        // counter could hold the SM that the CTA which signals it needs.
        let mut per_sm = 0i32;
        // SAFETY: `f` is a live function; the out pointer is valid.
        check(
            unsafe {
                sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                    &mut per_sm,
                    f,
                    threads as i32,
                    smem as usize,
                )
                .result()
            },
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            "k_persistent",
        )?;
        if per_sm < 1 {
            return Err(BackendError::Unsupported(format!(
                "the persistent kernel cannot be resident on an SM ({threads} threads, {} \
                 registers, {smem} B of dynamic shared memory): it is not launched, since a \
                 grid whose CTAs are not all resident could wait forever",
                compiled
                    .kernels
                    .iter()
                    .find(|k| k.name == mkc_catalogue::PERSISTENT_ENTRY)
                    .map_or(0, |k| k.registers)
            )));
        }
        let counters = vec![0u32; plan.counters.max(1)];
        let kp = KPersistent {
            layers: state.upload(&self.layers, "persistent layers")?,
            instrs: state.upload(&plan.instrs, "persistent instructions")?,
            refs: state.upload::<KCounterRef>(&plan.refs, "persistent counter refs")?,
            stream_start: state.upload(&plan.stream_start, "persistent streams")?,
            counters: state.upload(&counters, "counters")?,
            epoch: state.upload(&[0u32], "epoch")?,
            exited: state.upload(&[0u32], "exited")?,
            stall: state.upload(&[0u64; 6], "stall record")?,
            watchdog_ns: WAIT_LIMIT_NS,
            trace,
        };
        state.stall = kp.stall;
        state.instrs = plan.instrs;
        let (mut km, mut globals, mut kp_arg) = (self.km, self.globals, kp);
        let mut args: Vec<*mut c_void> = vec![arg(&mut km), arg(&mut globals), arg(&mut kp_arg)];
        self.capture_launches(Target::Persistent, "persistent", Some(state), || {
            // SAFETY: the arguments match k_persistent(Model, Globals, Persistent) and outlive
            // the call; every pointer inside them is a live device allocation.
            let launched = unsafe {
                result::launch_kernel(
                    f,
                    (sms, 1, 1),
                    (threads, 1, 1),
                    smem,
                    self.stream,
                    &mut args,
                )
            };
            check(launched, "cuLaunchKernel", "k_persistent")
        })
    }

    /// After a persistent step: an error naming the wait that stalled, if one did.
    pub(super) fn check_stall(&self, graph: &StepGraph, pos: u32) -> Result<(), BackendError> {
        let Some(state) = &graph.owned else {
            return Ok(());
        };
        let mut rec = [0u64; 6];
        // SAFETY: the stall record holds 6 u64; the step has completed.
        check(
            unsafe { result::memcpy_dtoh_sync(&mut rec, state.stall) },
            "cuMemcpyDtoH",
            "stall record",
        )?;
        if rec[0] == 0 {
            return Ok(());
        }
        super::device::STALLED.store(true, std::sync::atomic::Ordering::SeqCst);
        let i = rec[2] as usize;
        let label = state.label(i);
        Err(BackendError::Unsupported(format!(
            "the persistent kernel stalled at position {pos}: SM {} instruction {i} ({label}) \
             waited {:.1} s on counter {} at {} of {}; every CTA stopped",
            rec[1],
            WAIT_LIMIT_NS as f64 / 1e9,
            rec[3],
            rec[4] >> 32,
            rec[4] & 0xFFFF_FFFF
        )))
    }
}

impl Runner {
    /// Runs one persistent step at position `pos` with a traced build of the kernel: every
    /// instruction's phase record (`mkc run|bench --timeline`). The model state must be valid
    /// at `pos`; the step runs on fresh counters, so it needs nothing from earlier launches.
    pub(super) fn trace_persistent(
        &mut self,
        schedule: &Schedule,
        pos: u32,
    ) -> Result<Vec<TracedWork>, BackendError> {
        let sms = self._gpu.sms as u32;
        let n = crate::persistent_plan::encode(schedule, &self.model, sms)?
            .instrs
            .len();
        let buf = self.trace_buffer(n * TRACE_SLOTS, "persistent trace")?;
        let graph = self.capture_persistent_with(schedule, &[("MKC_TRACE", 1)], buf)?;
        let host = self.replay_traced(&graph, pos, buf, n * TRACE_SLOTS, "persistent trace")?;
        let state = graph
            .owned
            .as_ref()
            .ok_or_else(|| BackendError::Unsupported("no persistent state".into()))?;
        state
            .instrs
            .iter()
            .zip(host.chunks_exact(TRACE_SLOTS))
            .map(|(ins, rec)| {
                let (label, kind) = state.op_of(ins).ok_or_else(|| {
                    BackendError::Unsupported(format!(
                        "instruction of operator {} layer {} is not in the graph",
                        ins.op, ins.layer
                    ))
                })?;
                let mut record = [0u64; TRACE_SLOTS];
                record.copy_from_slice(rec);
                Ok(TracedWork {
                    label: label.to_string(),
                    kind,
                    tasks: (ins.first as u32, (ins.first + ins.count) as u32),
                    record,
                })
            })
            .collect()
    }
}
