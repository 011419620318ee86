//! How fast each SM streams while every SM streams (`mkc probe sm-speeds`): one CTA per SM
//! keeps a persistent ring's worth of 16 KiB bulk copies in flight from HBM for a fixed time,
//! as the persistent kernel's producer does, and reports each SM's bytes per ns by its `%smid`.
//! On an H100 12 SMs (six whole TPCs) stream 1.38x the mean, the same ones in every run; on an
//! H200 12 stream 1.235x. Dealing the persistent target's tasks by these speeds was measured
//! slower (docs/perf.md, leases AD and AE), since its step is paced by page math after each wait
//! rather than by the stream.

use std::ffi::c_void;

use super::super::device::{DevBuf, Gpu};
use super::super::launch::arg;
use super::super::median;
use super::{launch, read_u64s, ProbeModule, StreamPair};
use crate::error::BackendError;

/// Repeats of the timed stream; each SM's median rate is kept.
pub const SM_SPEED_REPEATS: usize = 7;
/// How long each repeat streams, ns: long against a copy's latency and the stragglers' start.
const STREAM_NS: u64 = 2_000_000;
/// Bulk copies in flight per SM: the persistent kernel's ring on Llama-3.2-1B (11 slots).
pub const SM_SPEED_SLOTS: i32 = 11;
/// The buffer streamed: far larger than L2, so every copy reads HBM.
const BUFFER_BYTES: u64 = 1 << 30;

/// What the probe measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SmSpeedProbe {
    /// Each SM's `%smid`, ascending.
    pub smids: Vec<u32>,
    /// Each SM's median rate, GB/s, in the order of `smids`.
    pub gbps: Vec<f64>,
    /// The whole GPU's rate per repeat, GB/s (the sum of the SMs').
    pub total_gbps: Vec<f64>,
}

/// Median rate per SM, by ascending `%smid`, of repeats of records (SM, bytes, ns) per CTA;
/// an error if a repeat's SMs are not the first one's, each once.
pub fn rates_by_sm(repeats: &[Vec<u64>]) -> Result<(Vec<u32>, Vec<f64>), BackendError> {
    let ids = |r: &[u64]| {
        let mut v: Vec<u32> = r.chunks(3).map(|c| c[0] as u32).collect();
        v.sort_unstable();
        v
    };
    let smids = repeats.first().map(|r| ids(r)).unwrap_or_default();
    if smids.windows(2).any(|w| w[0] == w[1]) || repeats.iter().any(|r| ids(r) != smids) {
        return Err(BackendError::Unsupported(
            "the SM speed probe's CTAs did not run one per SM, on the same SMs every repeat".into(),
        ));
    }
    let gbps = smids
        .iter()
        .map(|&sm| {
            median(
                repeats
                    .iter()
                    .filter_map(|r| r.chunks(3).find(|c| c[0] as u32 == sm))
                    .map(|c| c[1] as f64 / c[2].max(1) as f64)
                    .collect(),
            )
        })
        .collect();
    Ok((smids, gbps))
}

/// Runs the SM speed probe (kernel `k_stream_tma` of the compiled probe `cubin`).
pub fn probe_sm_speeds(gpu: &Gpu, cubin: &[u8]) -> Result<SmSpeedProbe, BackendError> {
    let module = ProbeModule::load(cubin)?;
    let smem = SM_SPEED_SLOTS as u32 * 16384;
    let f = module.kernel_with_smem("k_stream_tma", smem)?;
    let streams = StreamPair::new()?;
    let buf = DevBuf::new(BUFFER_BYTES as usize, "SM speed probe buffer")?;
    let sms = gpu.sms as u32;
    let rec = DevBuf::new(sms as usize * 3 * 8, "SM speed records")?;
    let mut repeats = Vec::with_capacity(SM_SPEED_REPEATS);
    let mut total_gbps = Vec::with_capacity(SM_SPEED_REPEATS);
    for _ in 0..SM_SPEED_REPEATS {
        let (mut p, mut n, mut dur, mut r, mut slots) =
            (buf.ptr, BUFFER_BYTES, STREAM_NS, rec.ptr, SM_SPEED_SLOTS);
        let mut args: Vec<*mut c_void> = vec![
            arg(&mut p),
            arg(&mut n),
            arg(&mut dur),
            arg(&mut r),
            arg(&mut slots),
        ];
        // More than half an SM's shared memory per CTA: one CTA per SM.
        launch(f, (sms, 32, smem), streams.0, &mut args)?;
        streams.sync("k_stream_tma")?;
        let r = read_u64s(rec.ptr, sms as usize * 3, "SM speed records")?;
        total_gbps.push(r.chunks(3).map(|c| c[1] as f64 / c[2].max(1) as f64).sum());
        repeats.push(r);
    }
    let (smids, gbps) = rates_by_sm(&repeats)?;
    Ok(SmSpeedProbe {
        smids,
        gbps,
        total_gbps,
    })
}

#[cfg(test)]
mod tests {
    use super::rates_by_sm;

    #[test]
    fn each_sm_gets_its_median_rate_by_ascending_id() {
        // Two SMs (ids 7 and 3) over three repeats: bytes / ns.
        let repeats = vec![
            vec![7, 300, 100, 3, 100, 100],
            vec![3, 200, 100, 7, 600, 100],
            vec![7, 900, 100, 3, 400, 100],
        ];
        let (ids, gbps) = rates_by_sm(&repeats).unwrap();
        assert_eq!(ids, vec![3, 7]);
        assert_eq!(gbps, vec![2.0, 6.0]);
    }

    #[test]
    fn a_repeat_on_other_sms_or_two_ctas_on_one_sm_is_refused() {
        assert!(rates_by_sm(&[vec![1, 1, 1, 2, 1, 1], vec![1, 1, 1, 3, 1, 1]]).is_err());
        assert!(rates_by_sm(&[vec![1, 1, 1, 1, 1, 1]]).is_err());
    }
}
