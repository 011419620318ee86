//! Two matvec engines alone, side by side on the operators' shapes: rows streamed by plain
//! 16-byte loads into registers, against the operators' engine in miniature (bulk copies into
//! a shared-memory ring). Plain loads keep L2 hits at idle latency at ~3.9 TB/s where bulk
//! copies reach ~4.7 TB/s at 7x the latency (`mkc probe latency`); this says what each costs
//! alone, with the result checked against the CPU.

use cudarc::driver::result;

use super::super::device::{fill_bytes, upload, DevBuf, Gpu};
use super::super::launch::arg;
use super::super::median;
use super::{
    launch, read_pages, read_u64s, span_ns, values, Deal, ProbeModule, StreamPair, EVICT_BYTES,
};
use crate::error::{check, BackendError};
use crate::reference::{self, rel_l2};
use crate::weights::f2bf;

/// The shapes: (operator, rows, K).
pub const MATVEC_SHAPES: [(&str, u32, u32); 5] = [
    ("O-projection", 2048, 2048),
    ("QKV", 3072, 2048),
    ("up/gate", 16384, 2048),
    ("down", 2048, 8192),
    ("LM head", 128256, 2048),
];

/// Runs of each engine per shape; the median is kept.
pub const MATVEC_REPEATS: usize = 5;

/// One shape, both engines (µs from the first CTA's start to the last CTA's end, cold L2).
#[derive(Clone, Debug, PartialEq)]
pub struct MatvecRow {
    /// Operator whose shape this is.
    pub name: &'static str,
    /// Rows of W.
    pub rows: u32,
    /// Columns of W.
    pub k: u32,
    /// Plain loads: median µs.
    pub loads_us: f64,
    /// Plain loads: relative L2 error of y against the CPU.
    pub loads_err: f64,
    /// Bulk copies into a ring: median µs.
    pub bulk_us: f64,
    /// Bulk copies: relative L2 error of y against the CPU.
    pub bulk_err: f64,
}

/// Shared memory of the bulk-copy engine: barriers, x, an 8-page ring.
fn bulk_smem(k: u32) -> u32 {
    128 + k * 4 + 8 * 16384
}

/// Runs the matvec probe (kernels `k_mv_loads_<K>`, `k_mv_bulk_<K>` and `k_read_pages`).
pub fn probe_matvec(gpu: &Gpu, cubin: &[u8]) -> Result<Vec<MatvecRow>, BackendError> {
    let module = ProbeModule::load(cubin)?;
    let evict_kernel = module.kernel("k_read_pages")?;
    let streams = StreamPair::new()?;
    let sms = gpu.sms as u32;
    let max_elems = MATVEC_SHAPES
        .iter()
        .map(|&(_, r, k)| r as usize * k as usize)
        .max()
        .unwrap_or(0);
    let w_host: Vec<u16> = values(max_elems, 7).map(f2bf).collect();
    let x_host: Vec<f32> = values(8192, 11).collect();
    let w = DevBuf::new(max_elems * 2, "matvec weights")?;
    let x = DevBuf::new(8192 * 4, "matvec x")?;
    let max_rows = MATVEC_SHAPES.iter().map(|s| s.1).max().unwrap_or(0) as usize;
    let y = DevBuf::new(max_rows * 4, "matvec y")?;
    let rec = DevBuf::new(sms as usize * 3 * 8, "matvec records")?;
    let evict_buf = DevBuf::new(EVICT_BYTES as usize, "matvec evict buffer")?;
    upload(w.ptr, &w_host, "matvec weights")?;
    upload(x.ptr, &x_host, "matvec x")?;
    let evict = || {
        read_pages(
            evict_kernel,
            &streams,
            (evict_buf.ptr, EVICT_BYTES),
            8,
            0,
            Deal::Interleaved,
            rec.ptr,
            sms,
        )
    };
    let mut rows_out = Vec::new();
    for (name, rows, k) in MATVEC_SHAPES {
        let loads = module.kernel_with_smem(&format!("k_mv_loads_{k}"), k * 4)?;
        let bulk = module.kernel_with_smem(&format!("k_mv_bulk_{k}"), bulk_smem(k))?;
        // The CPU reference's y from the same bf16 weights.
        let want = reference::matvec(
            &w_host[..(rows * k) as usize],
            &x_host[..k as usize],
            rows as usize,
        );
        let run = |f, threads: u32, smem: u32| -> Result<(f64, f64), BackendError> {
            let mut times = Vec::with_capacity(MATVEC_REPEATS);
            for _ in 0..MATVEC_REPEATS {
                // Poisoned before each run: a row the kernel skips shows as NaN.
                fill_bytes(y.ptr, 0xFF, rows as usize * 4, "matvec y")?;
                evict()?;
                let (mut wp, mut xp, mut yp, mut n, mut r) =
                    (w.ptr, x.ptr, y.ptr, rows as i32, rec.ptr);
                let mut args = vec![
                    arg(&mut wp),
                    arg(&mut xp),
                    arg(&mut yp),
                    arg(&mut n),
                    arg(&mut r),
                ];
                launch(f, (sms, threads, smem), streams.0, &mut args)?;
                streams.sync(name)?;
                let t = read_u64s(rec.ptr, sms as usize * 3, name)?;
                times.push(span_ns(&t) as f64 / 1000.0);
            }
            let mut got = vec![0f32; rows as usize];
            // SAFETY: y holds at least `rows` f32; the stream is idle.
            check(
                unsafe { result::memcpy_dtoh_sync(&mut got, y.ptr) },
                "cuMemcpyDtoH",
                name,
            )?;
            Ok((median(times), rel_l2(&got, &want)))
        };
        let (loads_us, loads_err) = run(loads, 512, k * 4)?;
        let (bulk_us, bulk_err) = run(bulk, 288, bulk_smem(k))?;
        rows_out.push(MatvecRow {
            name,
            rows,
            k,
            loads_us,
            loads_err,
            bulk_us,
            bulk_err,
        });
    }
    Ok(rows_out)
}
