//! How long the operators' page loop takes over pages that have already landed: consumer warps
//! computing weight pages held in shared memory, alone or beside a warp that keeps bulk copies
//! landing in the same shared memory (as a producer fills its ring). The
//! simulator charges each consumer warp `page_compute_ns` per page, and the persistent step's
//! `compute` rung (103 µs, docs/perf.md) says the page math after each wait is on its critical
//! path; this measures the loop itself (kernel `k_page_math` of the operators' own build, the
//! code every streaming body inlines: the O-projection's K groups, in registers or, past 8
//! groups, taken in blocks from an input staged in shared memory; and, for 4-row pages of
//! 2,048 columns, the tensor-core loop every operator of that shape runs), checked against
//! the CPU.

use cudarc::driver::result;

use super::super::device::{fill_bytes, upload, DevBuf, Gpu};
use super::super::launch::arg;
use super::super::median;
use super::{launch, read_u64s, values, ProbeModule, StreamPair, RESIDENT_SMEM};
use crate::abi::{self, PageInput};
use crate::error::{check, BackendError};
use crate::reference::{self, rel_l2};
use crate::weights::f2bf;
use mkc_ir::{Model, OpKind};

/// Consumer warps and pages per CTA measured: one page on one warp (a page's latency), two on
/// one (a warp's throughput), one page per sub-partition, one per consumer warp of the
/// persistent kernel (7) and of a chain kernel (8), and the persistent kernel's full ring of 10
/// pages after a wait.
pub const PAGE_MATH_CASES: [(u32, u32); 6] = [(1, 1), (1, 2), (4, 4), (7, 7), (8, 8), (7, 10)];

/// The cases run again beside a streaming warp (at most 7 computing warps: the eighth streams).
pub const PAGE_MATH_STREAM_CASES: [(u32, u32); 4] = [(1, 1), (4, 4), (7, 7), (7, 10)];

/// Launches of each case; the median is kept.
pub const PAGE_MATH_REPEATS: usize = 5;

/// Bulk copies of one page the streaming warp keeps in flight.
const STREAM_SLOTS: u32 = 3;

/// The buffer the streaming warp reads (from HBM: far larger than L2).
const STREAM_BYTES: usize = 256 << 20;

/// Warps of `k_page_math`'s CTA.
const PROBE_WARPS: usize = 8;

/// Words per CTA in `k_page_math`'s records: NJ, rows per page, the streamer's bytes landed and
/// ns, then (start ns, end ns, start cycle, end cycle) for each warp.
const RECORD_WORDS: usize = 4 + 4 * PROBE_WARPS;

/// One case: `warps` consumer warps over `pages` landed pages, with the input and loop that
/// `input` says.
#[derive(Clone, Debug, PartialEq)]
pub struct PageMathRow {
    /// Consumer warps computing.
    pub warps: u32,
    /// Pages in shared memory, dealt to the warps in turn.
    pub pages: u32,
    /// Where the loop's input comes from, and so which loop runs: the FMA loop's slice loaded
    /// before the span or inside it (never inside for a blocked loop, whose input is staged in
    /// shared memory before it), or the tensor-core loop's staged fragments.
    pub input: PageInput,
    /// Whether a warp of the CTA kept bulk copies landing in its shared memory meanwhile.
    pub beside_stream: bool,
    /// That stream's rate per SM (GB/s; 0 without one), median over CTAs and launches.
    pub stream_gbps: f64,
    /// Median over CTAs and launches of the CTA's span, first warp's start to last warp's end
    /// (ns).
    pub cta_ns: f64,
    /// The same span in SM cycles (clock64).
    pub cta_cycles: f64,
    /// Slowest CTA's span (ns), median over launches.
    pub slowest_ns: f64,
    /// Relative L2 error of every CTA's row sums against the CPU, the worst launch.
    pub err: f64,
}

/// What the page-math probe measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PageMathProbe {
    /// 256-column groups of the loop's K chunk (its columns / 256); past 8, the loop takes its
    /// input from shared memory in blocks; 0, the loop in which each lane owns whole rows
    /// (attention inside the O-projection).
    pub k_groups: u32,
    /// Columns of a page row: the K chunk.
    pub k: u32,
    /// Rows of a page.
    pub rows_per_page: u32,
    /// Bytes of a page.
    pub page_bytes: u32,
    /// The seed of the weights and input (fresh per run).
    pub seed: u32,
    /// Every case: each input placement (registers, L2 in span, the tensor cores; only the first
    /// for a blocked loop, not the last unless the pages are 2,048 columns), then beside a
    /// stream (registers).
    pub rows: Vec<PageMathRow>,
}

/// Each CTA's span from its first warp's start to its last warp's end, in ns and in cycles,
/// over its first `warps` warps.
fn cta_spans(records: &[u64], warps: usize) -> (Vec<f64>, Vec<f64>) {
    records
        .chunks(RECORD_WORDS)
        .map(|r| {
            let w = &r[4..4 + 4 * warps];
            let span = |lo: usize, hi: usize| {
                let start = w.chunks(4).map(|m| m[lo]).min().unwrap_or(0);
                let end = w.chunks(4).map(|m| m[hi]).max().unwrap_or(0);
                end.saturating_sub(start) as f64
            };
            (span(0, 1), span(2, 3))
        })
        .unzip()
}

