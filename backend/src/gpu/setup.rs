//! Building a runner: compiling and loading the kernels, allocating every buffer, filling or
//! uploading the weights.

use std::ffi::c_void;

use cudarc::driver::{result, sys};
use mkc_ir::work::MatvecWork;
use mkc_ir::{Model, OpKind};

use super::device::{DevBuf, Gpu};
use super::launch::arg;
use super::{OpFn, Runner};
use crate::abi::{KGlobals, KLayer, KModel};
use crate::error::{check, BackendError};
use crate::kernels;
use crate::memory::{global_buffers, DeviceMemory, LayerBuffer};
use crate::weights::{layout, Fill, LayerTensor, PER_LAYER};

/// Where weights come from.
pub enum WeightSource<'a> {
    /// Generated on the GPU from a seed (the CPU reproduces them with [`crate::weights::generate`]).
    Random(u32),
    /// Read from a checkpoint and uploaded tensor by tensor (each dropped once uploaded).
    Checkpoint(&'a crate::checkpoint_reader::Checkpoint),
}

/// Loads a cubin and prepares every operator kernel (dynamic shared memory opted in).
pub(super) fn load_operators(
    cubin: &[u8],
    model: &Model,
) -> Result<(sys::CUmodule, Vec<OpFn>), BackendError> {
    let module = load_module(cubin, "mkc.cu")?;
    let mut funcs = Vec::new();
    for &(name, kind) in kernels::ENTRY_POINTS {
        let f = func(module, name)?;
        opt_in_smem(f, kernels::dynamic_smem(model, kind), name)?;
        funcs.push((kind, f));
    }
    Ok((module, funcs))
}

/// Loads a cubin produced by [`kernels::compile`] or [`kernels::compile_probe`] (`what` names
/// its source in errors) into the current context.
pub(super) fn load_module(cubin: &[u8], what: &str) -> Result<sys::CUmodule, BackendError> {
    // SAFETY: the cubin is a complete image produced by NVRTC for this architecture.
    check(
        unsafe { result::module::load_data(cubin.as_ptr() as *const c_void) },
        "cuModuleLoadData",
        what,
    )
}

/// Lets kernel `f` (`name` in errors) launch with `bytes` of dynamic shared memory, and prefers
/// the largest shared-memory carveout: with the default preference the driver's choice can keep
/// a successor CTA off an SM that has room for it (gpu.md).
pub(super) fn opt_in_smem(f: sys::CUfunction, bytes: u32, name: &str) -> Result<(), BackendError> {
    use sys::CUfunction_attribute as A;
    for (attr, v) in [
        (
            A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        ),
        (A::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100),
    ] {
        // SAFETY: valid function and attribute.
        check(
            unsafe { result::function::set_function_attribute(f, attr, v) },
            "cuFuncSetAttribute",
            name,
        )?;
    }
    Ok(())
}

/// The driver's figure `attr` for kernel `f` (`name` in errors).
pub(super) fn func_attribute(
    f: sys::CUfunction,
    attr: sys::CUfunction_attribute,
    name: &str,
) -> Result<i32, BackendError> {
    // SAFETY: valid function and attribute.
    check(
        unsafe { result::function::get_function_attribute(f, attr) },
        "cuFuncGetAttribute",
        name,
    )
}

