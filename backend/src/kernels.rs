//! The operator kernels: their source, NVRTC compilation to a cubin (exact register counts, no
//! JIT), and what ptxas reports about each (registers, shared memory, spills).
//!
//! NVRTC runs on the CPU, so `mkc kernels` works on a machine without a GPU.

use std::ffi::{c_char, CString};

use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use mkc_ir::{Model, OpKind, Tuning};
use serde::Serialize;

use crate::error::BackendError;

/// The CUDA source of every operator.
pub const SOURCE: &str = include_str!("../kernels/mkc.cu");

/// Threads per CTA of the streaming matvec kernels (the source's `THREADS`): eight consumer
/// warps and one producer warp.
pub const THREADS: u32 = (CONSUMER_WARPS + 1) * 32;

/// Threads per CTA of the attention kernel (the source's `ATT_THREADS` default).
pub const ATT_THREADS: u32 = 512;

/// Threads per attention CTA as built: [`ATT_THREADS`], or `tuning.att_threads` (validated:
/// 128-1024, a multiple of 128; a smaller CTA, capped at 72 registers, fits beside a QKV or
/// O-projection CTA).
pub fn att_threads(t: &Tuning) -> u32 {
    t.att_threads.unwrap_or(ATT_THREADS)
}

/// Bytes of one weight page (passed to the source as `-DPAGE_BYTES`). 8 KiB pages measured
/// ~15% slower on the H200 (docs/perf.md).
pub const PAGE_BYTES: u32 = 16384;

/// Most ring slots a streaming kernel may use (the source's `MAX_SLOTS`).
pub const MAX_SLOTS: u32 = 16;

/// Bytes before a streaming CTA's input vector in its shared memory (the source's
/// `carve_stream`): the full and empty mbarriers of every slot, then the norm mbarrier.
const STREAM_X_OFFSET: u32 = 2 * MAX_SLOTS * 8 + 16;

/// Shared memory a streaming CTA budgets for itself: the whole SM. Halving it so that a
/// successor grid's CTA could be resident early measured 25% slower on the H200
/// (docs/perf.md). `tuning.stream_smem` overrides it.
const STREAM_SMEM_BUDGET: u32 = SMEM_PER_CTA;

/// Consumer warps of a streaming kernel (the source's `CONSUMER_WARPS` default).
pub const CONSUMER_WARPS: u32 = 8;

/// Consumer warps the streaming kernels are built with: [`CONSUMER_WARPS`], or
/// `tuning.consumer_warps` (validated: 1-8; with fewer warps and a smaller ring,
/// `tuning.stream_smem`, two streaming CTAs can share an SM).
pub fn consumer_warps(t: &Tuning) -> u32 {
    t.consumer_warps.unwrap_or(CONSUMER_WARPS)
}

/// Threads per CTA of the streaming kernels as built: the consumer warps and the producer.
pub fn stream_threads(t: &Tuning) -> u32 {
    consumer_warps(t) * 32 + 32
}

/// Shared memory one CTA may use on sm_90 with the opt-in (bytes).
const SMEM_PER_CTA: u32 = 232_448;

/// Shared memory of one SM on sm_90 (228 KiB).
const SMEM_PER_SM: u32 = 233_472;

/// Fewest KV positions attention stages per chunk (the chunk before it was sized to the SM).
const MIN_ATT_CHUNK: u32 = 128;

/// KV positions attention stages per chunk (the kernel derives it from its dynamic shared
/// memory, which [`dynamic_smem`] sizes from this). Attention asks for more than half the SM's
/// shared memory, so that two attention CTAs never share an SM: the block scheduler packs them
/// two to an SM when they fit, and that measured 11 µs per step slower on the anchors' layout
/// (8 CTAs of 4 heads; docs/perf.md). Its registers already keep it off the SMs of QKV and the
/// O-projection. The chunk is what that shared memory holds, a multiple of 32 and at least
/// 128; every chunk after the first costs two more dependent L2 round trips (K and V loaded
/// after a barrier). `tuning.att_chunk` sets it instead (the multi-chunk path on short
/// prompts, or other sizes), within what one CTA may use.
pub fn attention_chunk(model: &Model) -> u32 {
    let per_position = attention_position_smem(model);
    let vectors = attention_vectors_smem(model);
    if let Some(c) = model.tuning.att_chunk {
        // 1 KiB of slack for a traced build's static shared memory.
        let alone = SMEM_PER_CTA.saturating_sub(vectors + 1024) / per_position;
        return c.min(alone).max(1);
    }
    let half = SMEM_PER_SM / 2;
    let chunk = half.saturating_sub(vectors).div_ceil(per_position);
    (chunk.div_ceil(32) * 32).max(MIN_ATT_CHUNK)
}

