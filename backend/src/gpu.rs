//! The GPU runner: one context, the compiled module, device buffers for weights, activations,
//! split-K partial sums and the KV cache, and one CUDA graph per target built from a chain
//! schedule.
//!
//! Every driver call is checked and named. Each decode step is one graph launch preceded by a
//! memset of the position (no kernel resets anything: partial sums are overwritten each step,
//! argmax slots are one per position). A watchdog polls each step's completion event.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys};
use mkc_ir::{Model, OpKind};
use mkc_scheduler::schedule::Trigger;
use mkc_scheduler::{Schedule, Target};

use crate::error::{check, BackendError};
use crate::kernels::{self, KernelInfo};
use crate::weights::{layout, Fill, HostWeights, PER_LAYER};

/// An open GPU: the primary context of device 0.
pub struct Gpu {
    /// Device name.
    pub name: String,
    /// Compute capability.
    pub cc: (i32, i32),
    /// Multiprocessors.
    pub sms: i32,
    ctx: sys::CUcontext,
    dev: sys::CUdevice,
}

impl Gpu {
    /// Opens device 0, or says why there is none.
    pub fn open() -> Result<Gpu, BackendError> {
        // SAFETY: probing for the library has no preconditions.
        if !unsafe { sys::is_culib_present() } {
            return Err(BackendError::NoDevice(
                "no CUDA driver found (libcuda.so.1 is not installed)".into(),
            ));
        }
        result::init().map_err(|e| BackendError::NoDevice(format!("cuInit failed: {e:?}")))?;
        let count =
            result::device::get_count().map_err(|e| BackendError::NoDevice(format!("{e:?}")))?;
        if count == 0 {
            return Err(BackendError::NoDevice("the driver reports no GPU".into()));
        }
        let dev = check(result::device::get(0), "cuDeviceGet", "device 0")?;
        // SAFETY: `dev` is a valid device; the context is released in Drop.
        let ctx = check(
            unsafe { result::primary_ctx::retain(dev) },
            "cuDevicePrimaryCtxRetain",
            "device 0",
        )?;
        // SAFETY: `ctx` was just retained.
        check(
            unsafe { result::ctx::set_current(ctx) },
            "cuCtxSetCurrent",
            "device 0",
        )?;
        let attr = |a| {
            // SAFETY: valid device and attribute.
            check(
                unsafe { result::device::get_attribute(dev, a) },
                "cuDeviceGetAttribute",
                "device 0",
            )
        };
        let cc = (
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let sms = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let name = check(result::device::get_name(dev), "cuDeviceGetName", "device 0")?;
        Ok(Gpu {
            name,
            cc,
            sms,
            ctx,
            dev,
        })
    }
}

/// Set when the watchdog fired: a kernel may still be spinning, so no drop may synchronise,
/// free or destroy anything (each would block behind it); the process exit reclaims the GPU.
static STALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn stalled() -> bool {
    STALLED.load(std::sync::atomic::Ordering::SeqCst)
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if stalled() {
            return;
        }
        let _ = self.ctx;
        // SAFETY: retained in `open`.
        unsafe { result::primary_ctx::release(self.dev) }.ok();
    }
}

/// A device allocation, freed on drop.
struct DevBuf {
    ptr: sys::CUdeviceptr,
}

impl DevBuf {
    fn new(bytes: usize, what: &str) -> Result<DevBuf, BackendError> {
        // SAFETY: a plain allocation in the current context.
        let ptr = check(
            unsafe { result::malloc_sync(bytes.max(16)) },
            "cuMemAlloc",
            what,
        )?;
        // Poison: every buffer starts as 0xFF bytes (NaN floats), never zero.
        // SAFETY: `ptr` holds `bytes` bytes.
        check(
            unsafe { result::memset_d8_sync(ptr, 0xFF, bytes.max(16)) },
            "cuMemsetD8",
            what,
        )?;
        // The memset runs on the legacy stream; finish it before any other stream writes here.
        check(result::ctx::synchronize(), "cuCtxSynchronize", what)?;
        Ok(DevBuf { ptr })
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if stalled() {
            return;
        }
        // SAFETY: allocated by `new`, freed once.
        unsafe { result::free_sync(self.ptr) }.ok();
    }
}

