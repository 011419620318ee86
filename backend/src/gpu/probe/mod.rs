//! Probes of the hardware facts the simulator assumes (`mkc probe`), most of them a pair of
//! small kernels (`backend/kernels/probe.cu`) run on two streams at once: which pairs of kernels
//! share an SM ([`coresidency`]), how long an L2 hit takes while HBM streams ([`latency`]),
//! how fast weight pages held in L2 stream ([`l2`]), two matvec engines alone ([`matvec`]),
//! whether dealing pages in contiguous runs streams slower than the floor's sweep ([`partition`]),
//! how long the operators' own page loop (a kernel of `mkc.cu`) takes over landed pages
//! ([`pages`]), how fast each SM streams while all do ([`sm_speeds`]), and how long
//! attention's body takes alone for 1-4 query heads per task ([`attention`]).

mod attention;
mod coresidency;
mod l2;
mod latency;
mod matvec;
mod occupancy;
mod pages;
mod partition;
mod sm_speeds;

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use super::device::{stalled, wait_stream};
use super::launch::arg;
use super::setup::{func, load_module, opt_in_smem};
use crate::error::{check, BackendError};

pub use attention::{
    heads_per_task, probe_attention, AttentionBuild, AttentionProbe, AttentionRow, AttentionShape,
    ATTENTION_LENGTHS, ATTENTION_REPEATS,
};
pub use coresidency::{probe_coresidency, PairProbe, ProbeSide, PROBE_REGISTERS};
pub use l2::{probe_l2, L2Probe, L2Row, L2Warmed, L2_MIXED_MIB, L2_REPEATS, L2_WARMERS};
pub use latency::{
    chase_cycle, probe_latency, LatencyProbe, LoadedLatency, ProfileTerm, ReleaseCost, StreamKind,
    LOADED_CASES,
};
pub use matvec::{probe_matvec, MatvecRow, MATVEC_REPEATS, MATVEC_SHAPES};
pub use occupancy::{
    occupancy_kernels, probe_occupancy, KernelShape, OccupancyQuery, OCCUPANCY_KERNELS,
};
pub use pages::{
    page_inputs, probe_page_math, PageMathProbe, PageMathRow, PAGE_MATH_CASES, PAGE_MATH_REPEATS,
    PAGE_MATH_STREAM_CASES,
};
pub use partition::{probe_partition, PartitionProbe, PartitionRow, PARTITION_REPEATS};
pub use sm_speeds::{probe_sm_speeds, SmSpeedProbe, SM_SPEED_REPEATS, SM_SPEED_SLOTS};

/// Longest a probe waits for its kernels (each runs milliseconds; the longest, a 3 ms stream
/// and the L2 evictions, well under a second).
const PROBE_WATCHDOG: std::time::Duration = std::time::Duration::from_secs(20);

/// Dynamic shared memory of a CTA that must have an SM to itself: more than half an SM.
pub const RESIDENT_SMEM: u32 = 120 * 1024;

/// Bytes a probe reads to evict L2 (50 MiB on the H100/H200) before a cold measurement.
const EVICT_BYTES: u64 = 256 << 20;

/// Most dynamic shared memory a probe kernel is launched with (a streamer's ring of 8 pages;
/// the partition probe opts in to more for its deeper rings).
const MAX_PROBE_SMEM: u32 = 8 * 16384;

/// The probe kernels' module, unloaded on drop.
struct ProbeModule(sys::CUmodule);

impl ProbeModule {
    fn load(cubin: &[u8]) -> Result<ProbeModule, BackendError> {
        load_module(cubin, "probe.cu").map(ProbeModule)
    }

    /// Kernel `name`, allowed [`MAX_PROBE_SMEM`] of dynamic shared memory with the largest
    /// carveout (so that two kernels' CTAs may share an SM's shared memory).
    fn kernel(&self, name: &str) -> Result<sys::CUfunction, BackendError> {
        self.kernel_with_smem(name, MAX_PROBE_SMEM)
    }

    /// Kernel `name`, allowed `smem` bytes of dynamic shared memory.
    fn kernel_with_smem(&self, name: &str, smem: u32) -> Result<sys::CUfunction, BackendError> {
        let f = func(self.0, name)?;
        opt_in_smem(f, smem, name)?;
        Ok(f)
    }
}

impl Drop for ProbeModule {
    fn drop(&mut self) {
        if !stalled() {
            // SAFETY: loaded by `load`, unloaded once.
            unsafe { result::module::unload(self.0) }.ok();
        }
    }
}

