//! The operator kernels: their source, NVRTC compilation to a cubin (exact register counts, no
//! JIT), and what ptxas reports about each (registers, shared memory, spills). Launch shapes and
//! shared-memory layouts are the operator catalogue's (`mkc_catalogue`, re-exported here).
//!
//! NVRTC runs on the CPU, so `mkc kernels` works on a machine without a GPU.

use std::ffi::{c_char, CString};

use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use mkc_ir::{Model, Tuning};
use serde::{Deserialize, Serialize};

use crate::error::BackendError;

pub use mkc_catalogue::{
    att_threads, attention_chunk, consumer_warps, cta_tasks, dynamic_smem, entry_point, kind_of,
    page_range, ring_next, ring_owner, ring_slot, stream, stream_threads, threads, warm_slot,
    Stream, ATT_THREADS, CONSUMER_WARPS, ENTRY_POINTS, MAX_SLOTS,
};

/// The CUDA source of every operator.
pub const SOURCE: &str = include_str!("../kernels/mkc.cu");

/// The attention probe's kernel in the operators' build (the chain's attention threads) and in
/// the persistent build (that build's consumer threads: `t` is its tuning there).
pub const ATTENTION_ALONE_ENTRIES: [&str; 2] =
    ["k_attention_alone", "k_attention_alone_persistent"];

/// Threads per CTA of the kernel named `name` (the helper kernels run 256).
pub fn threads_of(t: &Tuning, name: &str) -> u32 {
    if name == mkc_catalogue::PERSISTENT_ENTRY {
        return mkc_catalogue::persistent_threads(t);
    }
    if name == ATTENTION_ALONE_ENTRIES[0] {
        return att_threads(t);
    }
    if name == ATTENTION_ALONE_ENTRIES[1] {
        return consumer_warps(t) * 32;
    }
    kind_of(name).map_or(256, |k| threads(t, k))
}

/// What ptxas reported about one kernel, and the launch shape mkc uses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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

/// Compiles the kernels with the persistent megakernel (`k_persistent`, `-DMKC_PERSISTENT`)
/// built too: a build of its own, so that the chain's kernels and their compile time stay the
/// default build's.
pub fn compile_persistent(arch: &str, model: &Model) -> Result<Compiled, BackendError> {
    compile_persistent_with(arch, model, &[])
}

/// [`compile_persistent`] with preprocessor `defines` added (an ablation build).
pub fn compile_persistent_with(
    arch: &str,
    model: &Model,
    defines: &[(&str, u32)],
) -> Result<Compiled, BackendError> {
    check_persistent(model)?;
    let mut all = vec![("MKC_PERSISTENT", 1)];
    all.extend_from_slice(defines);
    compile_with(arch, &persistent_build(model), false, &all)
}

/// `model` as the persistent kernel's build sees it: its tuning's streaming warps are the
/// persistent kernel's (`mkc_catalogue::persistent_tuning`). The build's chain kernels are
/// never launched from it.
fn persistent_build(model: &Model) -> Model {
    Model {
        tuning: mkc_catalogue::persistent_tuning(&model.tuning),
        ..model.clone()
    }
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
        // No register cap goes with it: the streaming kernels' `__launch_bounds__` decide their
        // registers (a `--maxrregcount=128` here changed no machine code, docs/perf.md).
        options.push(format!("-DCONSUMER_WARPS={w}"));
    }
    options
}

fn compile_with(
    arch: &str,
    model: &Model,
    traced: bool,
    defines: &[(&str, u32)],
) -> Result<Compiled, BackendError> {
    let (text, options) = build_inputs(model, traced, defines)?;
    compile_text(&text, c"mkc.cu", arch, options, &model.tuning)
}

/// The source NVRTC compiles for `model` (its generated header and checks in place) and the
/// options its tuning adds: everything a build's figures depend on besides the architecture
/// and the compiler.
fn build_inputs(
    model: &Model,
    traced: bool,
    defines: &[(&str, u32)],
) -> Result<(String, Vec<String>), BackendError> {
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
    if traced {
        options.push("-DMKC_TRACE".to_string());
    }
    options.extend(defines.iter().map(|(name, v)| format!("-D{name}={v}")));
    Ok((text, options))
}

/// Whether the NVRTC library loads here: where it does not, plans keep the catalogue's
/// declared resources, and a prediction may differ from one made with compiled figures.
pub fn nvrtc_present() -> bool {
    // SAFETY: probing for the library has no preconditions.
    unsafe { nvrtc_sys::is_culib_present() }
}

