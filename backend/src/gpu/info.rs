//! Kernel figures as the driver reports them after loading a cubin.

use cudarc::driver::{result, sys};

use super::device::Gpu;
use super::setup::{func, func_attribute, load_module};
use crate::kernels::{self, KernelInfo};
use crate::BackendError;

/// Registers, static shared memory and local (spill/stack) bytes of every kernel as the driver
/// reports them after loading `cubin` on `gpu`: the authoritative figures, used when the
/// compiler log carries none.
pub fn loaded_kernel_info(
    gpu: &Gpu,
    cubin: &[u8],
    tuning: &mkc_ir::Tuning,
) -> Result<Vec<KernelInfo>, BackendError> {
    let _ = gpu;
    let module = load_module(cubin, "mkc.cu")?;
    let mut out = Vec::new();
    // Every kernel the cubin holds (a persistent build has k_persistent and no chain kernels).
    for (name, _) in kernels::text_hashes(cubin) {
        let name = name.as_str();
        let f = func(module, name)?;
        let attr = |a| func_attribute(f, a, name);
        use sys::CUfunction_attribute as A;
        let local = attr(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)? as u32;
        out.push(KernelInfo {
            name: name.to_string(),
            threads: kernels::threads_of(tuning, name),
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
    kernels::set_code_hashes(&mut out, cubin);
    Ok(out)
}