/// The kernels' `Model` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct KModel {
    hidden: i32,
    inter: i32,
    q_dim: i32,
    kv_dim: i32,
    heads: i32,
    kv_heads: i32,
    head_dim: i32,
    vocab: i32,
    layers: i32,
    attn_split: i32,
    s_attn: i32,
    s_down: i32,
    max_seq: i32,
    eps: f32,
    log2_theta: f32,
    /// Ring slots per consumer warp per operator kind, in `ENTRY_POINTS` order.
    ring: [i32; 6],
}

/// The kernels' `Globals` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct KGlobals {
    embed: u64,
    lm_head: u64,
    final_norm: u64,
    tokens: u64,
    pos: u64,
    logits: u64,
    final_mid: u64,
    final_part: u64,
}

/// The kernels' `Layer` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct KLayer {
    w_qkv: u64,
    w_o: u64,
    w_gate: u64,
    w_up: u64,
    w_down: u64,
    norm1: u64,
    norm2: u64,
    k_cache: u64,
    v_cache: u64,
    prev_mid: u64,
    prev_part: u64,
    x_in: u64,
    qkv: u64,
    attn: u64,
    o_part: u64,
    x_mid: u64,
    h: u64,
    d_part: u64,
}

/// Where weights come from.
pub enum WeightSource<'a> {
    /// Generated on the GPU from a seed (the CPU reproduces them with [`crate::weights::generate`]).
    Random(u32),
    /// Uploaded from host memory (a checkpoint).
    Host(&'a HostWeights),
}

/// An instantiated CUDA graph of one decode step.
pub struct StepGraph {
    exec: sys::CUgraphExec,
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

/// Slots per CTA in a phase trace (the kernels' `TRACE_SLOTS`): clock64 at entry, loads issued,
/// wait released, vector prepared, weights landed, computed, exit (0-6); the SM (7);
/// globaltimer at entry and exit (8, 9); clock64 at two marks inside a phase (10, 11: partial
/// sums landed and normalised; attention's scores and softmax done). A mark a kernel does not
/// record is 0.
pub const TRACE_SLOTS: usize = 12;

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

/// What one run of the workload produced.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// Generated tokens (the first comes from the last prefill step).
    pub tokens: Vec<u32>,
    /// Every token the model saw: prompt then generated.
    pub sequence: Vec<u32>,
    /// Time of each decode step, µs.
    pub step_us: Vec<f64>,
    /// Logits of the requested positions: (position, logits).
    pub logits: Vec<(u32, Vec<f32>)>,
}

/// Options of a run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Positions whose logits are copied back (after poisoning the buffer).
    pub capture_logits: Vec<u32>,
    /// Longest a step may take before the watchdog stops the run.
    pub watchdog: Duration,
}

/// The operator kernel of `kind` among `funcs`.
fn op_fn(funcs: &[OpFn], kind: OpKind) -> OpFn {
    *funcs
        .iter()
        .find(|(k, _, _)| *k == kind)
        .expect("a kernel per operator kind")
}

/// One grid launch: which kernel, on which layer's buffers, how, and where it traces.
#[derive(Clone, Copy, Debug)]
struct GridLaunch {
    /// The kernel, its kind and dynamic shared memory.
    f: OpFn,
    layer: usize,
    ctas: u32,
    /// Carries the programmatic-serialization attribute.
    pdl_attribute: bool,
    /// Calls griddepcontrol.wait.
    waits: bool,
    /// Triggers its successor right after issuing its loads.
    early: bool,
    /// Device address of the grid's CTA trace buffer, 0 for none.
    trace: u64,
}

/// A start/end pair of timing events, destroyed on drop.
struct EventPair {
    start: sys::CUevent,
    end: sys::CUevent,
}