/// The input placements the probe runs for a loop of `k_groups` 256-column groups in pages of
/// `page_rows` rows: registers only for a blocked loop and for the loop in which each lane owns
/// whole rows (`k_groups` 0; the input is staged for both either way); registers and L2 in
/// span otherwise; and the tensor cores where the pages have the one shape that loop takes
/// (`mkc_catalogue::tensor_core_shape`).
pub fn page_inputs(k_groups: u32, page_rows: u32) -> Vec<PageInput> {
    match k_groups {
        g if g > 8 || g == 0 => vec![PageInput::Registers],
        g if mkc_catalogue::tensor_core_shape(g * 256, page_rows) => PageInput::ALL.to_vec(),
        _ => vec![PageInput::Registers, PageInput::L2InSpan],
    }
}

/// The O-projection's page loop as `model`'s build compiles it: its K groups (the generated
/// `K_GROUPS_O_PROJ`; 0 for the loop in which each lane owns whole rows, attention inside the
/// O-projection), its K chunk's columns and its rows per page.
fn o_projection_loop(model: &Model) -> Result<(u32, u32, u32), BackendError> {
    let work = mkc_ir::work::matvec(model, OpKind::OProj).ok_or_else(|| {
        BackendError::Unsupported(format!("{} has no O-projection to probe", model.name))
    })?;
    let groups = if model.lowering.attention_in_o_proj.is_some() {
        0
    } else {
        abi::k_groups(work.k)
    };
    Ok((groups, work.k, work.page_rows()))
}

