//! The persistent target on the GPU: the plan encoded and uploaded once, the monotonic counters
//! zeroed once, the co-residency of one CTA per SM proven by the driver's occupancy figure
//! before anything launches, and one launch of `k_persistent` per step captured as the step's
//! graph. After each step the host reads the kernel's stall record: a wait that spun past the
//! watchdog stopped every CTA and is reported naming the SM, instruction and counter.

use std::ffi::c_void;

use cudarc::driver::{result, sys};
use mkc_scheduler::{Schedule, Target};

use super::device::DevBuf;
use super::launch::{arg, StepGraph};
use super::setup::{func, load_module, opt_in_smem};
use super::Runner;
use crate::abi::{KCounterRef, KLayer, KPersistent};
use crate::error::{check, BackendError};

/// How long one counter wait may spin before the kernel stops, ns.
const WAIT_LIMIT_NS: u64 = 2_000_000_000;

/// What a persistent step graph reads: its module, plan, counters and stall record.
pub(crate) struct PersistentState {
    module: sys::CUmodule,
    _bufs: Vec<DevBuf>,
    stall: u64,
    /// Each instruction's operator and task run, for naming a stalled one.
    labels: Vec<String>,
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

/// Uploads `data` to a new device buffer.
fn upload<T>(data: &[T], what: &str, bufs: &mut Vec<DevBuf>) -> Result<u64, BackendError> {
    let b = DevBuf::new(std::mem::size_of_val(data), what)?;
    if !data.is_empty() {
        // SAFETY: `b` holds exactly `data`'s bytes.
        check(
            unsafe { result::memcpy_htod_sync(b.ptr, data) },
            "cuMemcpyHtoD",
            what,
        )?;
    }
    let p = b.ptr;
    bufs.push(b);
    Ok(p)
}

impl Runner {
    /// Builds the persistent kernel, uploads `schedule`'s plan and captures one step: a single
    /// launch of one CTA per SM, refused unless the driver says every CTA is co-resident.
    pub(super) fn capture_persistent(
        &self,
        schedule: &Schedule,
    ) -> Result<StepGraph, BackendError> {
        self.capture_persistent_with(schedule, &[])
    }

    /// [`Runner::capture_persistent`] with a build of the kernel with `defines` (an ablation).
    pub(super) fn capture_persistent_with(
        &self,
        schedule: &Schedule,
        defines: &[(&str, u32)],
    ) -> Result<StepGraph, BackendError> {
        let m = &self.model;
        let sms = self._gpu.sms as u32;
        let plan = crate::persistent_plan::encode(schedule, m, sms)?;
        let compiled = crate::kernels::compile_persistent_with("sm_90a", m, defines)?;
        let module = load_module(&compiled.cubin, "the persistent kernel")?;
        let mut bufs = Vec::new();
        let state_err = |e| {
            // SAFETY: loaded above; nothing references it yet.
            unsafe { result::module::unload(module) }.ok();
            e
        };
        let f = func(module, mkc_catalogue::PERSISTENT_ENTRY).map_err(state_err)?;
        let threads = mkc_catalogue::persistent_threads(&m.tuning);
        let smem = mkc_catalogue::persistent_dynamic_smem(m);
        opt_in_smem(f, smem, mkc_catalogue::PERSISTENT_ENTRY).map_err(state_err)?;
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
        )
        .map_err(state_err)?;
        if per_sm < 1 {
            return Err(state_err(BackendError::Unsupported(format!(
                "the persistent kernel cannot be resident on an SM ({threads} threads, {} \
                 registers, {smem} B of dynamic shared memory): it is not launched, since a \
                 grid whose CTAs are not all resident could wait forever",
                compiled
                    .kernels
                    .iter()
                    .find(|k| k.name == mkc_catalogue::PERSISTENT_ENTRY)
                    .map_or(0, |k| k.registers)
            ))));
        }
        let layers: Vec<KLayer> = self.layers.clone();
        let counters = vec![0u32; plan.counters.max(1)];
        let kp = KPersistent {
            layers: upload(&layers, "persistent layers", &mut bufs).map_err(state_err)?,
            instrs: upload(&plan.instrs, "persistent instructions", &mut bufs)
                .map_err(state_err)?,
            refs: upload::<KCounterRef>(&plan.refs, "persistent counter refs", &mut bufs)
                .map_err(state_err)?,
            stream_start: upload(&plan.stream_start, "persistent streams", &mut bufs)
                .map_err(state_err)?,
            counters: upload(&counters, "counters", &mut bufs).map_err(state_err)?,
            epoch: upload(&[0u32], "epoch", &mut bufs).map_err(state_err)?,
            exited: upload(&[0u32], "exited", &mut bufs).map_err(state_err)?,
            stall: upload(&[0u64; 6], "stall record", &mut bufs).map_err(state_err)?,
            watchdog_ns: WAIT_LIMIT_NS,
        };
        let g = &schedule.graph;
        let labels = plan
            .instrs
            .iter()
            .map(|i| {
                let op = g
                    .ops
                    .iter()
                    .find(|o| {
                        crate::abi::op_id(o.kind) == i.op
                            && o.layer.is_none_or(|l| l as i32 == i.layer)
                    })
                    .map_or_else(|| format!("op {}", i.op), |o| o.label());
                format!("{op} tasks {}..{}", i.first, i.first + i.count)
            })
            .collect();
        let mut km = self.km;
        let mut globals = self.globals;
        let mut kp_arg = kp;
        let mut args: Vec<*mut c_void> = vec![arg(&mut km), arg(&mut globals), arg(&mut kp_arg)];
        let what = "persistent";
        // SAFETY: the stream belongs to this runner and is idle.
        check(
            unsafe {
                result::stream::begin_capture(
                    self.stream,
                    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                )
            },
            "cuStreamBeginCapture",
            what,
        )
        .map_err(state_err)?;
        // SAFETY: the arguments match k_persistent(Model, Globals, Persistent) and outlive the
        // call; every pointer inside them is a live device allocation.
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
        // SAFETY: capture was begun above on this stream.
        let graph = check(
            unsafe { result::stream::end_capture(self.stream) },
            "cuStreamEndCapture",
            what,
        )
        .map_err(state_err)?;
        check(launched, "cuLaunchKernel", "k_persistent").map_err(state_err)?;
        // SAFETY: `graph` is a complete captured graph.
        let exec = check(
            unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) },
            "cuGraphInstantiate",
            what,
        )
        .map_err(state_err)?;
        Ok(StepGraph::new(
            exec,
            graph,
            Target::Persistent,
            Some(PersistentState {
                module,
                _bufs: bufs,
                stall: kp.stall,
                labels,
            }),
        ))
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
        let label = state.labels.get(i).cloned().unwrap_or_default();
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
