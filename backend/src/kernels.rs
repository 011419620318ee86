//! The operator kernels: their source, NVRTC compilation to a cubin (exact register counts, no
//! JIT), and what ptxas reports about each (registers, shared memory, spills).
//!
//! NVRTC runs on the CPU, so `mkc kernels` works on a machine without a GPU.

use std::ffi::{c_char, CString};

use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use mkc_ir::{Model, OpKind};
use serde::Serialize;

use crate::error::BackendError;

/// The CUDA source of every operator.
pub const SOURCE: &str = include_str!("../kernels/mkc.cu");

/// Threads per CTA of every kernel (the source's `THREADS`).
pub const THREADS: u32 = 256;

/// Bytes of the shared-memory weight stage (the source's `STAGE_BYTES`).
pub const STAGE_BYTES: u32 = 65536;

/// Warps per CTA.
const WARPS: u32 = THREADS / 32;

/// Kernel entry names, in operator order.
pub const ENTRY_POINTS: &[(&str, OpKind)] = &[
    ("k_qkv_rope", OpKind::QkvRope),
    ("k_attention", OpKind::Attention),
    ("k_o_proj", OpKind::OProj),
    ("k_up_gate", OpKind::UpGate),
    ("k_down", OpKind::Down),
    ("k_lm_head", OpKind::LmHead),
];

/// The kernel that runs operators of `kind`.
pub fn entry_point(kind: OpKind) -> &'static str {
    ENTRY_POINTS
        .iter()
        .find(|(_, k)| *k == kind)
        .map(|(n, _)| *n)
        .expect("every operator kind has a kernel")
}

/// What ptxas reported about one kernel, and the launch shape mkc uses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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

/// Compiles the kernels for `arch` (e.g. `sm_90a`) to a cubin.
pub fn compile(arch: &str) -> Result<Compiled, BackendError> {
    compile_with(arch, false)
}

/// Compiles the kernels with CTA phase tracing compiled in (`-DMKC_TRACE`), for
/// `mkc bench --cta-phases` only: the marks slow every kernel down.
pub fn compile_traced(arch: &str) -> Result<Compiled, BackendError> {
    compile_with(arch, true)
}

fn compile_with(arch: &str, traced: bool) -> Result<Compiled, BackendError> {
    // SAFETY: probing for the library has no preconditions.
    if !unsafe { nvrtc_sys::is_culib_present() } {
        return Err(BackendError::NoNvrtc);
    }
    // Developers may point MKC_KERNELS_CU at an edited copy of the source to try a change
    // without rebuilding (the figures printed then belong to that source).
    let text = match std::env::var("MKC_KERNELS_CU") {
        Ok(path) => std::fs::read_to_string(&path)
            .map_err(|e| BackendError::Compile(format!("MKC_KERNELS_CU={path}: {e}")))?,
        Err(_) => SOURCE.to_string(),
    };
    let src = CString::new(text)
        .map_err(|_| BackendError::Compile("kernel source holds a NUL byte".into()))?;
    let prog = nvrtc::create_program(&src, Some(c"mkc.cu"))
        .map_err(|e| BackendError::Compile(format!("{e:?}")))?;
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "-lineinfo".to_string(),
        "--ptxas-options=-v".to_string(),
    ];
    if traced {
        options.push("-DMKC_TRACE".to_string());
    }
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
    let kernels = parse_ptxas_log(&log);
    Ok(Compiled {
        cubin,
        kernels,
        log,
    })
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

/// Extracts the per-kernel figures from ptxas's verbose log.
pub fn parse_ptxas_log(log: &str) -> Vec<KernelInfo> {
    let mut out: Vec<KernelInfo> = Vec::new();
    let mut current: Option<usize> = None;
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or("").to_string();
            out.push(KernelInfo {
                name,
                threads: THREADS,
                registers: 0,
                static_smem: 0,
                dynamic_smem: 0,
                stack_bytes: 0,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
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

/// Dynamic shared memory each operator kernel needs for `model`.
pub fn dynamic_smem(model: &Model, kind: OpKind) -> u32 {
    let g = &model.geometry;
    // [weight stage (STAGE_BYTES) | activation vector (k floats) | 256 result floats | scratch
    // (WARPS x DOT_ROWS floats for the dot product's cross-warp sums)]
    let vector = |k: u32| STAGE_BYTES + k * 4 + 256 * 4 + WARPS * 16 * 4;
    match kind {
        OpKind::QkvRope | OpKind::UpGate | OpKind::LmHead => vector(g.hidden),
        OpKind::OProj => vector(model.q_dim() / model.lowering.vtp_shards.attention_o_proj),
        OpKind::Down => vector(g.intermediate / model.lowering.vtp_shards.up_gate_down),
        OpKind::Attention => {
            let hp = model.heads_per_attention_task();
            let scores = (hp * model.workload.max_seq_len).max(WARPS * hp * g.head_dim);
            // K and V chunks of ATT_CHUNK (256) rows in bf16, then q and the scores.
            2 * 256 * g.head_dim * 2 + (hp * g.head_dim + scores + 64) * 4
        }
    }
}

/// Fills in the dynamic shared memory of every kernel for `model`.
pub fn with_model(mut kernels: Vec<KernelInfo>, model: &Model) -> Vec<KernelInfo> {
    for k in &mut kernels {
        if let Some((_, kind)) = ENTRY_POINTS.iter().find(|(n, _)| *n == k.name) {
            k.dynamic_smem = dynamic_smem(model, *kind);
        }
    }
    kernels
}

/// Checks the model fits the kernels' assumptions; the error names the field and the fix.
pub fn check_model(model: &Model) -> Result<(), BackendError> {
    let (g, l) = (&model.geometry, &model.lowering);
    let fail = |field: &str, why: String| {
        Err(BackendError::Unsupported(format!(
            "the CUDA backend cannot run this model: {field}: {why}"
        )))
    };
    if l.matvec_tile_rows > 64 || l.matvec_tile_rows % 2 != 0 {
        return fail(
            "lowering.matvec_tile_rows",
            "must be even and at most 64 (RoPE pairs, result buffer); use 16".into(),
        );
    }
    if l.lm_head_tile_rows > 256 {
        return fail("lowering.lm_head_tile_rows", "at most 256; use 32".into());
    }
    let hp = model.heads_per_attention_task();
    if g.head_dim > 128 || hp > 8 {
        return fail(
            "lowering.attention_split",
            format!("{hp} query heads of {} per attention task exceed the kernel's registers; raise attention_split", g.head_dim),
        );
    }
    if dynamic_smem(model, OpKind::Attention) > 227 * 1024 {
        return fail(
            "workload.max_seq_len",
            "the attention scores do not fit in shared memory; lower max_seq_len".into(),
        );
    }
    for kind in [OpKind::QkvRope, OpKind::OProj, OpKind::Down] {
        if dynamic_smem(model, kind) > 227 * 1024 {
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
            let name = entry_point(kinds[k.op.index()]);
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
