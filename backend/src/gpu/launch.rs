//! Launching grids and capturing them into one CUDA graph per decode step.

use std::ffi::c_void;

use cudarc::driver::{result, sys};
use mkc_ir::OpKind;
use mkc_scheduler::schedule::Trigger;
use mkc_scheduler::{Schedule, Target};

use super::device::stalled;
use super::{OpFn, Runner};
use crate::abi::Param;
use crate::error::{check, BackendError};
use crate::kernels::{self, GridOps};

/// An instantiated CUDA graph of one decode step.
pub struct StepGraph {
    pub(super) exec: sys::CUgraphExec,
    graph: sys::CUgraph,
    /// Target it runs.
    pub target: Target,
}

impl Drop for StepGraph {
    fn drop(&mut self) {
        if stalled() {
            return;
        }
        // SAFETY: created by `capture`, destroyed once.
        unsafe {
            result::graph::exec_destroy(self.exec).ok();
            result::graph::destroy(self.graph).ok();
        }
    }
}

/// A kernel argument as `cuLaunchKernel` takes it: the address of its value, which must outlive
/// the launch call.
pub(super) fn arg<T>(value: &mut T) -> *mut c_void {
    value as *mut T as *mut c_void
}

/// The kernel among `funcs` that runs a grid of `ops`; the error names a pair no kernel fuses.
pub(super) fn op_fn(funcs: &[OpFn], ops: GridOps) -> Result<OpFn, BackendError> {
    funcs
        .iter()
        .find(|(k, _, _)| *k == ops)
        .copied()
        .ok_or_else(|| {
            BackendError::Unsupported(format!(
                "no kernel runs {} and {} in one grid; compile with --grids per-op",
                ops.0.name(),
                ops.1.map_or("nothing", |k| k.name())
            ))
        })
}

/// One grid launch: which kernel, on which layer's buffers, how, and where it traces.
#[derive(Clone, Copy, Debug)]
pub(super) struct GridLaunch {
    /// The kernel, its kind and dynamic shared memory.
    pub(super) f: OpFn,
    pub(super) layer: usize,
    pub(super) ctas: u32,
    /// Carries the programmatic-serialization attribute.
    pub(super) pdl_attribute: bool,
    /// Calls griddepcontrol.wait.
    pub(super) waits: bool,
    /// Triggers its successor right after issuing its loads.
    pub(super) early: bool,
    /// Device address of the grid's CTA trace buffer, 0 for none.
    pub(super) trace: u64,
}

impl Runner {
    pub(super) fn sync(&self, what: &str) -> Result<(), BackendError> {
        // SAFETY: the stream belongs to this runner.
        check(
            unsafe { result::stream::synchronize(self.stream) },
            "cuStreamSynchronize",
            what,
        )
    }

    /// Writes the position the next step's kernels run at (stream-ordered before the step).
    pub(super) fn set_position(&self, pos: u32) -> Result<(), BackendError> {
        // SAFETY: `pos` is a live device buffer of one u32 on this runner's stream.
        check(
            unsafe { sys::cuMemsetD32Async(self.globals.pos, pos, 1, self.stream).result() },
            "cuMemsetD32Async",
            "pos",
        )
    }