pub(super) fn func(module: sys::CUmodule, name: &str) -> Result<sys::CUfunction, BackendError> {
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
        // Refused before anything is allocated when the card cannot hold the model.
        let (free, card_total) = check(result::mem_get_info(), "cuMemGetInfo", "free memory")?;
        DeviceMemory::of(model)
            .check_fits(&model.name, free as u64, card_total as u64)
            .map_err(BackendError::Unsupported)?;
        let compiled = kernels::compile("sm_90a", model)?;
        let kernel_info = kernels::with_model(compiled.kernels.clone(), model);
        let (module, funcs) = load_operators(&compiled.cubin, model)?;
        let read_bw = func(module, "k_read_bw")?;
        let stream = check(
            result::stream::create(result::stream::StreamKind::NonBlocking),
            "cuStreamCreate",
            "runner stream",
        )?;
        let km = KModel::of(model);
        let mut runner = Runner {
            model: model.clone(),
            km,
            globals: KGlobals::default(),
            layers: Vec::new(),
            stream,
            module,
            funcs,
            traced: None,
            ablated: Vec::new(),
            read_bw,
            kernel_info,
            bufs: Vec::new(),
            allocated: 0,
            _gpu: gpu,
        };
        runner.allocate(weights)?;
        Ok(runner)
    }

    pub(super) fn alloc(&mut self, bytes: usize, what: &str) -> Result<u64, BackendError> {
        let b = DevBuf::new(bytes, what)?;
        let p = b.ptr;
        self.bufs.push(b);
        self.allocated += bytes as u64;
        Ok(p)
    }

    fn allocate(&mut self, weights: WeightSource<'_>) -> Result<(), BackendError> {
        let m = self.model.clone();
        let g = &m.geometry;
        let specs = layout(&m);
        let (hidden, inter) = (g.hidden as usize, g.intermediate as usize);
        // The split-K matrices (the O-projection, down, where split) arrive row-major (generated
        // or uploaded) in a scratch buffer and are stored page-major (`k_page_major`), as the
        // producers copy them: one copy per page. Gate and up are one buffer, gate's rows then
        // up's (a page holds matching rows of both). The other matrices' row-major layout is
        // already their page-major one (whole rows, one K chunk).
        let mat = hidden * inter;
        let scratch = crate::memory::split_scratch_bytes(&m)
            .map(|bytes| DevBuf::new(bytes as usize, "page-major scratch"))
            .transpose()?;
        let scratch_ptr = scratch.as_ref().map_or(0, |b| b.ptr);
        let mut gate_up = 0u64;
        let mut ptrs = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            let tensor = (i < g.layers as usize * PER_LAYER).then_some(i % PER_LAYER);
            let split = tensor.and_then(|t| split_k_of(&m, t));
            let p = match tensor {
                _ if split.is_some() => scratch_ptr,
                Some(t) if t == LayerTensor::Gate as usize => {
                    gate_up = self.alloc(2 * mat * 2, &s.name.replace("w_gate", "w_gate_up"))?;
                    gate_up
                }
                Some(t) if t == LayerTensor::Up as usize => gate_up + mat as u64 * 2,
                _ => self.alloc(s.len() as usize * 2, &s.name)?,
            };
            match &weights {
                WeightSource::Random(seed) => self.fill(p, s, *seed)?,
                WeightSource::Checkpoint(c) => {
                    super::device::upload(p, &c.tensor(i)?, &s.name)?;
                }
            }
            let p = match split {
                Some(pages) => {
                    let out = self.alloc(s.len() as usize * 2, &s.name)?;
                    self.page_major(scratch_ptr, out, pages, &s.name)?;
                    out
                }
                None => p,
            };
            ptrs.push(p);
        }
        // The residual stream leaving the previous layer: its x_mid plus its down partials.
        let (mut prev_mid, mut prev_part) = (0u64, 0u64);
        for l in 0..g.layers as usize {
            let w = |t: usize| ptrs[l * PER_LAYER + t];
            let mut b = [0u64; LayerBuffer::ALL.len()];
            for (slot, buf) in b.iter_mut().zip(LayerBuffer::ALL) {
                *slot = self.alloc(buf.bytes(&m) as usize, buf.name())?;
            }
            let [k_cache, v_cache, x_in, qkv, attn, o_part, x_mid, h, d_part] = b;
            let layer = KLayer {
                w_qkv: w(0),
                w_o: w(1),
                w_gate_up: w(2),
                w_down: w(4),
                norm1: w(5),
                norm2: w(6),
                k_cache,
                v_cache,
                prev_mid,
                prev_part,
                x_in,
                qkv,
                attn,
                o_part,
                x_mid,
                h,
                d_part,
                pad: 0,
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
        let mut globals = [0u64; 3];
        for (slot, (name, bytes)) in globals.iter_mut().zip(global_buffers(&m)) {
            *slot = self.alloc(bytes as usize, name)?;
        }
        let [tokens, pos, logits] = globals;
        self.globals = KGlobals {
            embed,
            lm_head,
            final_norm: *ptrs.last().expect("final norm"),
            tokens,
            pos,
            logits,
            final_mid: prev_mid,
            final_part: prev_part,
        };
        // The memory check before allocation counted what was allocated here.
        let counted = DeviceMemory::of(&m).kept();
        if self.allocated != counted {
            return Err(BackendError::Internal(format!(
                "the runner allocated {} bytes for {} where mkc_backend::memory counts {counted}",
                self.allocated, m.name
            )));
        }
        self.sync("weights and buffers")
    }

    /// Stores the row-major split-K matrix `a` page-major into `out` (`k_page_major`), and
    /// waits for it: the scratch it reads is written next by a synchronous upload, which does
    /// not wait for this stream.
    fn page_major(
        &self,
        a: u64,
        out: u64,
        pages: MatvecWork,
        what: &str,
    ) -> Result<(), BackendError> {
        let f = func(self.module, "k_page_major")?;
        let (mut a, mut out) = (a, out);
        let (mut k, mut splits, mut out_rows, mut page_rows) = (
            pages.k as i32,
            pages.splits as i32,
            pages.out_rows as i32,
            pages.page_rows() as i32,
        );
        let mut args: Vec<*mut c_void> = vec![
            arg(&mut a),
            arg(&mut out),
            arg(&mut k),
            arg(&mut splits),
            arg(&mut out_rows),
            arg(&mut page_rows),
        ];
        // SAFETY: the argument list matches the kernel's signature; `a` and `out` hold
        // out_rows x splits x k bf16 each.
        unsafe { self.launch_setup(f, "k_page_major", &mut args)? };
        self.sync(what)
    }

    /// Launches one of the setup kernels (`k_fill_*`, `k_page_major`: grid-stride loops, so any
    /// grid covers their data) on the runner's stream.
    ///
    /// # Safety
    /// `args` matches `f`'s signature, and the buffers they name hold what `f` touches.
    unsafe fn launch_setup(
        &self,
        f: sys::CUfunction,
        name: &str,
        args: &mut [*mut c_void],
    ) -> Result<(), BackendError> {
        check(
            unsafe { result::launch_kernel(f, (1024, 1, 1), (256, 1, 1), 0, self.stream, args) },
            "cuLaunchKernel",
            name,
        )
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
        let mut args: Vec<*mut c_void> =
            vec![arg(&mut out), arg(&mut n), arg(&mut seed), arg(&mut stream)];
        if matches!(spec.fill, Fill::Matrix { .. }) {
            args.push(arg(&mut shift));
        }
        // SAFETY: the argument list matches the kernel's signature; `out` holds n bf16.
        unsafe { self.launch_setup(f, name, &mut args) }
    }
}

/// The split-K work of layer tensor `t` of `m` (`LayerTensor` as usize): `mkc_ir::work`'s
/// description of the O-projection's and down's pages, which `k_page_major` stores them by,
/// where their K is split. None for the others, and for an unsplit one, whose row-major layout
/// is its page-major one.
fn split_k_of(m: &Model, t: usize) -> Option<MatvecWork> {
    let kind = match t {
        t if t == LayerTensor::O as usize => OpKind::OProj,
        t if t == LayerTensor::Down as usize => OpKind::Down,
        _ => return None,
    };
    crate::memory::split_k(m, kind)
}