impl EventPair {
    fn new(what: &str) -> Result<EventPair, BackendError> {
        let make = || {
            check(
                result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT),
                "cuEventCreate",
                what,
            )
        };
        Ok(EventPair {
            start: make()?,
            end: make()?,
        })
    }

    /// Milliseconds between the two (both must have completed).
    fn elapsed_ms(&self, what: &str) -> Result<f64, BackendError> {
        // SAFETY: both events were recorded and have completed.
        check(
            unsafe { result::event::elapsed(self.start, self.end) },
            "cuEventElapsedTime",
            what,
        )
        .map(f64::from)
    }
}

impl Drop for EventPair {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe {
            result::event::destroy(self.start).ok();
            result::event::destroy(self.end).ok();
        }
    }
}

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
    read_bw: sys::CUfunction,
    /// Kernel figures from the compiler, with this model's dynamic shared memory.
    pub kernel_info: Vec<KernelInfo>,
    bufs: Vec<DevBuf>,
    _gpu: Gpu,
}

/// Loads a cubin and prepares every operator kernel (dynamic shared memory opted in).
fn load_operators(cubin: &[u8], model: &Model) -> Result<(sys::CUmodule, Vec<OpFn>), BackendError> {
    let module = load_module(cubin)?;
    let mut funcs = Vec::new();
    for &(name, kind) in kernels::ENTRY_POINTS {
        let f = func(module, name)?;
        let smem = kernels::dynamic_smem(model, kind);
        // SAFETY: valid function and attribute.
        check(
            unsafe {
                result::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
            },
            "cuFuncSetAttribute",
            name,
        )?;
        // Prefer the largest shared-memory carveout: with the default preference the driver's
        // choice can keep a successor CTA off an SM that has room for it (gpu.md).
        // SAFETY: valid function and attribute.
        check(
            unsafe {
                result::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                    100,
                )
            },
            "cuFuncSetAttribute",
            name,
        )?;
        funcs.push((kind, f, smem));
    }
    Ok((module, funcs))
}

/// Loads a cubin produced by [`kernels::compile`] into the current context.
fn load_module(cubin: &[u8]) -> Result<sys::CUmodule, BackendError> {
    // SAFETY: the cubin is a complete image produced by NVRTC for this architecture.
    check(
        unsafe { result::module::load_data(cubin.as_ptr() as *const c_void) },
        "cuModuleLoadData",
        "mkc.cu",
    )
}

/// An operator kernel: its kind, function and dynamic shared memory.
type OpFn = (OpKind, sys::CUfunction, u32);

fn func(module: sys::CUmodule, name: &str) -> Result<sys::CUfunction, BackendError> {
    let c = std::ffi::CString::new(name).expect("no NUL");
    // SAFETY: `module` is loaded; the name is NUL-terminated.
    check(
        unsafe { result::module::get_function(module, c) },
        "cuModuleGetFunction",
        name,
    )
}

