//! The co-residency probe (`mkc probe coresidency`): is a CTA of one kernel admitted on an SM
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

impl PairProbe {
    /// Whether the visitor was admitted beside the resident: on at least 90% of the SMs (yes)
    /// or on at most 10% (no: a visitor may slip in where a resident CTA started late or left
    /// early); `None` in between.
    pub fn admitted_beside(&self) -> Option<bool> {
        if self.admitted * 10 >= self.visitors * 9 {
            Some(true)
        } else if self.admitted * 10 <= self.visitors {
            Some(false)
        } else {
            None
        }
    }
}

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

/// How long a dependent chain of L2 hits takes per link, idle and while HBM streams: the
/// latency an activation load on a chain's critical path pays (the simulator's
/// `signal_visible_ns` stands for it).
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyProbe {
    /// ns per link with the GPU otherwise idle.
    pub idle_ns: f64,
    /// The loaded cases, in [`LOADED_CASES`] order.
    pub loaded: Vec<LoadedLatency>,
}

/// The chain's latency under one kind of concurrent stream.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedLatency {
    /// What streams, and where the chain runs.
    pub case: &'static str,
    /// ns per link.
    pub ns: f64,
    /// Read bandwidth the stream reached (GB/s).
    pub stream_gbps: f64,
    /// The chain ran where the case needs it (an SM of its own, or beside a streamer).
    pub placed_as_intended: bool,
}

/// The loaded cases: (description, bulk copies of 16 KiB in flight per streaming CTA (0:
/// 16-byte loads instead), the chain's SM streams too).
pub const LOADED_CASES: [(&str, i32, bool); 10] = [
    ("every other SM streams, 16-byte loads", 0, false),
    ("its own SM streams too, 16-byte loads", 0, true),
    (
        "every other SM streams, 1 bulk copy of 16 KiB in flight",
        1,
        false,
    ),
    (
        "every other SM streams, 2 bulk copies of 16 KiB in flight",
        2,
        false,
    ),
    (
        "every other SM streams, 3 bulk copies of 16 KiB in flight",
        3,
        false,
    ),
    (
        "every other SM streams, 4 bulk copies of 16 KiB in flight",
        4,
        false,
    ),
    (
        "every other SM streams, 6 bulk copies of 16 KiB in flight",
        6,
        false,
    ),
    (
        "every other SM streams, 8 bulk copies of 16 KiB in flight",
        8,
        false,
    ),
    (
        "its own SM streams too, 4 bulk copies of 16 KiB in flight",
        4,
        true,
    ),
    (
        "its own SM streams too, 8 bulk copies of 16 KiB in flight",
        8,
        true,
    ),
];

/// Links of the chase: 128-byte lines of a 64 KiB buffer, visited in a random cycle.
const CHASE_LINES: usize = 512;

/// Most bulk copies a TMA-streaming CTA keeps in flight (an operator's ring).
const TMA_SLOTS: i32 = 8;

/// The links of the chase: a buffer of `lines` lines of `words` u32 whose first word holds the
/// index of the next line's first word, in one random cycle through every line (xorshift
/// shuffle: reproducible, no dependency). Other words are 0 and never read.
pub fn chase_cycle(lines: usize, words: usize) -> Vec<u32> {
    let mut order: Vec<usize> = (1..lines).collect();
    let mut x = 0x9E37_79B9u32;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        order.swap(i, x as usize % (i + 1));
    }
    let mut next = vec![0u32; lines * words];
    let mut at = 0usize;
    for &line in &order {
        next[at * words] = (line * words) as u32;
        at = line;
    }
    next[at * words] = 0;
    next
}