/// Shared memory attention stages per KV position: a K row padded by 8 elements and a V row.
fn attention_position_smem(model: &Model) -> u32 {
    (2 * model.geometry.head_dim + 8) * 2
}

/// Attention's q and scores in shared memory (bytes): every head of the task, every position.
fn attention_vectors_smem(model: &Model) -> u32 {
    let hp = model.heads_per_attention_task();
    (hp * model.geometry.head_dim + hp * model.workload.max_seq_len) * 4
}

/// Threads per CTA of the kernel for `kind`.
pub fn threads(t: &Tuning, kind: OpKind) -> u32 {
    if kind == OpKind::Attention {
        att_threads(t)
    } else {
        stream_threads(t)
    }
}

/// Threads per CTA of a grid of `ops`: a grid of two operators is a streaming kernel.
pub fn grid_threads(t: &Tuning, ops: GridOps) -> u32 {
    if ops.1.is_some() {
        stream_threads(t)
    } else {
        threads(t, ops.0)
    }
}

/// Threads per CTA of the kernel named `name` (the helper kernels run 256).
pub fn threads_of(t: &Tuning, name: &str) -> u32 {
    grid_entry_points()
        .find(|(n, _)| *n == name)
        .map_or(256, |(_, ops)| grid_threads(t, ops))
}

/// Kernel entry names, in operator order.
pub const ENTRY_POINTS: &[(&str, OpKind)] = &[
    ("k_qkv_rope", OpKind::QkvRope),
    ("k_attention", OpKind::Attention),
    ("k_o_proj", OpKind::OProj),
    ("k_up_gate", OpKind::UpGate),
    ("k_down", OpKind::Down),
    ("k_lm_head", OpKind::LmHead),
];

/// The operators one grid runs: one operator, or a pair sharing one grid (a fused pair meeting
/// at a grid-wide barrier, `mkc_scheduler::Grids::Fused`, or attention folded into the
/// O-projection, `mkc_scheduler::Grids::Folded`).
pub type GridOps = (OpKind, Option<OpKind>);

/// The grid of attention folded into the O-projection.
pub const FOLDED: GridOps = (OpKind::Attention, Some(OpKind::OProj));

/// Kernel entry names of the grids that run two operators, and the pair each runs.
pub const FUSED_ENTRY_POINTS: &[(&str, OpKind, OpKind)] = &[
    ("k_o_up_gate", OpKind::OProj, OpKind::UpGate),
    ("k_down_qkv", OpKind::Down, OpKind::QkvRope),
    ("k_down_lm_head", OpKind::Down, OpKind::LmHead),
    ("k_attention_o_proj", OpKind::Attention, OpKind::OProj),
];

/// Every kernel that runs a grid of a chain: its entry name and operators.
pub fn grid_entry_points() -> impl Iterator<Item = (&'static str, GridOps)> {
    ENTRY_POINTS.iter().map(|&(n, k)| (n, (k, None))).chain(
        FUSED_ENTRY_POINTS
            .iter()
            .map(|&(n, a, b)| (n, (a, Some(b)))),
    )
}

/// The kernel that runs a grid of `ops`, if there is one.
pub fn grid_entry_point(ops: GridOps) -> Option<&'static str> {
    grid_entry_points().find(|(_, o)| *o == ops).map(|(n, _)| n)
}

/// Dynamic shared memory of a grid of `ops` on a GPU of `sms` SMs: a fused grid carves the
/// second operator's layout (the first reads its input from global memory and stages nothing);
/// the folded attention + O-projection grid its own ([`fold_layout`]).
pub fn grid_dynamic_smem(model: &Model, ops: GridOps, sms: u32) -> u32 {
    if ops == FOLDED {
        return fold_layout(model, sms).map_or(0, |f| f.dynamic_smem);
    }
    dynamic_smem(model, ops.1.unwrap_or(ops.0))
}