impl Runner {
    /// Compiles the kernels, allocates every buffer and fills the weights.
    pub fn new(gpu: Gpu, model: &Model, weights: WeightSource<'_>) -> Result<Runner, BackendError> {
        if gpu.cc != (9, 0) {
            return Err(BackendError::Unsupported(format!(
                "the CUDA backend targets sm_90a (H100/H200); {} is sm_{}{}",
                gpu.name, gpu.cc.0, gpu.cc.1
            )));
        }
        kernels::check_model(model)?;
        let compiled = kernels::compile("sm_90a")?;
        let kernel_info = kernels::with_model(compiled.kernels.clone(), model);
        let (module, funcs) = load_operators(&compiled.cubin, model)?;
        let read_bw = func(module, "k_read_bw")?;
        let stream = check(
            result::stream::create(result::stream::StreamKind::NonBlocking),
            "cuStreamCreate",
            "runner stream",
        )?;
        let g = &model.geometry;
        let l = &model.lowering;
        let km = KModel {
            hidden: g.hidden as i32,
            inter: g.intermediate as i32,
            q_dim: model.q_dim() as i32,
            kv_dim: model.kv_dim() as i32,
            heads: g.heads as i32,
            kv_heads: g.kv_heads as i32,
            head_dim: g.head_dim as i32,
            vocab: g.vocab as i32,
            layers: g.layers as i32,
            attn_split: l.attention_split as i32,
            s_attn: l.vtp_shards.attention_o_proj as i32,
            s_down: l.vtp_shards.up_gate_down as i32,
            max_seq: model.workload.max_seq_len as i32,
            eps: g.norm_eps as f32,
            log2_theta: (g.rope_theta as f32).log2(),
            ring: std::array::from_fn(|i| {
                let kind = kernels::ENTRY_POINTS[i].1;
                kernels::stream(model, kind).map_or(0, |s| s.slots_per_warp() as i32)
            }),
        };
        let mut runner = Runner {
            model: model.clone(),
            km,
            globals: KGlobals::default(),
            layers: Vec::new(),
            stream,
            module,
            funcs,
            traced: None,
            read_bw,
            kernel_info,
            bufs: Vec::new(),
            _gpu: gpu,
        };
        runner.allocate(weights)?;
        Ok(runner)
    }

    /// CTAs launched for a grid of `kind` whose schedule has `tasks` tiles: the streaming
    /// kernels run one CTA per SM that walks a range of weight pages.
    pub fn grid_ctas(&self, kind: OpKind, tasks: u32) -> u32 {
        kernels::grid_ctas(&self.model, kind, tasks, self._gpu.sms as u32)
    }

    fn alloc(&mut self, bytes: usize, what: &str) -> Result<u64, BackendError> {
        let b = DevBuf::new(bytes, what)?;
        let p = b.ptr;
        self.bufs.push(b);
        Ok(p)
    }

