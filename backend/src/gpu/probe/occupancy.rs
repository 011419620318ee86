//! The occupancy rule against the driver: `cuOccupancyMaxActiveBlocksPerMultiprocessor` for
//! many kernel configurations (registers, static and dynamic shared memory, threads, carveout
//! preference), so that the simulator's rule is checked where mkc predicts admission.

use cudarc::driver::sys;

use super::super::device::Gpu;
use super::super::setup::func_attribute;
use super::ProbeModule;
use crate::error::{check, BackendError};

/// The probe kernels the occupancy probe queries: every `k_hold_<R>` and the static shared
/// memory variants (probe.cu).
pub const OCCUPANCY_KERNELS: [&str; 25] = [
    "k_hold_24",
    "k_hold_32",
    "k_hold_40",
    "k_hold_48",
    "k_hold_56",
    "k_hold_64",
    "k_hold_72",
    "k_hold_80",
    "k_hold_88",
    "k_hold_96",
    "k_hold_104",
    "k_hold_112",
    "k_hold_120",
    "k_hold_128",
    "k_hold_136",
    "k_hold_152",
    "k_hold_168",
    "k_hold_184",
    "k_hold_200",
    "k_hold_216",
    "k_hold_232",
    "k_hold_255",
    "k_hold_s4096_64",
    "k_hold_s20000_96",
    "k_hold_s40960_128",
];

/// A loaded kernel's resources as the driver reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelShape {
    /// Entry point.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory, bytes.
    pub static_smem: u32,
}

/// One query: a kernel, its launch shape and carveout preference, and the driver's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OccupancyQuery {
    /// Index into the shapes.
    pub kernel: usize,
    /// Threads per CTA.
    pub threads: u32,
    /// Dynamic shared memory per CTA, bytes.
    pub dynamic_smem: u32,
    /// Preferred carveout in percent; `None` is the driver's default preference.
    pub carveout: Option<u32>,
    /// CTAs per SM the driver answered (0 where it cannot launch).
    pub driver: u32,
}

/// The shapes of [`OCCUPANCY_KERNELS`] as loaded from `cubin`.
pub fn occupancy_kernels(cubin: &[u8]) -> Result<Vec<KernelShape>, BackendError> {
    let module = ProbeModule::load(cubin)?;
    OCCUPANCY_KERNELS
        .iter()
        .map(|&name| {
            let f = module.kernel(name)?;
            let attr = |a| func_attribute(f, a, name).map(|v| v.max(0) as u32);
            Ok(KernelShape {
                name: name.to_string(),
                registers: attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
                static_smem: attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            })
        })
        .collect()
}

/// Asks the driver for each of `queries` (their `driver` field is filled in). Every kernel may
/// opt in to the most dynamic shared memory a block can have beside its static memory.
pub fn probe_occupancy(
    gpu: &Gpu,
    cubin: &[u8],
    queries: &mut [OccupancyQuery],
) -> Result<(), BackendError> {
    let _ = gpu;
    let module = ProbeModule::load(cubin)?;
    let mut funcs = Vec::new();
    for &name in &OCCUPANCY_KERNELS {
        let f = super::super::setup::func(module.0, name)?;
        let static_smem = func_attribute(
            f,
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            name,
        )?;
        set_attr(
            f,
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            MAX_BLOCK_SMEM - static_smem,
            name,
        )?;
        funcs.push((f, name));
    }
    for q in queries.iter_mut() {
        let (f, name) = funcs[q.kernel];
        // -1 is CU_SHAREDMEM_CARVEOUT_DEFAULT.
        let pct = q.carveout.map_or(-1, |c| c as i32);
        set_attr(
            f,
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            pct,
            name,
        )?;
        let mut blocks = 0i32;
        // SAFETY: valid function; `blocks` outlives the call.
        let status = unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                f,
                q.threads as i32,
                q.dynamic_smem as usize,
            )
        };
        // A shape the driver refuses outright counts as zero CTAs per SM.
        q.driver = if status == sys::CUresult::CUDA_SUCCESS {
            blocks.max(0) as u32
        } else {
            0
        };
    }
    Ok(())
}

/// Most shared memory one block may opt in to on sm_90 (static + dynamic).
const MAX_BLOCK_SMEM: i32 = 232_448;

fn set_attr(
    f: sys::CUfunction,
    attr: sys::CUfunction_attribute,
    v: i32,
    name: &str,
) -> Result<(), BackendError> {
    // SAFETY: valid function and attribute.
    check(
        unsafe { cudarc::driver::result::function::set_function_attribute(f, attr, v) },
        "cuFuncSetAttribute",
        name,
    )
}