/// How the folded attention + O-projection grid (`k_attention_o_proj`) is laid out: the
/// O-projection's K chunks are whole KV-head groups (`attention_o_proj` shards), each chunk's
/// pages are shared by `ctas_per_chunk` CTAs, and every CTA stages its chunk's KV heads in
/// chunks of `kv_chunk` positions, sized to fill the shared memory its page ring leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoldLayout {
    /// CTAs per K chunk (the grid has `attention_o_proj` times as many).
    pub ctas_per_chunk: u32,
    /// Query heads of one K chunk.
    pub heads: u32,
    /// KV heads of one K chunk.
    pub kv_heads: u32,
    /// Ring slots (one per consumer warp at most: each CTA has few pages).
    pub ring_slots: u32,
    /// KV positions staged per chunk (the source's `fold_chunk`).
    pub kv_chunk: u32,
    /// Dynamic shared memory, bytes.
    pub dynamic_smem: u32,
}

impl FoldLayout {
    /// The first O-projection page and page count of CTA `b` (mirrors the source's
    /// `attention_o_proj_body`): a balanced share of the pages of K chunk `b / ctas_per_chunk`,
    /// `chunk_pages` pages each.
    pub fn pages_of(&self, chunk_pages: u32, b: u32) -> (u32, u32) {
        let (chunk, sub) = (b / self.ctas_per_chunk, b % self.ctas_per_chunk);
        let at = |s: u32| (s as u64 * chunk_pages as u64 / self.ctas_per_chunk as u64) as u32;
        (chunk * chunk_pages + at(sub), at(sub + 1) - at(sub))
    }
}

/// The folded grid's layout for `model` on `sms` SMs, or why the model cannot fold attention
/// into its O-projection (the error names the field and the fix).
pub fn fold_layout(model: &Model, sms: u32) -> Result<FoldLayout, BackendError> {
    let g = &model.geometry;
    let fail = |field: &str, why: String| {
        Err(BackendError::Unsupported(format!(
            "attention cannot be folded into the O-projection (--grids folded): {field}: {why}"
        )))
    };
    let Some(o) = stream(model, OpKind::OProj) else {
        return fail("lowering", "no O-projection stream".into());
    };
    let group = g.heads / g.kv_heads * g.head_dim;
    if o.k % group != 0 || o.k % 256 != 0 {
        return fail(
            "lowering.vtp_shards.attention_o_proj",
            format!(
                "the O-projection's K chunk of {} columns must hold whole KV-head groups of {group} \
                 columns and be a multiple of 256 (llama1b: 4 shards)",
                o.k
            ),
        );
    }
    let warps = consumer_warps(&model.tuning);
    let heads = o.k / g.head_dim;
    if heads * g.head_dim > 2 * warps * 32 {
        return fail(
            "lowering.vtp_shards.attention_o_proj",
            format!(
                "a K chunk holds {heads} query heads, more outputs than the grid's {} threads \
                 compute; raise the shard count",
                warps * 32
            ),
        );
    }
    let ctas_per_chunk = (sms / o.splits).max(1);
    let chunk_pages = o.pages() / o.splits;
    let ring_slots = chunk_pages.div_ceil(ctas_per_chunk).min(warps);
    let kv_heads = heads / (g.heads / g.kv_heads);
    // Shared memory: [stream header | K and V chunks | q | scores | page ring] (the source's
    // attention_o_proj_body); the KV chunks take what the rest leaves (128: rounding slack).
    let header = Stream {
        x_len: model.q_dim(),
        norm_len: 0,
        ..o
    }
    .ring_offset();
    let ring = ring_slots * PAGE_BYTES;
    let q_and_scores = heads * g.head_dim * 4 + heads * model.workload.max_seq_len * 4;
    let per_position = kv_heads * (2 * g.head_dim + 8) * 2;
    // tuning.fold_chunk caps it (exercises the multi-chunk path on short prompts).
    let cap = model.tuning.fold_chunk.unwrap_or(u32::MAX);
    let room = SMEM_PER_CTA.saturating_sub(header + ring + q_and_scores + 128);
    let kv_chunk = (room / per_position)
        .min(model.workload.max_seq_len)
        .min(cap);
    if kv_chunk < 32 {
        return fail(
            "workload.max_seq_len",
            "the folded grid's scores leave too little shared memory for the KV history; lower \
             max_seq_len or use --grids per-op"
                .into(),
        );
    }
    let att = (kv_chunk * per_position + q_and_scores).div_ceil(128) * 128;
    let dynamic_smem = header + att + ring;
    Ok(FoldLayout {
        ctas_per_chunk,
        heads,
        kv_heads,
        ring_slots,
        kv_chunk,
        dynamic_smem,
    })
}

