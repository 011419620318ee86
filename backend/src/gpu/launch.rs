//! Launching grids and capturing them into one CUDA graph per decode step.

use std::ffi::c_void;

use cudarc::driver::{result, sys};
use mkc_ir::OpKind;
use mkc_scheduler::{Schedule, Target};

use super::device::stalled;
use super::{OpFn, Runner};
use crate::abi::Param;
use crate::error::{check, BackendError};

/// An instantiated CUDA graph of one decode step.
pub struct StepGraph {
    pub(super) exec: sys::CUgraphExec,
    graph: sys::CUgraph,
    /// Target it runs.
    pub target: Target,
    /// What the graph's kernels read that the runner does not own (the persistent plan, its
    /// counters and module), freed after the graph.
    pub(super) owned: Option<super::persistent::PersistentState>,
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
        drop(self.owned.take());
    }
}

/// A kernel argument as `cuLaunchKernel` takes it: the address of its value, which must outlive
/// the launch call.
pub(super) fn arg<T>(value: &mut T) -> *mut c_void {
    value as *mut T as *mut c_void
}

/// The kernel among `funcs` of operator `kind`.
pub(super) fn op_fn(funcs: &[OpFn], kind: OpKind) -> Result<OpFn, BackendError> {
    funcs
        .iter()
        .find(|(k, _)| *k == kind)
        .copied()
        .ok_or_else(|| BackendError::Unsupported(format!("no kernel runs {}", kind.name())))
}

/// One grid launch: which kernel, on which layer's buffers, how, and where it traces.
#[derive(Clone, Copy, Debug)]
pub(super) struct GridLaunch {
    /// The kernel and its kind.
    pub(super) f: OpFn,
    /// The plan's launch shape.
    pub(super) shape: crate::launch_plan::LaunchShape,
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

    /// Launches one grid of a chain on the runner's stream (captured when a capture is open),
    /// exactly as its plan says.
    pub(super) fn launch(&self, grid: &GridLaunch) -> Result<(), BackendError> {
        let GridLaunch {
            f: (_, f),
            shape,
            trace,
        } = *grid;
        let mut km = self.km;
        let mut globals = self.globals;
        let last = self.layers.len() - 1;
        let mut l = self.layers[(shape.layer as usize).min(last)];
        let mut pdl: i32 = shape.waits as i32;
        let mut early: i32 = shape.early as i32;
        let mut trace = trace;
        // The arguments in the kernels' own parameter order (generated from the same list).
        let mut args: Vec<*mut c_void> = Vec::new();
        for p in crate::abi::OP_PARAMS {
            args.push(match p {
                Param::Model => arg(&mut km),
                Param::Globals => arg(&mut globals),
                Param::Layer => arg(&mut l),
                Param::Pdl => arg(&mut pdl),
                Param::Early => arg(&mut early),
                Param::Trace => arg(&mut trace),
            });
        }
        // SAFETY: zero is a valid bit pattern for the attribute union.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: shape.ctas,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: shape.threads,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: shape.dynamic_smem,
            hStream: self.stream,
            attrs: if shape.pdl_attribute {
                &mut attr
            } else {
                std::ptr::null_mut()
            },
            numAttrs: shape.pdl_attribute as u32,
        };
        // SAFETY: the arguments match the kernels' OP_PARAMS signature and outlive the call;
        // every pointer inside them is a live device allocation.
        let r =
            unsafe { sys::cuLaunchKernelEx(&config, f, args.as_mut_ptr(), std::ptr::null_mut()) };
        check(r.result(), "cuLaunchKernelEx", shape.entry)
    }

    /// Captures one decode step of a chain schedule (`graph` or `pdl`) into a CUDA graph.
    pub fn capture(&self, schedule: &Schedule) -> Result<StepGraph, BackendError> {
        if schedule.target == Target::Persistent {
            return self.capture_persistent(schedule);
        }
        self.capture_with(schedule, &self.funcs, |_| 0)
    }

    /// Captures with the kernels `funcs` and `trace(i)` as grid i's CTA trace buffer (0: none).
    pub(super) fn capture_with(
        &self,
        schedule: &Schedule,
        funcs: &[OpFn],
        trace: impl Fn(usize) -> u64,
    ) -> Result<StepGraph, BackendError> {
        let shapes = crate::launch_plan::launch_plan(schedule, &self.model)?;
        let mut grids = Vec::with_capacity(shapes.len());
        for (i, shape) in shapes.into_iter().enumerate() {
            grids.push(GridLaunch {
                f: op_fn(funcs, shape.kind)?,
                shape,
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
        self.capture_launches(target, what, None, || {
            for grid in grids {
                self.launch(&grid)?;
            }
            Ok(())
        })
    }

    /// Captures what `enqueue` launches on the runner's stream into an instantiated graph of
    /// `target` that owns `owned` (dropped with it, or at once if the capture fails).
    pub(super) fn capture_launches(
        &self,
        target: Target,
        what: &str,
        owned: Option<super::persistent::PersistentState>,
        enqueue: impl FnOnce() -> Result<(), BackendError>,
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
        let launched = enqueue();
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
            owned,
        })
    }
}