/// Two non-blocking streams, destroyed on drop: a probe's two grids run at once.
struct StreamPair(sys::CUstream, sys::CUstream);

impl StreamPair {
    fn new() -> Result<StreamPair, BackendError> {
        let make = || {
            check(
                result::stream::create(result::stream::StreamKind::NonBlocking),
                "cuStreamCreate",
                "probe stream",
            )
        };
        Ok(StreamPair(make()?, make()?))
    }

    /// Waits for both streams, at most [`PROBE_WATCHDOG`]: a probe kernel that never finishes
    /// (it spins on an mbarrier or a flag) is reported by name instead of hanging the process.
    fn sync(&self, what: &str) -> Result<(), BackendError> {
        let deadline = std::time::Instant::now() + PROBE_WATCHDOG;
        for s in [self.0, self.1] {
            if !wait_stream(s, what, deadline)? {
                return Err(BackendError::ProbeStalled {
                    kernel: what.to_string(),
                    seconds: PROBE_WATCHDOG.as_secs_f64(),
                });
            }
        }
        Ok(())
    }
}

impl Drop for StreamPair {
    fn drop(&mut self) {
        if !stalled() {
            // SAFETY: created by `new`, destroyed once.
            unsafe {
                result::stream::destroy(self.0).ok();
                result::stream::destroy(self.1).ok();
            }
        }
    }
}

/// Launches `f` on `grid` CTAs of `block` threads with `smem` bytes of dynamic shared memory.
fn launch(
    f: sys::CUfunction,
    (grid, block, smem): (u32, u32, u32),
    stream: sys::CUstream,
    args: &mut [*mut c_void],
) -> Result<(), BackendError> {
    // SAFETY: each caller's arguments match its kernel's signature and outlive the call.
    check(
        unsafe { result::launch_kernel(f, (grid, 1, 1), (block, 1, 1), smem, stream, args) },
        "cuLaunchKernel",
        "probe kernel",
    )
}

/// ns from the earliest start to the latest end in per-CTA records of (SM, start ns, end ns), so
/// that the slowest CTA counts in full.
fn span_ns(records: &[u64]) -> u64 {
    let start = records.chunks(3).map(|c| c[1]).min().unwrap_or(0);
    let end = records.chunks(3).map(|c| c[2]).max().unwrap_or(0);
    end.saturating_sub(start)
}

/// How `k_read_pages` deals a buffer's 16 KiB pages to its CTAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deal {
    /// CTA b takes pages b, b + grid, b + 2 grid, ...: the whole grid sweeps the buffer
    /// together, as the bandwidth floor's kernel reads.
    Interleaved,
    /// CTA b takes one run of consecutive pages, as mkc's plans deal an operator's tasks.
    Contiguous,
}

/// Reads `bytes` at `ptr` once with `k_read_pages` (`f`) on `ctas` CTAs, `slots` bulk copies in
/// flight each, CTA b reading CTA b + `shift`'s pages (dealt as `deal` says), records to `rec`;
/// waits for it. Used to time a read and to evict L2.
#[allow(clippy::too_many_arguments)]
fn read_pages(
    f: sys::CUfunction,
    streams: &StreamPair,
    (mut ptr, mut bytes): (u64, u64),
    mut slots: i32,
    mut shift: u32,
    deal: Deal,
    mut rec: u64,
    ctas: u32,
) -> Result<(), BackendError> {
    let mut contiguous = i32::from(deal == Deal::Contiguous);
    let mut args = vec![
        arg(&mut ptr),
        arg(&mut bytes),
        arg(&mut rec),
        arg(&mut slots),
        arg(&mut shift),
        arg(&mut contiguous),
    ];
    launch(f, (ctas, 32, slots as u32 * 16384), streams.0, &mut args)?;
    streams.sync("k_read_pages")
}

/// `n` u64 read back from `ptr` (its writers have finished).
fn read_u64s(ptr: u64, n: usize, what: &str) -> Result<Vec<u64>, BackendError> {
    let mut host = vec![0u64; n];
    // SAFETY: the buffer holds at least n u64; every stream writing it is idle.
    check(
        unsafe { result::memcpy_dtoh_sync(&mut host, ptr) },
        "cuMemcpyDtoH",
        what,
    )?;
    Ok(host)
}

/// Deterministic values in [-1, 1) (xorshift) from `seed`, for a probe's weights and input.
fn values(n: usize, seed: u32) -> impl Iterator<Item = f32> {
    let mut s = seed | 1;
    (0..n).map(move |_| {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    })
}