/// What ptxas reported about one kernel, and the launch shape mkc uses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelInfo {
    /// Entry point.
    pub name: String,
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory, bytes.
    pub static_smem: u32,
    /// Dynamic shared memory for the model, bytes.
    pub dynamic_smem: u32,
    /// Stack frame, bytes.
    pub stack_bytes: u32,
    /// Spill stores, bytes.
    pub spill_store_bytes: u32,
    /// Spill loads, bytes.
    pub spill_load_bytes: u32,
    /// FNV-1a hash of the kernel's machine code (its `.text` section in the cubin; 0 when not
    /// known). Equal hashes mean identical code: a source edit that leaves them equal cannot
    /// change performance, and one that changes them must be measured (docs/perf.md: these
    /// kernels are sensitive to code generation).
    pub code_hash: u64,
}

/// A compiled module.
pub struct Compiled {
    /// The cubin image.
    pub cubin: Vec<u8>,
    /// Per-kernel figures (dynamic shared memory still 0: see [`with_model`]).
    pub kernels: Vec<KernelInfo>,
    /// The compiler log.
    pub log: String,
}

/// Compiles the kernels for `arch` (e.g. `sm_90a`) to a cubin, built for `model`: its
/// tuning knobs and, when its RoPE is scaled, its frequency table.
pub fn compile(arch: &str, model: &Model) -> Result<Compiled, BackendError> {
    compile_with(arch, model, false, &[])
}

/// Compiles the kernels with preprocessor `defines` (name, value) added, e.g. `("WARM_DEPTH",
/// 0)`: a variant of the source's tunables, to compare its code with the default build's.
pub fn compile_with_defines(
    arch: &str,
    model: &Model,
    defines: &[(&str, u32)],
) -> Result<Compiled, BackendError> {
    compile_with(arch, model, false, defines)
}

/// Compiles the kernels with CTA phase tracing compiled in (`-DMKC_TRACE`), for
/// `mkc bench --cta-phases` only: the marks slow every kernel down.
pub fn compile_traced(arch: &str, model: &Model) -> Result<Compiled, BackendError> {
    compile_with(arch, model, true, &[])
}

/// The preprocessor and compiler options `tuning` adds to the default build (none for the
/// default tuning, so that its machine code is the default's).
pub fn tuning_options(t: &Tuning) -> Vec<String> {
    let mut options = Vec::new();
    if let Some(a) = t.att_threads.filter(|&a| a != ATT_THREADS) {
        options.push(format!("-DATT_THREADS={a}"));
        // 72 registers: beside a 9-warp QKV CTA of 120 (docs/perf.md's rule).
        options.push("-DATT_MAXNREG=72".into());
    }
    // How the O-projection and QKV warm L2 with up/gate's pages (the source's WARM_*;
    // warm_depth 0 turns warming off; docs/perf.md, L2 as a weight source).
    for (name, v) in [
        ("DEPTH", t.warm_depth),
        ("SKIP", t.warm_skip),
        ("QKV", t.warm_qkv),
        ("QKV_SKIP", t.warm_qkv_skip),
        ("O", t.warm_o),
    ] {
        if let Some(v) = v {
            options.push(format!("-DWARM_{name}={v}"));
        }
    }
    if let Some(w) = t.consumer_warps.filter(|&w| w != CONSUMER_WARPS) {
        // Two streaming CTAs of 7 warps share an SM only with <= 128 registers each
        // (docs/perf.md: each warp goes to the sub-partition holding the fewest).
        options.push(format!("-DCONSUMER_WARPS={w}"));
        options.push("--maxrregcount=128".into());
    }
    options
}

fn compile_with(
    arch: &str,
    model: &Model,
    traced: bool,
    defines: &[(&str, u32)],
) -> Result<Compiled, BackendError> {
    let tuning = &model.tuning;
    // An edited copy of the source, to try a change without rebuilding (the figures printed
    // then belong to that source).
    let text = match &tuning.kernels_cu {
        Some(path) => {
            mkc_ir::input::read_text(std::path::Path::new(path), mkc_ir::FileKind::Tuning)
                .map_err(|e| BackendError::Compile(format!("tuning.kernels_cu: {e}")))?
        }
        None => SOURCE.to_string(),
    };
    let text = crate::abi::with_header(&text, model)?;
    let mut options = tuning_options(tuning);
    if model.geometry.rope_scaling.is_some() {
        // RoPE's frequencies come from the generated table (Model::rope_freq), not exp2f.
        options.push("-DROPE_TABLE".into());
    }
    if traced {
        options.push("-DMKC_TRACE".to_string());
    }
    options.extend(defines.iter().map(|(name, v)| format!("-D{name}={v}")));
    compile_text(&text, c"mkc.cu", arch, options, tuning)
}

