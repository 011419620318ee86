//! Does the way an operator's pages are dealt to SMs change how fast HBM delivers them? mkc's
//! plans give each SM one contiguous run of an operator's pages; the bandwidth floor's kernel
//! sweeps the buffer with the whole grid. Both deals are read here on the operators' sizes,
//! with the per-CTA times that say whether one SM's share ends the read (the LM head's tail).

use super::super::device::{DevBuf, Gpu};
use super::super::median;
use super::{read_pages, read_u64s, span_ns, Deal, ProbeModule, StreamPair};
use crate::error::BackendError;

/// One size, ring depth, deal and buffer offset (medians of [`PARTITION_REPEATS`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionRow {
    /// Bytes read (MiB).
    pub mib: u64,
    /// Bulk copies of 16 KiB in flight per CTA.
    pub slots: i32,
    /// How the pages were dealt.
    pub deal: Deal,
    /// Where the read starts in the probe's buffer (MiB): another placement in HBM.
    pub offset_mib: u64,
    /// GB/s from the earliest issue to the latest landing.
    pub gbps: f64,
    /// Per-CTA time from its first issue to its last landing (µs): fastest, median, slowest.
    pub cta_us: [f64; 3],
}

/// What the partition probe measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionProbe {
    /// Every size, depth, deal and offset.
    pub rows: Vec<PartitionRow>,
}

/// Each measurement is repeated this many times; the median is kept.
pub const PARTITION_REPEATS: usize = 5;

/// Sizes read (MiB): down (32), up/gate (64) and the LM head (501) of Llama-3.2-1B.
const PARTITION_MIB: [u64; 3] = [32, 64, 501];
/// Ring depths: the chain's 8 and the persistent kernel's 10.
const PARTITION_SLOTS: [i32; 2] = [8, 10];
/// Offsets of the read in the buffer (MiB).
const PARTITION_OFFSETS_MIB: [u64; 2] = [0, 512];

/// Fastest, median and slowest per-CTA span (µs) of records (SM, first issue ns, last landing
/// ns); CTAs that read nothing (start = end) are left out.
fn cta_spread(records: &[u64]) -> [f64; 3] {
    let mut us: Vec<f64> = records
        .chunks(3)
        .filter(|c| c[2] > c[1])
        .map(|c| (c[2] - c[1]) as f64 / 1e3)
        .collect();
    if us.is_empty() {
        return [0.0; 3];
    }
    us.sort_by(f64::total_cmp);
    [us[0], us[us.len() / 2], us[us.len() - 1]]
}

/// Runs the partition probe (kernel `k_read_pages` of the compiled `cubin`).
pub fn probe_partition(gpu: &Gpu, cubin: &[u8]) -> Result<PartitionProbe, BackendError> {
    let module = ProbeModule::load(cubin)?;
    let deepest = PARTITION_SLOTS.iter().copied().max().unwrap_or(8);
    let read = module.kernel_with_smem("k_read_pages", deepest as u32 * 16384)?;
    let streams = StreamPair::new()?;
    let region = 520u64 << 20;
    let buf = DevBuf::new(
        (PARTITION_OFFSETS_MIB[1] << 20) as usize + region as usize,
        "partition probe buffer",
    )?;
    let sms = gpu.sms as u32;
    let rec = DevBuf::new(sms as usize * 3 * 8, "partition records")?;
    let mut rows = Vec::new();
    for mib in PARTITION_MIB {
        for slots in PARTITION_SLOTS {
            for offset_mib in PARTITION_OFFSETS_MIB {
                for deal in [Deal::Interleaved, Deal::Contiguous] {
                    let (mut rates, mut spreads) = (vec![], vec![[0.0; 3]; 0]);
                    for _ in 0..PARTITION_REPEATS {
                        // Evict L2 by reading the other half of the buffer first.
                        let other = if offset_mib == 0 {
                            PARTITION_OFFSETS_MIB[1]
                        } else {
                            0
                        };
                        let evict = (buf.ptr + (other << 20), 256 << 20);
                        read_pages(read, &streams, evict, 8, 0, Deal::Interleaved, rec.ptr, sms)?;
                        let at = (buf.ptr + (offset_mib << 20), mib << 20);
                        read_pages(read, &streams, at, slots, 0, deal, rec.ptr, sms)?;
                        let r = read_u64s(rec.ptr, sms as usize * 3, "partition probe read")?;
                        rates.push((mib << 20) as f64 / span_ns(&r).max(1) as f64);
                        spreads.push(cta_spread(&r));
                    }
                    let stat = |i: usize| median(spreads.iter().map(|s| s[i]).collect());
                    rows.push(PartitionRow {
                        mib,
                        slots,
                        deal,
                        offset_mib,
                        gbps: median(rates),
                        cta_us: [stat(0), stat(1), stat(2)],
                    });
                }
            }
        }
    }
    Ok(PartitionProbe { rows })
}

#[cfg(test)]
mod tests {
    use super::cta_spread;

    #[test]
    fn the_spread_is_fastest_median_slowest_of_the_ctas_that_read() {
        // Three CTAs: 2, 4 and 1 µs; a fourth read nothing and is left out.
        let records = [0, 0, 2000, 1, 1000, 5000, 2, 500, 1500, 3, 7, 7];
        assert_eq!(cta_spread(&records), [1.0, 2.0, 4.0]);
        assert_eq!(cta_spread(&[3, 7, 7]), [0.0; 3]);
    }
}