/// The default build's per-kernel figures for `model` on `arch`, read from `cache` when this
/// exact build (source with its generated header, options, architecture, NVRTC version) was
/// compiled before, else compiled now (~10 s) and stored there. `None` where NVRTC is not
/// installed or reports no figures, or where the kernels cannot run the model: the plan then
/// keeps the catalogue's declared resources. A cache that cannot be read or written is only
/// slower.
pub fn cached_figures(
    arch: &str,
    model: &Model,
    cache: Option<&std::path::Path>,
    persistent: bool,
) -> Result<Option<Vec<KernelInfo>>, BackendError> {
    let runs = check_model(model).is_ok()
        && (!persistent || mkc_catalogue::persistent_layout(model).is_ok());
    if !runs || !nvrtc_present() {
        return Ok(None);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: both pointers are valid for writes.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
    let (text, options) = if persistent {
        build_inputs(&persistent_build(model), false, &[("MKC_PERSISTENT", 1)])?
    } else {
        build_inputs(model, false, &[])?
    };
    let key = [
        text.as_str(),
        arch,
        &options.join(" "),
        &format!("{major}.{minor}"),
    ]
    .iter()
    .flat_map(|part| part.bytes().chain([0]))
    .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let file = cache.map(|dir| dir.join(format!("kernels-{key:016x}.json")));
    if let Some(found) = file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|t| serde_json::from_str::<Vec<KernelInfo>>(&t).ok())
    {
        return Ok(Some(found));
    }
    let compiled = compile_text(&text, c"mkc.cu", arch, options, &model.tuning)?;
    if compiled.kernels.is_empty() {
        return Ok(None);
    }
    if let (Some(f), Ok(json)) = (&file, serde_json::to_string(&compiled.kernels)) {
        if let Some(dir) = f.parent() {
            std::fs::create_dir_all(dir).ok();
        }
        // Written aside and renamed, so that a concurrent reader sees all of it or nothing.
        let aside = f.with_extension(format!("{}.tmp", std::process::id()));
        if std::fs::write(&aside, json).is_ok() && std::fs::rename(&aside, f).is_err() {
            std::fs::remove_file(&aside).ok();
        }
    }
    Ok(Some(compiled.kernels))
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
        // A device function the kernel calls (`__noinline__`) has a properties block of its
        // own after the kernel's: its frame and spills are not the kernel's.
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            let name = rest.trim();
            current = current.filter(|&i| out[i].name == name);
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

/// Checks the model fits the kernels' assumptions; the error names the field and the fix.
pub fn check_model(model: &Model) -> Result<(), BackendError> {
    mkc_catalogue::check_model(model).map_err(|e| BackendError::Unsupported(e.0))
}

/// Checks the persistent kernel can run the model (its shared-memory layout, its attention's
/// threads); the error names the field and the fix.
pub fn check_persistent(model: &Model) -> Result<(), BackendError> {
    mkc_catalogue::persistent_layout(model)
        .map(|_| ())
        .map_err(|e| BackendError::Unsupported(e.0))
}

/// Fills in the dynamic shared memory of every operator kernel for `model`.
pub fn with_model(mut kernels: Vec<KernelInfo>, model: &Model) -> Vec<KernelInfo> {
    for k in &mut kernels {
        if let Some(kind) = kind_of(&k.name) {
            k.dynamic_smem = dynamic_smem(model, kind);
        } else if k.name == mkc_catalogue::PERSISTENT_ENTRY {
            k.dynamic_smem = mkc_catalogue::persistent_dynamic_smem(model);
        }
    }
    kernels
}

/// Replaces the declared CTA resources of a chain schedule's grids with the compiled kernels'
/// (registers, static shared memory), marking them compiled, so that occupancy and the
/// simulator describe what the backend launches. Returns how many grids were updated.
pub fn apply_to_schedule(schedule: &mut mkc_scheduler::Schedule, infos: &[KernelInfo]) -> usize {
    let mut updated = 0;
    if let mkc_scheduler::Plan::Persistent(plan) = &mut schedule.plan {
        if let Some(info) = infos
            .iter()
            .find(|i| i.name == mkc_catalogue::PERSISTENT_ENTRY)
        {
            let dynamic = schedule
                .model
                .as_ref()
                .map_or(info.dynamic_smem, mkc_catalogue::persistent_dynamic_smem);
            plan.resources = mkc_ir::model::KernelResources {
                threads: info.threads,
                registers: info.registers,
                dynamic_smem_bytes: dynamic + info.static_smem,
            };
            plan.source = mkc_catalogue::ResourceSource::Compiled;
            updated += 1;
        }
    }
    if let mkc_scheduler::Plan::Chain(plan) = &mut schedule.plan {
        for k in &mut plan.kernels {
            if let Some(info) = infos.iter().find(|i| i.name == k.entry) {
                k.threads = info.threads;
                k.registers = info.registers;
                k.static_smem_bytes = info.static_smem;
                k.resources = mkc_catalogue::ResourceSource::Compiled;
                updated += 1;
            }
        }
    }
    updated
}
