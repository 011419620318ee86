//! The co-residency probe (`mkc occupancy --probe`): is a CTA of one kernel admitted on an SM
//! beside a running CTA of another? `cuOccupancyMaxActiveBlocksPerMultiprocessor` answers only
//! for one kernel, so the simulator's rule for two different kernels sharing an SM (a PDL
//! successor entering beside its predecessor) is checked here against the hardware.
//!
//! A "resident" grid of one CTA per SM (its shared memory keeps a second one out) spins long;
//! a "visitor" grid launched at once on another stream spins briefly. A visitor CTA that
//! entered an SM before the resident CTA there left was admitted beside it.

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use super::device::{DevBuf, Gpu};
use super::setup::{func, load_module};
use crate::error::{check, BackendError};

/// Dynamic shared memory of a resident CTA: more than half an SM, so one per SM.
pub const RESIDENT_SMEM: u32 = 120 * 1024;

/// How long a resident CTA spins (ns): far longer than the visitor's launch takes.
const RESIDENT_SPIN_NS: u64 = 60_000;

/// How long a visitor CTA spins (ns).
const VISITOR_SPIN_NS: u64 = 2_000;

/// One side of a probed pair: a `k_hold_<K>` kernel and the threads it is launched with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSide {
    /// Kernel entry point.
    pub name: String,
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread (from ptxas).
    pub registers: u32,
}

/// What one pair did on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairProbe {
    /// The long-running kernel, one CTA per SM with [`RESIDENT_SMEM`] of shared memory.
    pub resident: ProbeSide,
    /// The kernel launched beside it, no shared memory.
    pub visitor: ProbeSide,
    /// Visitor CTAs that entered an SM while its resident CTA was still there.
    pub admitted: u32,
    /// Visitor CTAs launched (one per SM).
    pub visitors: u32,
}

/// Registers per thread of the probe's kernels: `k_hold_<R>` holds exactly R (the source's
/// `HOLD` list).
pub const PROBE_REGISTERS: [u32; 12] = [32, 48, 64, 72, 80, 88, 96, 104, 112, 120, 128, 168];

/// A kernel to launch: entry point and threads per CTA.
pub type Launch = (String, u32);

/// Runs every `(resident, visitor)` pair of `pairs` (kernels of the compiled probe `cubin`,
/// with their threads) on `gpu`; registers are the driver's figures for the loaded kernels.
pub fn probe_coresidency(
    gpu: &Gpu,
    cubin: &[u8],
    pairs: &[(Launch, Launch)],
) -> Result<Vec<PairProbe>, BackendError> {
    if pairs.is_empty() {
        return Ok(Vec::new());
    }
    let module = load_module(cubin)?;
    let sms = gpu.sms as usize;
    let rec_a = DevBuf::new(sms * 3 * 8, "probe records")?;
    let rec_b = DevBuf::new(sms * 3 * 8, "probe records")?;
    let sink = DevBuf::new(1024 * 4, "probe sink")?;
    let make_stream = || {
        check(
            result::stream::create(result::stream::StreamKind::NonBlocking),
            "cuStreamCreate",
            "probe stream",
        )
    };
    let (s1, s2) = (make_stream()?, make_stream()?);
    let side = |(name, threads): &Launch| -> Result<ProbeSide, BackendError> {
        let f = func(module, name)?;
        // SAFETY: valid function and attribute.
        let registers = check(
            unsafe {
                result::function::get_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
                )
            },
            "cuFuncGetAttribute",
            name,
        )? as u32;
        Ok(ProbeSide {
            name: name.clone(),
            threads: *threads,
            registers,
        })
    };
    let mut out = Vec::with_capacity(pairs.len());
    // The first pair runs twice: its first run also loads the module's code.
    for (i, (a, b)) in std::iter::once(&pairs[0]).chain(pairs).enumerate() {
        let (fa, fb) = (func(module, &a.0)?, func(module, &b.0)?);
        for f in [fa, fb] {
            for (attr, v) in [
                (
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    RESIDENT_SMEM as i32,
                ),
                (
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                    100,
                ),
            ] {
                // SAFETY: valid function and attribute.
                check(
                    unsafe { result::function::set_function_attribute(f, attr, v) },
                    "cuFuncSetAttribute",
                    "probe kernel",
                )?;
            }
        }
        launch_hold(
            fa,
            sms as u32,
            a.1,
            RESIDENT_SMEM,
            s1,
            rec_a.ptr,
            RESIDENT_SPIN_NS,
            sink.ptr,
        )?;
        launch_hold(
            fb,
            sms as u32,
            b.1,
            0,
            s2,
            rec_b.ptr,
            VISITOR_SPIN_NS,
            sink.ptr,
        )?;
        for s in [s1, s2] {
            // SAFETY: the stream is live.
            check(
                unsafe { result::stream::synchronize(s) },
                "cuStreamSynchronize",
                "probe",
            )?;
        }
        let (ra, rb) = (records(rec_a.ptr, sms)?, records(rec_b.ptr, sms)?);
        let mut resident_exit = std::collections::HashMap::new();
        for &(sm, _, exit) in &ra {
            resident_exit.insert(sm, exit);
        }
        let admitted = rb
            .iter()
            .filter(|&&(sm, entry, _)| resident_exit.get(&sm).is_some_and(|&x| entry < x))
            .count() as u32;
        if i > 0 {
            out.push(PairProbe {
                resident: side(a)?,
                visitor: side(b)?,
                admitted,
                visitors: sms as u32,
            });
        }
    }
    // SAFETY: both streams are idle and destroyed once; the module is unloaded once.
    unsafe {
        result::stream::destroy(s1).ok();
        result::stream::destroy(s2).ok();
        result::module::unload(module).ok();
    }
    Ok(out)
}

/// Launches `k_hold_<K>(rec, spin_ns, sink)` with one CTA per SM.
#[allow(clippy::too_many_arguments)]
fn launch_hold(
    f: sys::CUfunction,
    ctas: u32,
    threads: u32,
    smem: u32,
    stream: sys::CUstream,
    rec: u64,
    spin_ns: u64,
    sink: u64,
) -> Result<(), BackendError> {
    let (mut rec, mut spin, mut sink) = (rec, spin_ns, sink);
    let mut args: Vec<*mut c_void> = vec![
        &mut rec as *mut u64 as *mut c_void,
        &mut spin as *mut u64 as *mut c_void,
        &mut sink as *mut u64 as *mut c_void,
    ];
    // SAFETY: the arguments match `k_hold_<K>(u64*, u64, float*)` and outlive the call.
    check(
        unsafe { result::launch_kernel(f, (ctas, 1, 1), (threads, 1, 1), smem, stream, &mut args) },
        "cuLaunchKernel",
        "probe kernel",
    )
}

/// `(sm, entry ns, exit ns)` of each CTA from a records buffer.
fn records(ptr: u64, ctas: usize) -> Result<Vec<(u64, u64, u64)>, BackendError> {
    let mut host = vec![0u64; ctas * 3];
    // SAFETY: the buffer holds ctas * 3 u64; its stream has been synchronised.
    check(
        unsafe { result::memcpy_dtoh_sync(&mut host, ptr) },
        "cuMemcpyDtoH",
        "probe records",
    )?;
    Ok(host.chunks(3).map(|c| (c[0], c[1], c[2])).collect())
}
