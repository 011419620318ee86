//! Tracing one decode step: every CTA's phase marks, SM and entry/exit times, from a separately
//! compiled build (`-DMKC_TRACE`).

use cudarc::driver::{result, sys};
use mkc_ir::OpKind;
use mkc_scheduler::Schedule;

use super::launch::StepGraph;
use super::setup::load_operators;
use super::Runner;
use crate::error::{check, BackendError};
use crate::kernels;
use crate::timeline::TracedWork;

pub use crate::abi::TRACE_SLOTS;

/// One grid's CTA phase marks.
#[derive(Clone, Debug)]
pub struct GridTrace {
    /// Operator kind.
    pub kind: OpKind,
    /// Layer (None for the LM head).
    pub layer: Option<u32>,
    /// Per CTA: the TRACE_SLOTS marks.
    pub ctas: Vec<[u64; TRACE_SLOTS]>,
}

impl Runner {
    /// Runs one decode step at position `pos` with every CTA tracing its phases
    /// (`mkc bench --cta-phases`). The model state must be valid at `pos` (run the workload
    /// first); re-running a position rewrites the same values.
    pub fn trace_step(
        &mut self,
        schedule: &Schedule,
        pos: u32,
    ) -> Result<Vec<GridTrace>, BackendError> {
        let plan = schedule.chain().ok_or_else(|| {
            BackendError::Unsupported("only chain schedules can be traced".into())
        })?;
        let slots = TRACE_SLOTS;
        let mut offsets = Vec::with_capacity(plan.kernels.len());
        let mut total = 0usize;
        let g = &schedule.graph;
        let ctas: Vec<u32> = plan.kernels.iter().map(|k| k.ctas).collect();
        for &c in &ctas {
            offsets.push(total);
            total += c as usize * slots;
        }
        let buf = self.trace_buffer(total, "CTA trace")?;
        if self.traced.is_none() {
            let compiled = kernels::compile_traced("sm_90a", &self.model)?;
            self.traced = Some(load_operators(&compiled.cubin, &self.model)?);
        }
        let funcs = self
            .traced
            .as_ref()
            .map(|t| t.1.clone())
            .unwrap_or_default();
        let graph = self.capture_with(schedule, &funcs, |i| buf + offsets[i] as u64 * 8)?;
        let host = self.replay_traced(&graph, pos, buf, total, "CTA trace")?;
        Ok(plan
            .kernels
            .iter()
            .zip(&offsets)
            .zip(&ctas)
            .map(|((k, &off), &n)| {
                let op = g.op(k.op);
                GridTrace {
                    kind: op.kind,
                    layer: op.layer,
                    ctas: (0..n as usize)
                        .map(|c| {
                            let mut a = [0u64; TRACE_SLOTS];
                            a.copy_from_slice(&host[off + c * slots..off + (c + 1) * slots]);
                            a
                        })
                        .collect(),
                }
            })
            .collect())
    }

    /// SM clock rate in kHz (for converting clock64 phase marks).
    pub fn clock_khz(&self) -> Result<u32, BackendError> {
        // SAFETY: valid device and attribute.
        check(
            unsafe {
                result::device::get_attribute(
                    self._gpu.dev,
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
                )
            },
            "cuDeviceGetAttribute",
            "clock rate",
        )
        .map(|v| v as u32)
    }
}

impl Runner {
    /// Traces one decode step of `schedule` at position `pos`, any target: every chain grid's
    /// CTA or every persistent instruction as a [`TracedWork`], for
    /// [`crate::timeline::spans`]. The model state must be valid at `pos`.
    pub fn trace_work(
        &mut self,
        schedule: &Schedule,
        pos: u32,
    ) -> Result<Vec<TracedWork>, BackendError> {
        if schedule.chain().is_none() {
            return self.trace_persistent(schedule, pos);
        }
        let grids = self.trace_step(schedule, pos)?;
        let plan = schedule.chain().expect("checked above");
        let g = &schedule.graph;
        let mut out = Vec::new();
        for (k, grid) in plan.kernels.iter().zip(&grids) {
            let op = g.op(k.op);
            let tasks = g.tasks_of(k.op).count() as u32;
            let n = grid.ctas.len() as u32;
            for (c, record) in grid.ctas.iter().enumerate() {
                let (first, count) = mkc_catalogue::cta_tasks(tasks, n, c as u32);
                out.push(TracedWork {
                    label: op.label(),
                    kind: op.kind,
                    tasks: (first, first + count),
                    record: *record,
                });
            }
        }
        Ok(out)
    }
}

impl Runner {
    /// A zeroed device buffer of `len` u64 for a traced step's records.
    pub(super) fn trace_buffer(&mut self, len: usize, what: &str) -> Result<u64, BackendError> {
        let bytes = (len * 8).max(8);
        let buf = self.alloc(bytes, what)?;
        super::device::fill_bytes(buf, 0, bytes, what)?;
        Ok(buf)
    }

    /// Replays the traced step `graph` once at position `pos` and reads back the `len` u64
    /// it recorded in `buf`; a persistent step that stalled is an error naming the wait.
    pub(super) fn replay_traced(
        &self,
        graph: &StepGraph,
        pos: u32,
        buf: u64,
        len: usize,
        what: &str,
    ) -> Result<Vec<u64>, BackendError> {
        self.set_position(pos)?;
        // SAFETY: a live graph on this runner's stream.
        check(
            unsafe { result::graph::launch(graph.exec, self.stream) },
            "cuGraphLaunch",
            what,
        )?;
        self.sync(what)?;
        self.check_stall(graph, pos)?;
        let mut host = vec![0u64; len];
        // SAFETY: `buf` holds at least `len` u64; the stream is idle.
        check(
            unsafe { result::memcpy_dtoh_sync(&mut host, buf) },
            "cuMemcpyDtoH",
            what,
        )?;
        Ok(host)
    }
}