/// Runs the latency probe (kernels `k_chase`, `k_stream` and `k_stream_tma` of the compiled
/// probe `cubin`).
pub fn probe_latency(gpu: &Gpu, cubin: &[u8]) -> Result<LatencyProbe, BackendError> {
    let module = load_module(cubin)?;
    let chase = func(module, "k_chase")?;
    let (plain, tma) = (func(module, "k_stream")?, func(module, "k_stream_tma")?);
    for f in [chase, plain, tma] {
        // SAFETY: valid function and attribute.
        check(
            unsafe {
                result::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    (TMA_SLOTS as u32 * 16384).max(RESIDENT_SMEM) as i32,
                )
            },
            "cuFuncSetAttribute",
            "probe kernel",
        )?;
    }
    let next = chase_cycle(CHASE_LINES, 32);
    let chain = DevBuf::new(next.len() * 4, "chase buffer")?;
    // SAFETY: `chain` holds next.len() u32.
    check(
        unsafe { result::memcpy_htod_sync(chain.ptr, &next) },
        "cuMemcpyHtoD",
        "chase buffer",
    )?;
    let stream_bytes = 1usize << 30;
    let big = DevBuf::new(stream_bytes, "stream buffer")?;
    let out = DevBuf::new(3 * 8, "chase result")?;
    let sms = gpu.sms as u32;
    let rec = DevBuf::new(sms as usize * 3 * 8, "stream records")?;
    let sink = DevBuf::new(16, "probe sink")?;
    let make = || {
        check(
            result::stream::create(result::stream::StreamKind::NonBlocking),
            "cuStreamCreate",
            "probe stream",
        )
    };
    let (s1, s2) = (make()?, make()?);
    let launch = |f, grid: u32, block: u32, smem: u32, s, args: &mut Vec<*mut c_void>| {
        // SAFETY: each caller's arguments match the kernel's signature and outlive the call.
        check(
            unsafe { result::launch_kernel(f, (grid, 1, 1), (block, 1, 1), smem, s, args) },
            "cuLaunchKernel",
            "probe kernel",
        )
    };
    let run_chase = |hops: i32, smem: u32| -> Result<(), BackendError> {
        let (mut p, mut h, mut o) = (chain.ptr, hops, out.ptr);
        let mut args: Vec<*mut c_void> = vec![
            &mut p as *mut u64 as *mut c_void,
            &mut h as *mut i32 as *mut c_void,
            &mut o as *mut u64 as *mut c_void,
        ];
        launch(chase, 1, 32, smem, s2, &mut args)
    };
    // Streams for 3 ms on `ctas` CTAs, one per SM (their shared memory keeps a second out),
    // with `slots` bulk copies in flight each, or 16-byte loads for 0.
    let run_stream = |slots: i32, ctas: u32| -> Result<(), BackendError> {
        let (mut p, mut r, mut k) = (big.ptr, rec.ptr, sink.ptr);
        let mut d = 3_000_000u64;
        let mut slots = slots;
        if slots > 0 {
            let mut n = stream_bytes as u64;
            let mut args: Vec<*mut c_void> = vec![
                &mut p as *mut u64 as *mut c_void,
                &mut n as *mut u64 as *mut c_void,
                &mut d as *mut u64 as *mut c_void,
                &mut r as *mut u64 as *mut c_void,
                &mut slots as *mut i32 as *mut c_void,
            ];
            launch(tma, ctas, 32, TMA_SLOTS as u32 * 16384, s1, &mut args)
        } else {
            let mut n = (stream_bytes / 16) as u64;
            let mut args: Vec<*mut c_void> = vec![
                &mut p as *mut u64 as *mut c_void,
                &mut n as *mut u64 as *mut c_void,
                &mut d as *mut u64 as *mut c_void,
                &mut r as *mut u64 as *mut c_void,
                &mut k as *mut u64 as *mut c_void,
            ];
            launch(plain, ctas, 512, RESIDENT_SMEM, s1, &mut args)
        }
    };
    let finish = |what: &str| -> Result<([u64; 3], Vec<u64>), BackendError> {
        for s in [s1, s2] {
            // SAFETY: the stream is live.
            check(
                unsafe { result::stream::synchronize(s) },
                "cuStreamSynchronize",
                what,
            )?;
        }
        let mut o = [0u64; 3];
        // SAFETY: `out` holds 3 u64; both streams are idle.
        check(
            unsafe { result::memcpy_dtoh_sync(&mut o, out.ptr) },
            "cuMemcpyDtoH",
            what,
        )?;
        let mut r = vec![0u64; sms as usize * 3];
        // SAFETY: `rec` holds 3 sms u64.
        check(
            unsafe { result::memcpy_dtoh_sync(&mut r, rec.ptr) },
            "cuMemcpyDtoH",
            what,
        )?;
        Ok((o, r))
    };
    let ns = |o: [u64; 3]| o[1] as f64 / 1000.0;
    run_chase(2000, 0)?;
    let (idle, _) = finish("idle chase")?;
    let mut loaded = Vec::with_capacity(LOADED_CASES.len());
    for (case, slots, own) in LOADED_CASES {
        // With every other SM streaming, the chain's shared memory keeps it off their SMs;
        // with every SM streaming, it has none and runs beside a streamer.
        let ctas = if own { sms } else { sms - 1 };
        run_stream(slots, ctas)?;
        run_chase(500, if own { 0 } else { RESIDENT_SMEM })?;
        let (o, r) = finish(case)?;
        let cta = r.chunks(3).take(ctas as usize);
        let on_streamer = cta.clone().any(|c| c[0] == o[0]);
        let bytes: u64 = cta.clone().map(|c| c[1]).sum();
        let span = cta.map(|c| c[2]).max().unwrap_or(1).max(1);
        loaded.push(LoadedLatency {
            case,
            ns: ns(o),
            stream_gbps: bytes as f64 / span as f64,
            placed_as_intended: on_streamer == own,
        });
    }
    // SAFETY: both streams are idle and destroyed once; the module is unloaded once.
    unsafe {
        result::stream::destroy(s1).ok();
        result::stream::destroy(s2).ok();
        result::module::unload(module).ok();
    }
    Ok(LatencyProbe {
        idle_ns: ns(idle),
        loaded,
    })
}