    fn allocate(&mut self, weights: WeightSource<'_>) -> Result<(), BackendError> {
        let m = self.model.clone();
        let g = &m.geometry;
        let specs = layout(&m);
        let mut ptrs = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            let p = self.alloc(s.len() as usize * 2, &s.name)?;
            match &weights {
                WeightSource::Random(seed) => self.fill(p, s, *seed)?,
                WeightSource::Host(w) => {
                    // SAFETY: `p` holds exactly this tensor's bytes.
                    check(
                        unsafe { result::memcpy_htod_sync(p, &w.tensors[i]) },
                        "cuMemcpyHtoD",
                        s.name.clone(),
                    )?;
                }
            }
            ptrs.push(p);
        }
        let (hidden, inter) = (g.hidden as usize, g.intermediate as usize);
        let qkv_rows = m.qkv_rows() as usize;
        let kv_bytes =
            g.kv_heads as usize * m.workload.max_seq_len as usize * g.head_dim as usize * 2;
        let s_attn = m.lowering.vtp_shards.attention_o_proj as usize;
        let s_down = m.lowering.vtp_shards.up_gate_down as usize;
        // The residual stream leaving the previous layer: its x_mid plus its down partials.
        let (mut prev_mid, mut prev_part) = (0u64, 0u64);
        for l in 0..g.layers as usize {
            let w = |t: usize| ptrs[l * PER_LAYER + t];
            let layer = KLayer {
                w_qkv: w(0),
                w_o: w(1),
                w_gate: w(2),
                w_up: w(3),
                w_down: w(4),
                norm1: w(5),
                norm2: w(6),
                k_cache: self.alloc(kv_bytes, "k_cache")?,
                v_cache: self.alloc(kv_bytes, "v_cache")?,
                prev_mid,
                prev_part,
                x_in: self.alloc(hidden * 4, "x_in")?,
                qkv: self.alloc(qkv_rows * 4, "qkv")?,
                attn: self.alloc(m.q_dim() as usize * 4, "attn")?,
                o_part: self.alloc(s_attn * hidden * 4, "o_part")?,
                x_mid: self.alloc(hidden * 4, "x_mid")?,
                h: self.alloc(inter * 4, "h")?,
                d_part: self.alloc(s_down * hidden * 4, "d_part")?,
            };
            (prev_mid, prev_part) = (layer.x_mid, layer.d_part);
            self.layers.push(layer);
        }
        let base = g.layers as usize * PER_LAYER;
        let embed = ptrs[base];
        let lm_head = if g.tied_embeddings {
            embed
        } else {
            ptrs[base + 1]
        };
        self.globals = KGlobals {
            embed,
            lm_head,
            final_norm: *ptrs.last().expect("final norm"),
            tokens: self.alloc((m.workload.max_seq_len as usize + 1) * 8, "tokens")?,
            pos: self.alloc(4, "pos")?,
            logits: self.alloc(g.vocab as usize * 4, "logits")?,
            final_mid: prev_mid,
            final_part: prev_part,
        };
        self.sync("weights and buffers")
    }

    fn fill(
        &self,
        ptr: u64,
        spec: &crate::weights::TensorSpec,
        seed: u32,
    ) -> Result<(), BackendError> {
        let name = match spec.fill {
            Fill::Matrix { .. } => "k_fill_matrix",
            Fill::Norm => "k_fill_norm",
        };
        let f = func(self.module, name)?;
        let mut out = ptr;
        let mut n = spec.len();
        let mut seed = seed;
        let mut stream = spec.stream;
        let mut shift: i32 = match spec.fill {
            Fill::Matrix { shift } => shift,
            Fill::Norm => 0,
        };
        let mut args: Vec<*mut c_void> = vec![
            &mut out as *mut u64 as *mut c_void,
            &mut n as *mut u64 as *mut c_void,
            &mut seed as *mut u32 as *mut c_void,
            &mut stream as *mut u32 as *mut c_void,
        ];
        if matches!(spec.fill, Fill::Matrix { .. }) {
            args.push(&mut shift as *mut i32 as *mut c_void);
        }
        // SAFETY: the argument list matches the kernel's signature; `out` holds n bf16.
        check(
            unsafe {
                result::launch_kernel(f, (1024, 1, 1), (256, 1, 1), 0, self.stream, &mut args)
            },
            "cuLaunchKernel",
            name,
        )
    }

    fn sync(&self, what: &str) -> Result<(), BackendError> {
        // SAFETY: the stream belongs to this runner.
        check(
            unsafe { result::stream::synchronize(self.stream) },
            "cuStreamSynchronize",
            what,
        )
    }

    /// Writes the position the next step's kernels run at (stream-ordered before the step).
    fn set_position(&self, pos: u32) -> Result<(), BackendError> {
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
            f: (kind, f, smem),
            layer,
            ctas,
            pdl_attribute,
            waits,
            early,
            trace,
        } = *grid;
        let ctas = self.grid_ctas(kind, ctas);
        let mut km = self.km;
        let mut globals = self.globals;
        let mut l = self.layers[layer.min(self.layers.len() - 1)];
        let mut pdl: i32 = waits as i32;
        let mut early: i32 = early as i32;
        let mut trace = trace;
        let mut args: [*mut c_void; 6] = [
            &mut km as *mut KModel as *mut c_void,
            &mut globals as *mut KGlobals as *mut c_void,
            &mut l as *mut KLayer as *mut c_void,
            &mut pdl as *mut i32 as *mut c_void,
            &mut early as *mut i32 as *mut c_void,
            &mut trace as *mut u64 as *mut c_void,
        ];
        // SAFETY: zero is a valid bit pattern for the attribute union.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: ctas,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: kernels::threads(kind),
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
        // SAFETY: the arguments match the kernels' (Model, Globals, Layer, int, int) signature
        // and outlive the call; every pointer inside them is a live device allocation.
        let r =
            unsafe { sys::cuLaunchKernelEx(&config, f, args.as_mut_ptr(), std::ptr::null_mut()) };
        check(r.result(), "cuLaunchKernelEx", kernels::entry_point(kind))
    }

    /// Captures one decode step of a chain schedule (`graph` or `pdl`) into a CUDA graph.
    pub fn capture(&self, schedule: &Schedule) -> Result<StepGraph, BackendError> {
        self.capture_with(schedule, &self.funcs, |_| 0)
    }

    /// Captures with the kernels `funcs` and `trace(i)` as grid i's CTA trace buffer (0: none).
    fn capture_with(
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
        let grids = plan.kernels.iter().enumerate().map(|(i, k)| {
            let op = g.op(k.op);
            GridLaunch {
                f: op_fn(funcs, op.kind),
                layer: op.layer.unwrap_or(0) as usize,
                ctas: k.ctas,
                pdl_attribute: k.pdl_attribute,
                waits: k.wait.is_some(),
                early: k.trigger == Some(Trigger::Early),
                trace: trace(i),
            }
        });
        self.capture_grids(schedule.target, schedule.target.name(), grids)
    }

    /// Captures `grids`, launched in order on the runner's stream, into an instantiated graph.
    fn capture_grids(
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

    /// Runs the prompt then `generate` tokens with `graph`, timing each decode step.
    pub fn run(
        &self,
        graph: &StepGraph,
        prompt: &[u32],
        generate: u32,
        opts: &RunOptions,
    ) -> Result<RunOutput, BackendError> {
        let max = self.model.workload.max_seq_len as usize;
        let p_len = prompt.len();
        if p_len == 0 || p_len + generate as usize > max {
            return Err(BackendError::Unsupported(format!(
                "prompt ({p_len}) + tokens ({generate}) must be 1..={max} (workload.max_seq_len)"
            )));
        }
        if let Some(&bad) = prompt.iter().find(|&&t| t >= self.model.geometry.vocab) {
            return Err(BackendError::Unsupported(format!(
                "prompt token {bad} is outside the vocabulary ({})",
                self.model.geometry.vocab
            )));
        }
        // Forced tokens: the largest possible key, so the LM head's atomicMax keeps them.
        let mut tokens = vec![0u64; max + 1];
        for (i, &t) in prompt.iter().enumerate() {
            tokens[i] = (0xFFFF_FFFFu64 << 32) | (0xFFFF_FFFF - t) as u64;
        }
        // SAFETY: the tokens buffer holds max + 1 slots.
        check(
            unsafe { result::memcpy_htod_sync(self.globals.tokens, &tokens) },
            "cuMemcpyHtoD",
            "tokens",
        )?;
        let ev = EventPair::new("step")?;
        let mut step_us = Vec::new();
        let mut logits = Vec::new();
        let vocab = self.model.geometry.vocab as usize;
        let last = p_len as u32 + generate - 1;
        for pos in 0..last {
            let capture = opts.capture_logits.contains(&pos);
            self.set_position(pos)?;
            // SAFETY: `logits` is a live device buffer of the size written; the events and graph
            // belong to this runner and its stream.
            unsafe {
                if capture {
                    check(
                        result::memset_d8_async(self.globals.logits, 0xFF, vocab * 4, self.stream),
                        "cuMemsetD8Async",
                        "logits poison",
                    )?;
                }
                check(
                    result::event::record(ev.start, self.stream),
                    "cuEventRecord",
                    "step",
                )?;
                check(
                    result::graph::launch(graph.exec, self.stream),
                    "cuGraphLaunch",
                    graph.target.name(),
                )?;
                check(
                    result::event::record(ev.end, self.stream),
                    "cuEventRecord",
                    "step",
                )?;
            }
            self.watch(ev.end, graph.target, pos, opts.watchdog)?;
            if pos as usize >= p_len {
                step_us.push(ev.elapsed_ms("step")? * 1e3);
            }
            if capture {
                let mut host = vec![0f32; vocab];
                // SAFETY: the logits buffer holds vocab floats; the stream is idle.
                check(
                    unsafe { result::memcpy_dtoh_sync(&mut host, self.globals.logits) },
                    "cuMemcpyDtoH",
                    "logits",
                )?;
                logits.push((pos, host));
            }
        }
        // SAFETY: the tokens buffer holds max + 1 slots.
        check(
            unsafe { result::memcpy_dtoh_sync(&mut tokens, self.globals.tokens) },
            "cuMemcpyDtoH",
            "tokens",
        )?;
        let sequence: Vec<u32> = tokens[..=last as usize]
            .iter()
            .map(|&t| 0xFFFF_FFFF - (t & 0xFFFF_FFFF) as u32)
            .collect();
        Ok(RunOutput {
            tokens: sequence[p_len..].to_vec(),
            sequence,
            step_us,
            logits,
        })
    }

    /// Polls `event` until it completes or the watchdog fires.
    fn watch(
        &self,
        event: sys::CUevent,
        target: Target,
        pos: u32,
        limit: Duration,
    ) -> Result<(), BackendError> {
        let started = Instant::now();
        loop {
            // SAFETY: `event` is a live event.
            match unsafe { sys::cuEventQuery(event) } {
                sys::CUresult::CUDA_SUCCESS => return Ok(()),
                sys::CUresult::CUDA_ERROR_NOT_READY => {}
                e => {
                    return Err(BackendError::Cuda {
                        call: "cuEventQuery",
                        context: format!("{} step at position {pos}", target.name()),
                        error: format!("{e:?}"),
                    })
                }
            }
            if started.elapsed() > limit {
                STALLED.store(true, std::sync::atomic::Ordering::SeqCst);
                return Err(BackendError::Watchdog {
                    target: target.name().to_string(),
                    pos,
                    seconds: limit.as_secs_f64(),
                });
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// Times a graph of ordinary launches `(kind, layer, ctas)` replayed `reps` times (after
    /// one warm-up): median µs per replay. Used to time each operator alone.
    pub fn time_grids(
        &self,
        launches: &[(OpKind, usize, u32)],
        reps: usize,
    ) -> Result<f64, BackendError> {
        let grids = launches.iter().map(|&(kind, layer, ctas)| GridLaunch {
            f: op_fn(&self.funcs, kind),
            layer,
            ctas,
            pdl_attribute: false,
            waits: false,
            early: false,
            trace: 0,
        });
        let step = self.capture_grids(Target::Graph, "per-kernel timing", grids)?;
        self.median_ms(reps, "per-kernel", || {
            // SAFETY: the graph is live and instantiated for this stream.
            check(
                unsafe { result::graph::launch(step.exec, self.stream) },
                "cuGraphLaunch",
                "per-kernel",
            )
        })
        .map(|ms| ms * 1e3)
    }

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
        let ctas: Vec<u32> = plan
            .kernels
            .iter()
            .map(|k| self.grid_ctas(g.op(k.op).kind, k.ctas))
            .collect();
        for &c in &ctas {
            offsets.push(total);
            total += c as usize * slots;
        }
        let buf = self.alloc(total * 8, "CTA trace")?;
        // SAFETY: `buf` holds total u64.
        check(
            unsafe { result::memset_d8_sync(buf, 0, total * 8) },
            "cuMemsetD8",
            "CTA trace",
        )?;
        if self.traced.is_none() {
            let compiled = kernels::compile_traced("sm_90a")?;
            self.traced = Some(load_operators(&compiled.cubin, &self.model)?);
        }
        let funcs = self
            .traced
            .as_ref()
            .map(|t| t.1.clone())
            .unwrap_or_default();
        let graph = self.capture_with(schedule, &funcs, |i| buf + offsets[i] as u64 * 8)?;
        self.set_position(pos)?;
        // SAFETY: a live graph on this runner's stream.
        check(
            unsafe { result::graph::launch(graph.exec, self.stream) },
            "cuGraphLaunch",
            "traced step",
        )?;
        self.sync("traced step")?;
        let mut host = vec![0u64; total];
        // SAFETY: `buf` holds total u64; the stream is idle.
        check(
            unsafe { result::memcpy_dtoh_sync(&mut host, buf) },
            "cuMemcpyDtoH",
            "CTA trace",
        )?;
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

    /// Runs `enqueue` between two events `reps + 1` times (the first is a warm-up) and returns
    /// the median milliseconds; the watchdog guards each repetition.
    fn median_ms(
        &self,
        reps: usize,
        what: &str,
        mut enqueue: impl FnMut() -> Result<(), BackendError>,
    ) -> Result<f64, BackendError> {
        let ev = EventPair::new(what)?;
        let mut times = Vec::with_capacity(reps + 1);
        for _ in 0..reps + 1 {
            // SAFETY: live events on this runner's stream.
            check(
                unsafe { result::event::record(ev.start, self.stream) },
                "cuEventRecord",
                what,
            )?;
            enqueue()?;
            // SAFETY: as above.
            check(
                unsafe { result::event::record(ev.end, self.stream) },
                "cuEventRecord",
                what,
            )?;
            self.watch(ev.end, Target::Graph, 0, Duration::from_secs(10))?;
            times.push(ev.elapsed_ms(what)?);
        }
        times.remove(0);
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }

    /// Measures streaming read bandwidth in this process: `bytes` read, median of `reps`, GB/s.
    pub fn read_bandwidth(&mut self, bytes: usize, reps: usize) -> Result<f64, BackendError> {
        let buf = self.alloc(bytes, "read-bandwidth probe")?;
        let sink = self.alloc(4, "sink")?;
        let ms = self.median_ms(reps, "read-bandwidth probe", || {
            let mut p = buf;
            let mut n = (bytes / 16) as u64;
            let mut s = sink;
            let mut args: Vec<*mut c_void> = vec![
                &mut p as *mut u64 as *mut c_void,
                &mut n as *mut u64 as *mut c_void,
                &mut s as *mut u64 as *mut c_void,
            ];
            // SAFETY: the arguments match k_read_bw; the buffers are live.
            check(
                unsafe {
                    result::launch_kernel(
                        self.read_bw,
                        (132 * 16, 1, 1),
                        (256, 1, 1),
                        0,
                        self.stream,
                        &mut args,
                    )
                },
                "cuLaunchKernel",
                "k_read_bw",
            )
        })?;
        Ok(bytes as f64 / (ms * 1e-3) / 1e9)
    }
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
        }
    }
}

/// Registers, static shared memory and local (spill/stack) bytes of every kernel as the driver
/// reports them after loading `cubin` on `gpu`: the authoritative figures, used when the
/// compiler log carries none.
pub fn loaded_kernel_info(gpu: &Gpu, cubin: &[u8]) -> Result<Vec<KernelInfo>, BackendError> {
    let _ = gpu;
    let module = load_module(cubin)?;
    let mut out = Vec::new();
    let names = kernels::ENTRY_POINTS.iter().map(|(n, _)| *n).chain([
        "k_read_bw",
        "k_fill_matrix",
        "k_fill_norm",
    ]);
    for name in names {
        let f = func(module, name)?;
        let attr = |a| {
            // SAFETY: valid function and attribute.
            check(
                unsafe { result::function::get_function_attribute(f, a) },
                "cuFuncGetAttribute",
                name,
            )
        };
        use sys::CUfunction_attribute as A;
        let local = attr(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)? as u32;
        out.push(KernelInfo {
            name: name.to_string(),
            threads: kernels::threads_of(name),
            registers: attr(A::CU_FUNC_ATTRIBUTE_NUM_REGS)? as u32,
            static_smem: attr(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as u32,
            dynamic_smem: 0,
            stack_bytes: local,
            spill_store_bytes: 0,
            spill_load_bytes: 0,
            code_hash: 0,
        });
    }
    // SAFETY: loaded above, unloaded once.
    unsafe { result::module::unload(module) }.ok();
    let hashes = kernels::text_hashes(cubin);
    for k in &mut out {
        if let Some((_, h)) = hashes.iter().find(|(n, _)| *n == k.name) {
            k.code_hash = *h;
        }
    }
    Ok(out)
}

/// SMs of the runner's GPU.
pub fn sm_count(r: &Runner) -> u32 {
    r._gpu.sms as u32
}
