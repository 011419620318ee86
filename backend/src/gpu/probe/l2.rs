//! How fast a streaming grid reads weight pages that L2 already holds (read just before, or
//! prefetched with `cp.async.bulk.prefetch.L2`) against pages evicted to HBM: whether a
//! predecessor can stage its successor's weights in L2 during its latency phases.

use std::ffi::c_void;

use super::super::device::{DevBuf, Gpu};
use super::super::launch::arg;
use super::super::median;
use super::{launch, read_pages, read_u64s, span_ns, Deal, ProbeModule, StreamPair, EVICT_BYTES};
use crate::error::BackendError;

/// One size and ring depth, read from each source (GB/s, the median of [`L2_REPEATS`]).
#[derive(Clone, Debug, PartialEq)]
pub struct L2Row {
    /// Bytes read (MiB).
    pub mib: u64,
    /// Bulk copies of 16 KiB in flight per CTA.
    pub slots: i32,
    /// Pages evicted from L2 before the read (from HBM).
    pub cold_gbps: f64,
    /// The same pages read by the same CTAs just before.
    pub warm_gbps: f64,
    /// The same pages read just before by other CTAs (half the grid away).
    pub warm_other_gbps: f64,
    /// Evicted, then prefetched into L2 by a grid that finished before the read.
    pub prefetched_gbps: f64,
}

/// How a grid that ended before the read warmed L2 (the `how` of `k_prefetch_pages`).
pub const L2_WARMERS: [&str; 6] = [
    "cp.async.bulk.prefetch.L2, 16 KiB",
    "cp.async.bulk.prefetch.L2, 16 KiB, evict_last",
    "cp.async.bulk.prefetch.L2, 4 x 4 KiB",
    "prefetch.global.L2 per 128-byte line",
    "prefetch.global.L2::evict_last per line",
    "16-byte loads, data dropped",
];

/// A read of pages that one of [`L2_WARMERS`] put in L2 (4 copies in flight per CTA).
#[derive(Clone, Debug, PartialEq)]
pub struct L2Warmed {
    /// Index into [`L2_WARMERS`].
    pub how: usize,
    /// Bytes read (MiB).
    pub mib: u64,
    /// GB/s, median of [`L2_REPEATS`].
    pub gbps: f64,
}

/// A read of [`L2_MIXED_MIB`] whose first part (the first pages of every CTA's share) was
/// warmed by loads: do pages from L2 and from HBM arrive side by side, or one after the other?
#[derive(Clone, Debug, PartialEq)]
pub struct L2Mixed {
    /// Bulk copies of 16 KiB in flight per CTA.
    pub slots: i32,
    /// Quarters of the bytes warmed (1-3; 4 with a stride).
    pub warm_quarters: u64,
    /// The last quarters warmed (every CTA's last pages) rather than the first.
    pub last: bool,
    /// Every `stride`-th page of every CTA's share warmed instead (0: quarters).
    pub stride: u32,
    /// GB/s, median of [`L2_REPEATS`].
    pub gbps: f64,
}

/// What the L2 probe measured.
#[derive(Clone, Debug, PartialEq)]
pub struct L2Probe {
    /// Each size and ring depth from each source.
    pub rows: Vec<L2Row>,
    /// Each way of warming L2, at [`L2_WARMED_MIB`].
    pub warmed: Vec<L2Warmed>,
    /// Reads partly warmed.
    pub mixed: Vec<L2Mixed>,
}

/// Size of the partly warmed reads (MiB).
pub const L2_MIXED_MIB: u64 = 32;

/// Sizes read after each way of warming L2.
const L2_WARMED_MIB: [u64; 2] = [16, 32];

/// Sizes read (MiB) and ring depths.
const L2_SIZES_MIB: [u64; 6] = [8, 16, 24, 32, 40, 48];
const L2_SLOTS: [i32; 2] = [4, 8];
/// Each measurement is repeated this many times; the median is kept.
pub const L2_REPEATS: usize = 3;

/// GB/s of a read of `bytes` from its CTAs' records (SM, first issue ns, last landing ns): from
/// the earliest issue to the latest landing, so that a slow CTA counts in full.
fn read_rate(records: &[u64], bytes: u64) -> f64 {
    bytes as f64 / span_ns(records).max(1) as f64
}