/// Runs the page-math probe with kernel `k_page_math` of `cubin` (the operator build of mkc.cu
/// for `model`), one CTA per SM, on weights and input from `seed`.
pub fn probe_page_math(
    gpu: &Gpu,
    cubin: &[u8],
    model: &Model,
    seed: u32,
) -> Result<PageMathProbe, BackendError> {
    let (k_groups, k, rows_per_page) = o_projection_loop(model)?;
    let page_bytes = model.lowering.page_bytes;
    let k = k as usize;
    let module = ProbeModule::load(cubin)?;
    let most_pages = PAGE_MATH_CASES
        .iter()
        .chain(&PAGE_MATH_STREAM_CASES)
        .map(|c| c.1)
        .max()
        .unwrap_or(1);
    // The pages, a blocked loop's staged input after them, the streamer's slots and their
    // mbarriers, and at least RESIDENT_SMEM, so that each CTA has an SM to itself.
    let smem = |pages: u32, stream: bool| {
        let slots = if stream { STREAM_SLOTS } else { 0 };
        ((pages + slots) * page_bytes + k as u32 * 4 + slots * 8).max(RESIDENT_SMEM)
    };
    let kernel = module.kernel_with_smem("k_page_math", smem(most_pages, true))?;
    let stream_buf = DevBuf::new(STREAM_BYTES, "page-math stream")?;
    let streams = StreamPair::new()?;
    let sms = gpu.sms as u32;
    let elems = (most_pages * page_bytes / 2) as usize;
    let w_host: Vec<u16> = values(elems, seed).map(f2bf).collect();
    let x_host: Vec<f32> = values(k, seed.wrapping_add(1)).collect();
    // Page i's rows start at i * page_bytes, one K chunk each (a page may hold fewer bytes of
    // rows than its size).
    let page_row = |i: usize, r: usize| {
        let at = i * page_bytes as usize / 2 + r * k;
        &w_host[at..at + k]
    };
    let w = DevBuf::new(elems * 2, "page-math weights")?;
    let x = DevBuf::new(x_host.len() * 4, "page-math x")?;
    upload(w.ptr, &w_host, "page-math weights")?;
    upload(x.ptr, &x_host, "page-math x")?;
    let y_len = (sms * most_pages * rows_per_page) as usize;
    let y = DevBuf::new(y_len * 4, "page-math y")?;
    let rec = DevBuf::new(sms as usize * RECORD_WORDS * 8, "page-math records")?;
    let mut rows = Vec::new();
    let placements = page_inputs(k_groups, rows_per_page);
    let cases = placements
        .iter()
        .flat_map(|&x| PAGE_MATH_CASES.iter().map(move |&(w, p)| (w, p, x, false)))
        .chain(
            PAGE_MATH_STREAM_CASES
                .iter()
                .map(|&(w, p)| (w, p, PageInput::Registers, true)),
        );
    for (warps, pages, input, beside_stream) in cases {
        let (mut ns, mut cycles, mut slowest, mut err) = (vec![], vec![], vec![], 0f64);
        let mut gbps = Vec::new();
        for _ in 0..PAGE_MATH_REPEATS {
            // Poisoned before each launch: a row the kernel skips shows as NaN.
            fill_bytes(y.ptr, 0xFF, y_len * 4, "page-math y")?;
            fill_bytes(
                rec.ptr,
                0,
                sms as usize * RECORD_WORDS * 8,
                "page-math records",
            )?;
            let (mut wp, mut xp, mut yp, mut rp) = (w.ptr, x.ptr, y.ptr, rec.ptr);
            let (mut np, mut nw, mut xs) = (pages as i32, warps as i32, input.value());
            let mut sp = if beside_stream { stream_buf.ptr } else { 0 };
            let mut spages = (STREAM_BYTES / page_bytes as usize) as i32;
            let (mut slots, mut words) = (STREAM_SLOTS as i32, RECORD_WORDS as i32);
            let mut args = vec![
                arg(&mut wp),
                arg(&mut xp),
                arg(&mut yp),
                arg(&mut np),
                arg(&mut nw),
                arg(&mut xs),
                arg(&mut sp),
                arg(&mut spages),
                arg(&mut slots),
                arg(&mut rp),
                arg(&mut words),
            ];
            let threads = (32 * PROBE_WARPS) as u32;
            launch(
                kernel,
                (sms, threads, smem(pages, beside_stream)),
                streams.0,
                &mut args,
            )?;
            streams.sync("k_page_math")?;
            let r = read_u64s(rec.ptr, sms as usize * RECORD_WORDS, "page-math records")?;
            if (r[0], r[1]) != (k_groups as u64, rows_per_page as u64) {
                return Err(BackendError::Unsupported(format!(
                        "k_page_math ran a loop of {} column groups and {} rows per page; the model's O-projection has {k_groups} and {rows_per_page}",
                        r[0], r[1]
                    )));
            }
            if beside_stream {
                // Bytes per ns are GB/s.
                gbps.extend(
                    r.chunks(RECORD_WORDS)
                        .map(|c| c[2] as f64 / c[3].max(1) as f64),
                );
            }
            let (n, c) = cta_spans(&r, warps as usize);
            slowest.push(n.iter().copied().fold(0.0, f64::max));
            ns.extend(n);
            cycles.extend(c);
            // Every CTA's rows against the CPU's, on the same bf16 weights.
            let page_rows = (pages * rows_per_page) as usize;
            let w_rows: Vec<u16> = (0..pages as usize)
                .flat_map(|i| (0..rows_per_page as usize).flat_map(move |r| page_row(i, r)))
                .copied()
                .collect();
            let want = reference::matvec(&w_rows, &x_host, page_rows);
            let mut got = vec![0f32; sms as usize * page_rows];
            // SAFETY: y holds at least sms * page_rows f32; the stream is idle.
            check(
                unsafe { result::memcpy_dtoh_sync(&mut got, y.ptr) },
                "cuMemcpyDtoH",
                "page-math y",
            )?;
            for cta in got.chunks(page_rows) {
                err = err.max(rel_l2(cta, &want));
            }
        }
        rows.push(PageMathRow {
            warps,
            pages,
            input,
            beside_stream,
            stream_gbps: if gbps.is_empty() { 0.0 } else { median(gbps) },
            cta_ns: median(ns),
            cta_cycles: median(cycles),
            slowest_ns: median(slowest),
            err,
        });
    }
    Ok(PageMathProbe {
        k_groups,
        k: k as u32,
        rows_per_page,
        page_bytes,
        seed,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tensor_core_loop_is_probed_only_on_2048_column_pages() {
        assert_eq!(page_inputs(12, 2), vec![PageInput::Registers]);
        // The loop in which each lane owns whole rows stages its input, as a blocked one does.
        assert_eq!(page_inputs(0, 128), vec![PageInput::Registers]);
        let fma = vec![PageInput::Registers, PageInput::L2InSpan];
        assert_eq!(page_inputs(4, 8), fma);
        assert_eq!(page_inputs(8, 8), fma, "8 rows a page: the FMA loop");
        assert_eq!(page_inputs(8, 2), fma, "2 rows a page: the FMA loop");
        assert_eq!(page_inputs(8, 4).len(), 3);
        assert!(page_inputs(8, 4).contains(&PageInput::TensorCores));
    }

    #[test]
    fn a_cta_span_runs_from_its_first_warp_start_to_its_last_warp_end() {
        let mut rec = vec![0u64; 2 * RECORD_WORDS];
        // CTA 0: warp 0 100..400 ns, warp 1 150..700 ns; cycles 10..20 and 5..50.
        rec[4..12].copy_from_slice(&[100, 400, 10, 20, 150, 700, 5, 50]);
        // CTA 1: one warp 0..90, and a second warp not counted when one warp is asked for.
        rec[RECORD_WORDS + 4..RECORD_WORDS + 12].copy_from_slice(&[0, 90, 0, 9, 0, 5000, 0, 1]);
        let (ns, cycles) = cta_spans(&rec, 2);
        assert_eq!(ns, vec![600.0, 5000.0]);
        assert_eq!(cycles, vec![45.0, 9.0]);
        let (ns, _) = cta_spans(&rec, 1);
        assert_eq!(ns, vec![300.0, 90.0]);
    }
}