    /// Launches one grid of a chain on the runner's stream (captured when a capture is open).
    fn launch(&self, grid: &GridLaunch) -> Result<(), BackendError> {
        let GridLaunch {
            f: (ops, f, smem),
            layer,
            ctas,
            pdl_attribute,
            waits,
            early,
            trace,
        } = *grid;
        let ctas = self.grid_ctas(ops, ctas);
        let mut km = self.km;
        let mut globals = self.globals;
        let last = self.layers.len() - 1;
        let mut l = self.layers[layer.min(last)];
        // A fused grid's second operator may belong to the next layer (down + QKV).
        let mut next = self.layers[(layer + 1).min(last)];
        let mut pdl: i32 = waits as i32;
        let mut early: i32 = early as i32;
        let mut trace = trace;
        // A fused grid's barrier counter: two per layer, the O-projection's grid then down's.
        let counter = 2 * layer + usize::from(ops.0 != OpKind::OProj);
        let mut barrier = self.barriers + counter as u64 * 8;
        // The arguments in the kernels' own parameter order (generated from the same list).
        let mut args: Vec<*mut c_void> = Vec::new();
        for p in crate::abi::params(ops.1.is_some()) {
            args.push(match p {
                Param::Model => arg(&mut km),
                Param::Globals => arg(&mut globals),
                Param::Layer => arg(&mut l),
                Param::NextLayer => arg(&mut next),
                Param::Pdl => arg(&mut pdl),
                Param::Early => arg(&mut early),
                Param::Trace => arg(&mut trace),
                Param::Barrier => arg(&mut barrier),
            });
        }
        // SAFETY: zero is a valid bit pattern for the attribute union.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: ctas,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: kernels::grid_threads(&self.model.tuning, ops),
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: smem,
            hStream: self.stream,
            attrs: if pdl_attribute {
                &mut attr
            } else {
                std::ptr::null_mut()
            },
            numAttrs: pdl_attribute as u32,
        };
        // SAFETY: the arguments match the kernels' (Model, Globals, Layer, [Layer,] int, int,
        // u64*, [u64*]) signatures and outlive the call; every pointer inside them is a live
        // device allocation.
        let r =
            unsafe { sys::cuLaunchKernelEx(&config, f, args.as_mut_ptr(), std::ptr::null_mut()) };
        check(
            r.result(),
            "cuLaunchKernelEx",
            kernels::grid_entry_point(ops).unwrap_or("kernel"),
        )
    }

    /// Captures one decode step of a chain schedule (`graph` or `pdl`) into a CUDA graph.
    pub fn capture(&self, schedule: &Schedule) -> Result<StepGraph, BackendError> {
        self.capture_with(schedule, &self.funcs, |_| 0)
    }

    /// Captures with the kernels `funcs` and `trace(i)` as grid i's CTA trace buffer (0: none).
    pub(super) fn capture_with(
        &self,
        schedule: &Schedule,
        funcs: &[OpFn],
        trace: impl Fn(usize) -> u64,
    ) -> Result<StepGraph, BackendError> {
        let plan = schedule.chain().ok_or_else(|| {
            BackendError::Unsupported(
                "the CUDA backend runs the graph and pdl targets; the persistent megakernel is \
                 not implemented yet"
                    .into(),
            )
        })?;
        let g = &schedule.graph;
        let mut grids = Vec::with_capacity(plan.kernels.len());
        for (i, k) in plan.kernels.iter().enumerate() {
            let op = g.op(k.op);
            let ops = (op.kind, k.then.map(|t| g.op(t).kind));
            if ops == kernels::FOLDED {
                kernels::fold_layout(&self.model, self._gpu.sms as u32)?;
            }
            grids.push(GridLaunch {
                f: op_fn(funcs, ops)?,
                layer: op.layer.unwrap_or(0) as usize,
                ctas: k.ctas,
                pdl_attribute: k.pdl_attribute,
                waits: k.wait.is_some(),
                early: k.trigger == Some(Trigger::Early),
                trace: trace(i),
            });
        }
        self.capture_grids(schedule.target, schedule.target.name(), grids.into_iter())
    }

    /// Captures `grids`, launched in order on the runner's stream, into an instantiated graph.
    pub(super) fn capture_grids(
        &self,
        target: Target,
        what: &str,
        grids: impl Iterator<Item = GridLaunch>,
    ) -> Result<StepGraph, BackendError> {
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
        )?;
        let mut launched = Ok(());
        for grid in grids {
            if let Err(e) = self.launch(&grid) {
                launched = Err(e);
                break;
            }
        }
        // SAFETY: capture was begun above on this stream (and is ended even if a launch failed).
        let graph = check(
            unsafe { result::stream::end_capture(self.stream) },
            "cuStreamEndCapture",
            what,
        )?;
        launched?;
        // SAFETY: `graph` is a complete captured graph.
        let exec = check(
            unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) },
            "cuGraphInstantiate",
            what,
        )?;
        Ok(StepGraph {
            exec,
            graph,
            target,
        })
    }
}