/// Runs the L2 probe (kernels `k_read_pages` and `k_prefetch_pages` of the compiled `cubin`).
pub fn probe_l2(gpu: &Gpu, cubin: &[u8]) -> Result<L2Probe, BackendError> {
    let module = ProbeModule::load(cubin)?;
    let read = module.kernel("k_read_pages")?;
    let prefetch = module.kernel("k_prefetch_pages")?;
    let streams = StreamPair::new()?;
    // The weights read live at the start; a region EVICT_BYTES further evicts them.
    let big = DevBuf::new(2 * EVICT_BYTES as usize, "L2 probe buffer")?;
    let sms = gpu.sms as u32;
    let rec = DevBuf::new(sms as usize * 3 * 8, "read records")?;
    let sink = DevBuf::new(16, "probe sink")?;
    // Reads `bytes` at `offset` on one CTA per SM; returns GB/s (first issue to last landing).
    let read_at = |offset: u64, bytes: u64, slots: i32, shift: u32| -> Result<f64, BackendError> {
        read_pages(
            read,
            &streams,
            (big.ptr + offset, bytes),
            slots,
            shift,
            Deal::Interleaved,
            rec.ptr,
            sms,
        )?;
        let r = read_u64s(rec.ptr, sms as usize * 3, "L2 probe read")?;
        Ok(read_rate(&r, bytes))
    };
    let evict = || read_at(EVICT_BYTES, EVICT_BYTES, 8, 0).map(|_| ());
    let prefetch_at =
        |offset: u64, bytes: u64, how: usize, stride: u32| -> Result<(), BackendError> {
            let (mut p, mut n, mut h, mut k) = (big.ptr + offset, bytes, how as i32, sink.ptr);
            let mut st = stride.max(1);
            let mut args: Vec<*mut c_void> = vec![
                arg(&mut p),
                arg(&mut n),
                arg(&mut h),
                arg(&mut k),
                arg(&mut st),
            ];
            launch(prefetch, (sms, 32, 0), streams.0, &mut args)?;
            streams.sync("L2 prefetch")?;
            // A prefetch is done when its kernel ends only as a request; 1 ms lets HBM deliver.
            std::thread::sleep(std::time::Duration::from_millis(1));
            Ok(())
        };
    let prefetch_pages = |bytes: u64, how: usize| prefetch_at(0, bytes, how, 1);
    let mut rows = Vec::new();
    for slots in L2_SLOTS {
        for mib in L2_SIZES_MIB {
            let bytes = mib << 20;
            let (mut cold, mut warm, mut other, mut pre) = (vec![], vec![], vec![], vec![]);
            for _ in 0..L2_REPEATS {
                evict()?;
                cold.push(read_at(0, bytes, slots, 0)?);
                warm.push(read_at(0, bytes, slots, 0)?);
                evict()?;
                read_at(0, bytes, slots, 0)?;
                other.push(read_at(0, bytes, slots, sms / 2)?);
                evict()?;
                prefetch_pages(bytes, 0)?;
                pre.push(read_at(0, bytes, slots, 0)?);
            }
            rows.push(L2Row {
                mib,
                slots,
                cold_gbps: median(cold),
                warm_gbps: median(warm),
                warm_other_gbps: median(other),
                prefetched_gbps: median(pre),
            });
        }
    }
    let mut warmed = Vec::new();
    for how in 0..L2_WARMERS.len() {
        for mib in L2_WARMED_MIB {
            let mut v = vec![];
            for _ in 0..L2_REPEATS {
                evict()?;
                prefetch_pages(mib << 20, how)?;
                v.push(read_at(0, mib << 20, 4, 0)?);
            }
            warmed.push(L2Warmed {
                how,
                mib,
                gbps: median(v),
            });
        }
    }
    let loads = L2_WARMERS.len() - 1; // plain loads: the warmer that works
    let mut mixed = Vec::new();
    for slots in L2_SLOTS {
        let cases = [
            (1, false, 0),
            (2, false, 0),
            (3, false, 0),
            (2, true, 0),
            (4, false, 2),
            (4, false, 4),
        ];
        for (warm_quarters, last, stride) in cases {
            let mut v = vec![];
            let (total, warm) = (L2_MIXED_MIB << 20, (L2_MIXED_MIB << 20) / 4 * warm_quarters);
            for _ in 0..L2_REPEATS {
                evict()?;
                // Pages are dealt to CTAs in turn, so a prefix of the buffer is every CTA's
                // first pages and a suffix its last.
                prefetch_at(if last { total - warm } else { 0 }, warm, loads, stride)?;
                v.push(read_at(0, total, slots, 0)?);
            }
            mixed.push(L2Mixed {
                slots,
                warm_quarters,
                last,
                stride,
                gbps: median(v),
            });
        }
    }
    Ok(L2Probe {
        rows,
        warmed,
        mixed,
    })
}

#[cfg(test)]
mod tests {
    use super::read_rate;

    #[test]
    fn the_read_rate_spans_the_earliest_issue_to_the_latest_landing() {
        // Two CTAs: 1000..3000 and 1500..5000 ns; 8000 bytes over 4000 ns = 2 GB/s.
        let records = [7, 1000, 3000, 9, 1500, 5000];
        assert_eq!(read_rate(&records, 8000), 2.0);
        // A read that ended as it began is not infinitely fast.
        assert_eq!(read_rate(&[0, 10, 10], 5), 5.0);
    }
}