/// The probes' source (`mkc probe coresidency|latency|l2`).
pub const PROBE_SOURCE: &str = include_str!("../kernels/probe.cu");

/// Compiles the probes' kernels (`k_hold_<R>`, `k_chase`, `k_stream`, `k_stream_tma`,
/// `k_read_pages`, `k_prefetch_pages`) for `arch`.
pub fn compile_probe(arch: &str) -> Result<Compiled, BackendError> {
    compile_text(
        PROBE_SOURCE,
        c"probe.cu",
        arch,
        Vec::new(),
        &Tuning::default(),
    )
}

/// Compiles `text` (named `file` in messages) for `arch` with `options` added to mkc's own.
pub(crate) fn compile_text(
    text: &str,
    file: &std::ffi::CStr,
    arch: &str,
    mut options: Vec<String>,
    tuning: &Tuning,
) -> Result<Compiled, BackendError> {
    // SAFETY: probing for the library has no preconditions.
    if !unsafe { nvrtc_sys::is_culib_present() } {
        return Err(BackendError::NoNvrtc);
    }
    let src = CString::new(text)
        .map_err(|_| BackendError::Compile("kernel source holds a NUL byte".into()))?;
    let prog = nvrtc::create_program(&src, Some(file))
        .map_err(|e| BackendError::Compile(format!("{e:?}")))?;
    options.extend([
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "-lineinfo".to_string(),
        "--ptxas-options=-v".to_string(),
    ]);
    // SAFETY: `prog` was just created and is destroyed below exactly once.
    let compiled = unsafe { nvrtc::compile_program(prog, &options) };
    // SAFETY: as above.
    let log = unsafe { nvrtc::get_program_log(prog) }
        .map(|l| c_chars_to_string(&l))
        .unwrap_or_default();
    if compiled.is_err() {
        // SAFETY: as above.
        unsafe { nvrtc::destroy_program(prog) }.ok();
        return Err(BackendError::Compile(log));
    }
    let mut size = 0usize;
    // SAFETY: `prog` compiled successfully; the size pointer is valid.
    let r = unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) };
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` holds `size` bytes as NVRTC asked.
    let r2 = unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char) };
    // SAFETY: destroyed exactly once.
    unsafe { nvrtc::destroy_program(prog) }.ok();
    if r != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS || r2 != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(BackendError::Compile(format!(
            "could not read the cubin ({r:?}, {r2:?})"
        )));
    }
    let mut kernels = parse_ptxas_log(&log, tuning);
    set_code_hashes(&mut kernels, &cubin);
    Ok(Compiled {
        cubin,
        kernels,
        log,
    })
}

/// `(kernel, FNV-1a hash of its code)` for every `.text.<kernel>` section of an ELF64 cubin;
/// empty for anything that does not parse as one.
pub fn text_hashes(cubin: &[u8]) -> Vec<(String, u64)> {
    let at = |o: usize, n: usize| cubin.get(o..o.checked_add(n)?);
    let u16_at = |o: usize| at(o, 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| at(o, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let u64_at = |o: usize| {
        at(o, 8).map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    };
    let parse = || -> Option<Vec<(String, u64)>> {
        if cubin.get(0..5)? != b"\x7fELF\x02" {
            return None;
        }
        let shoff = u64_at(0x28)? as usize;
        let (entsize, count, names) = (
            u16_at(0x3A)? as usize,
            u16_at(0x3C)? as usize,
            u16_at(0x3E)? as usize,
        );
        // (name offset, file offset, size) of section i.
        let section = |i: usize| -> Option<(usize, usize, usize)> {
            let h = shoff.checked_add(i.checked_mul(entsize)?)?;
            Some((
                u32_at(h)? as usize,
                u64_at(h.checked_add(0x18)?)? as usize,
                u64_at(h.checked_add(0x20)?)? as usize,
            ))
        };
        let strtab = section(names)?.1;
        let mut out = Vec::new();
        for i in 0..count {
            let (name, offset, size) = section(i)?;
            let start = strtab.checked_add(name)?;
            let len = cubin.get(start..)?.iter().position(|&b| b == 0)?;
            let name = std::str::from_utf8(&cubin[start..start + len]).ok()?;
            if let Some(kernel) = name.strip_prefix(".text.") {
                let code = cubin.get(offset..offset.checked_add(size)?)?;
                let hash = code.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                    (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
                });
                out.push((kernel.to_string(), hash));
            }
        }
        Some(out)
    };
    parse().unwrap_or_default()
}

/// Fills in each kernel's `code_hash` from `cubin` (the image its figures describe).
pub fn set_code_hashes(kernels: &mut [KernelInfo], cubin: &[u8]) {
    let hashes = text_hashes(cubin);
    for k in kernels {
        if let Some((_, h)) = hashes.iter().find(|(n, _)| *n == k.name) {
            k.code_hash = *h;
        }
    }
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Number before `word` in `line` (e.g. `Used 38 registers` -> 38 for `registers`).
fn number_before(line: &str, word: &str) -> Option<u32> {
    let idx = line.find(word)?;
    line[..idx].split_whitespace().last()?.parse().ok()
}

/// Extracts the per-kernel figures from ptxas's verbose log (threads: as `tuning` builds them).
pub fn parse_ptxas_log(log: &str, tuning: &Tuning) -> Vec<KernelInfo> {
    let mut out: Vec<KernelInfo> = Vec::new();
    let mut current: Option<usize> = None;
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or("").to_string();
            out.push(KernelInfo {
                threads: threads_of(tuning, &name),
                name,
                ..KernelInfo::default()
            });
            current = Some(out.len() - 1);
            continue;
        }
        let Some(i) = current else { continue };
        let k = &mut out[i];
        if let Some(n) = number_before(line, "bytes stack frame") {
            k.stack_bytes = n;
        }
        if let Some(n) = number_before(line, "bytes spill stores") {
            k.spill_store_bytes = n;
        }
        if let Some(n) = number_before(line, "bytes spill loads") {
            k.spill_load_bytes = n;
        }
        if let Some(n) = number_before(line, "registers") {
            k.registers = n;
        }
        if let Some(n) = number_before(line, "bytes smem") {
            k.static_smem = n;
        }
    }
    out.retain(|k| k.name.starts_with("k_"));
    out
}

/// How a streaming matvec operator walks its weights: the geometry the kernel's `matvec()`
/// derives, mirrored here to size grids and shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Columns per page row (the K chunk).
    pub k: u32,
    /// K chunks.
    pub splits: u32,
    /// Output rows per chunk.
    pub out_rows: u32,
    /// A page holds matching rows of two matrices (gate/up).
    pub paired: bool,
    /// Floats of the input vector staged in shared memory.
    pub x_len: u32,
    /// RMSNorm weights (bf16) the producer copies into shared memory first; 0 for none.
    pub norm_len: u32,
    /// Consumer warps of the kernel as built (`tuning.consumer_warps`).
    pub warps: u32,
    /// Shared memory the CTA budgets for itself (`tuning.stream_smem`, else the whole SM).
    pub budget: u32,
}

impl Stream {
    /// Weight pages of one launch.
    pub fn pages(&self) -> u32 {
        self.splits * (self.out_rows / self.page_out())
    }

    /// Matrix rows in one page.
    pub fn page_rows(&self) -> u32 {
        PAGE_BYTES / (2 * self.k.max(1))
    }

    /// Output rows per page (matrix rows per page, halved for gate/up pages).
    pub fn page_out(&self) -> u32 {
        (self.page_rows() / if self.paired { 2 } else { 1 }).max(1)
    }

    /// Shared memory before the ring: barriers, input vector, norm weights, scratch (the
    /// source's `ring_offset`).
    pub fn ring_offset(&self) -> u32 {
        (STREAM_X_OFFSET + self.x_len * 4 + self.norm_len * 2 + 64 * 4).div_ceil(128) * 128
    }

    /// Ring slots per consumer warp: as many as fit the streaming budget, at least one, at
    /// most `MAX_SLOTS / CONSUMER_WARPS`.
    pub fn slots_per_warp(&self) -> u32 {
        let budget = self.budget.min(SMEM_PER_CTA);
        let fit = budget.saturating_sub(self.ring_offset()) / (PAGE_BYTES * self.warps);
        fit.clamp(1, MAX_SLOTS / self.warps)
    }

    /// Dynamic shared memory of the kernel.
    pub fn dynamic_smem(&self) -> u32 {
        self.ring_offset() + self.slots_per_warp() * self.warps * PAGE_BYTES
    }

    /// CTAs to launch: one per SM, never more than there are pages.
    pub fn ctas(&self, sms: u32) -> u32 {
        self.pages().min(sms).max(1)
    }
}

/// Pages `[first, first + count)` of CTA `b` of `g` (the source's `page_range`): contiguous
/// ranges, balanced to within one page.
pub fn page_range(pages: u32, b: u32, g: u32) -> (u32, u32) {
    let first = (b as u64 * pages as u64 / g as u64) as u32;
    let end = ((b as u64 + 1) * pages as u64 / g as u64) as u32;
    (first, end - first)
}

/// Ring slot and lap of a CTA's page `i` (the source's `ring_slot`): page i belongs to consumer
/// warp `i % warps`, which owns `per_warp` slots and takes its pages in order. The parity
/// waits on a slot's barriers are sound only because each slot has one consumer whose laps
/// come in order (tested as a property).
pub fn ring_slot(i: u32, per_warp: u32, warps: u32) -> (u32, u32) {
    let (w, j) = (i % warps, i / warps);
    (w * per_warp + j % per_warp, j / per_warp)
}

/// Ring slot and lap of the `n`-th page a CTA with `count` pages of its own warms L2 with, at
/// most `depth` in flight (the source's `warm_l2`): the slots of the consumer warps that have
/// no page here, so that warming never overwrites a page a consumer reads (tested as a
/// property). None when every warp has a page.
pub fn warm_slot(count: u32, per_warp: u32, depth: u32, warps: u32, n: u32) -> Option<(u32, u32)> {
    if count >= warps || depth == 0 {
        return None;
    }
    let slots = ((warps - count) * per_warp).min(depth);
    Some((count * per_warp + n % slots, n / slots))
}

/// The streaming geometry of a matvec operator (None for attention).
pub fn stream(model: &Model, kind: OpKind) -> Option<Stream> {
    let g = &model.geometry;
    let shards = &model.lowering.vtp_shards;
    let (k, splits, out_rows, paired, x_len, norm_len) = match kind {
        OpKind::Attention => return None,
        OpKind::QkvRope => (g.hidden, 1, model.qkv_rows(), false, g.hidden, g.hidden),
        // The O-projection and down read their inputs from global memory: no staged vector.
        OpKind::OProj => {
            let s = shards.attention_o_proj;
            (model.q_dim() / s, s, g.hidden, false, 0, 0)
        }
        OpKind::UpGate => (g.hidden, 1, g.intermediate, true, g.hidden, g.hidden),
        OpKind::Down => {
            let s = shards.up_gate_down;
            (g.intermediate / s, s, g.hidden, false, 0, 0)
        }
        OpKind::LmHead => (g.hidden, 1, g.vocab, false, g.hidden, g.hidden),
    };
    Some(Stream {
        k,
        splits,
        out_rows,
        paired,
        x_len,
        norm_len,
        warps: consumer_warps(&model.tuning),
        budget: model.tuning.stream_smem.unwrap_or(STREAM_SMEM_BUDGET),
    })
}

/// Dynamic shared memory each operator kernel needs for `model`.
pub fn dynamic_smem(model: &Model, kind: OpKind) -> u32 {
    if let Some(s) = stream(model, kind) {
        return s.dynamic_smem();
    }
    // K chunk (rows padded by 8 elements), V chunk, q, then the scores.
    attention_chunk(model) * attention_position_smem(model) + attention_vectors_smem(model)
}

/// CTAs the backend launches for one grid of `ops`: one per SM for the streaming kernels,
/// one per task for attention. A fused grid always has exactly one CTA per SM: its grid-wide
/// barrier needs every CTA resident at once, which one CTA per SM guarantees.
pub fn grid_ctas(model: &Model, ops: GridOps, tasks: u32, sms: u32) -> u32 {
    if ops == FOLDED {
        let splits = model.lowering.vtp_shards.attention_o_proj;
        return fold_layout(model, sms).map_or(sms, |f| f.ctas_per_chunk * splits);
    }
    if ops.1.is_some() {
        return sms;
    }
    match stream(model, ops.0) {
        // Tuning knobs: fewer O-projection (o_ctas) or QKV (qkv_ctas) CTAs than SMs, so
        // that the grid fits beside attention's CTAs.
        Some(s) => {
            let knob = match ops.0 {
                OpKind::OProj => model.tuning.o_ctas,
                OpKind::QkvRope => model.tuning.qkv_ctas,
                _ => None,
            };
            knob.map_or(s.ctas(sms), |c| s.ctas(sms).min(c))
        }
        None => tasks,
    }
}

/// Fills in the dynamic shared memory of every kernel for `model` on a GPU of `sms` SMs.
pub fn with_model(mut kernels: Vec<KernelInfo>, model: &Model, sms: u32) -> Vec<KernelInfo> {
    for k in &mut kernels {
        if let Some((_, ops)) = grid_entry_points().find(|(n, _)| *n == k.name) {
            k.dynamic_smem = grid_dynamic_smem(model, ops, sms);
        }
    }
    kernels
}

/// Checks the model fits the kernels' assumptions; the error names the field and the fix.
pub fn check_model(model: &Model) -> Result<(), BackendError> {
    let g = &model.geometry;
    let fail = |field: &str, why: String| {
        Err(BackendError::Unsupported(format!(
            "the CUDA backend cannot run this model: {field}: {why}"
        )))
    };
    let hp = model.heads_per_attention_task();
    let att = att_threads(&model.tuning);
    if hp * g.head_dim > 2 * att || !g.head_dim.is_multiple_of(8) {
        return fail(
            "lowering.attention_split",
            format!(
                "{hp} query heads of {} per attention task exceed the kernel's {} outputs \
                 (head_dim must also be a multiple of 8); raise attention_split",
                g.head_dim,
                2 * att
            ),
        );
    }
    if dynamic_smem(model, OpKind::Attention) > SMEM_PER_CTA {
        return fail(
            "workload.max_seq_len",
            "the attention scores do not fit in shared memory; lower max_seq_len".into(),
        );
    }
    for (_, kind) in ENTRY_POINTS {
        let Some(s) = stream(model, *kind) else {
            continue;
        };
        let field = match kind {
            OpKind::OProj => "lowering.vtp_shards.attention_o_proj",
            OpKind::Down => "lowering.vtp_shards.up_gate_down",
            _ => "geometry.hidden",
        };
        // For QKV the chunk is the hidden size, so this also keeps the residual stream within
        // the 2048 floats the kernels' `stage_sum` stages.
        if ![512, 1024, 2048].contains(&s.k) {
            return fail(
                field,
                format!(
                    "{} streams rows of {} columns; the kernels take 512, 1024 or 2048 per K \
                     chunk (choose shards so that the chunk is one of these)",
                    kind.name(),
                    s.k
                ),
            );
        }
        if s.out_rows % s.page_out() != 0 {
            return fail(
                "geometry",
                format!(
                    "{} has {} output rows, not a multiple of the {} rows a 16 KiB page holds",
                    kind.name(),
                    s.out_rows,
                    s.page_out()
                ),
            );
        }
        if s.ring_offset() + s.warps * PAGE_BYTES > SMEM_PER_CTA {
            return fail(
                "geometry",
                format!("{} needs too much shared memory", kind.name()),
            );
        }
    }
    Ok(())
}

/// Replaces the declared CTA resources of a chain schedule's grids with the compiled kernels'
/// (threads, registers, static + dynamic shared memory), so that occupancy and the simulator
/// describe what the backend launches. Returns how many grids were updated.
pub fn apply_to_schedule(schedule: &mut mkc_scheduler::Schedule, infos: &[KernelInfo]) -> usize {
    let kinds: Vec<OpKind> = schedule.graph.ops.iter().map(|o| o.kind).collect();
    let mut updated = 0;
    if let mkc_scheduler::Plan::Chain(plan) = &mut schedule.plan {
        for k in &mut plan.kernels {
            let ops = (kinds[k.op.index()], k.then.map(|t| kinds[t.index()]));
            let Some(name) = grid_entry_point(ops) else {
                continue;
            };
            if let Some(info) = infos.iter().find(|i| i.name == name) {
                k.threads = info.threads;
                k.registers = info.registers;
                k.dynamic_smem_bytes = info.static_smem + info.dynamic_smem;
                updated += 1;
            }
        }
    }
    updated
}
