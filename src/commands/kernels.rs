//! `mkc kernels`: compile every kernel with NVRTC (no GPU needed) and report its resources.

use mkc_backend::kernels;
use mkc_ir::device::Arch;
use mkc_simulator::occupancy::{occupancy, ArchRules, CtaResources};

use super::CommandError;
use crate::cli::{KernelsArgs, ResourcesArg};

/// Each kernel's figures and where they come from: the ptxas log, or, where NVRTC printed no
/// statistics (seen on the lent H200 for a second compile of the same source), the driver's
/// figures for the loaded cubin. With neither, an error rather than figures that are not there.
pub fn kernel_figures(
    compiled: kernels::Compiled,
    tuning: &mkc_ir::Tuning,
) -> Result<(Vec<kernels::KernelInfo>, &'static str), CommandError> {
    if !compiled.kernels.is_empty() {
        return Ok((compiled.kernels, "ptxas log"));
    }
    let gpu = mkc_backend::gpu::Gpu::open().map_err(|e| {
        CommandError::Internal(format!(
            "NVRTC printed no ptxas statistics and no GPU is available to ask the driver ({e}); \
             compiler log:\n{}",
            compiled.log
        ))
    })?;
    let found = mkc_backend::gpu::loaded_kernel_info(&gpu, &compiled.cubin, tuning)?;
    Ok((
        found,
        "driver (cuFuncGetAttribute; local bytes shown as stack)",
    ))
}

/// Builds the kernels for `model` on `arch` and returns their figures and where they come from;
/// a model the kernels cannot run is refused naming the field, not handed to NVRTC. What
/// `mkc kernels` reads, and `--resources compiled` where ptxas printed no figures.
pub fn built_kernel_figures(
    arch: &str,
    model: &mkc_ir::Model,
) -> Result<(Vec<kernels::KernelInfo>, &'static str), CommandError> {
    kernels::check_model(model)?;
    let compiled = kernels::compile(arch, model)?;
    kernel_figures(compiled, &model.tuning)
}

/// Where the compiled kernels' figures are cached: `$XDG_CACHE_HOME/mkc`, else
/// `$HOME/.cache/mkc`; none when neither is set.
fn cache_dir() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache")))?;
    Some(base.join("mkc"))
}

/// The compiled kernels' figures for a plan of `model` (the chain's kernels, built as the
/// chain targets lower it, `Model::for_chain`; or with `persistent` the persistent kernel's
/// build), as `--resources` asks: none for `declared`; for `auto`, NVRTC's where it is
/// installed and can build the model (cached by build), else none; for `compiled`, NVRTC's or
/// an error saying why not.
pub fn resource_figures(
    choice: ResourcesArg,
    model: &mkc_ir::Model,
    persistent: bool,
) -> Result<Option<Vec<kernels::KernelInfo>>, CommandError> {
    let chain = model.for_chain();
    let model = if persistent { model } else { &chain };
    let cached = || kernels::cached_figures("sm_90a", model, cache_dir().as_deref(), persistent);
    match choice {
        ResourcesArg::Declared => Ok(None),
        ResourcesArg::Auto => Ok(cached()?),
        ResourcesArg::Compiled => {
            kernels::check_model(model)?;
            match cached()? {
                Some(found) => Ok(Some(found)),
                None if persistent => Ok(Some(
                    kernel_figures(kernels::compile_persistent("sm_90a", model)?, &model.tuning)?.0,
                )),
                None => Ok(Some(built_kernel_figures("sm_90a", model)?.0)),
            }
        }
    }
}

/// Why the CUDA backend would refuse to run `model` on the persistent kernel (`persistent`) or
/// the chain's kernels, if it would: `mkc compile` and `simulate` still plan and time such a
/// model (a what-if), and say that `mkc run` refuses it.
pub fn backend_refusal(model: &mkc_ir::Model, persistent: bool) -> Option<String> {
    let chain = model.for_chain();
    let built = if persistent { model } else { &chain };
    if let Err(e) = kernels::check_model(built) {
        return Some(e.to_string());
    }
    persistent
        .then(|| kernels::check_persistent(model).err())
        .flatten()
        .map(|e| format!("the persistent kernel cannot run this model: {e}"))
}

/// Runs `mkc kernels`.
pub fn run(args: KernelsArgs) -> Result<(), CommandError> {
    // The kernels use Hopper-only PTX (bulk copies, mbarriers, griddepcontrol): anything but
    // sm_90a would fail in ptxas, which is not the user's fault to read. Refused first, in one
    // line, before anything else is read or said.
    let arch = match Arch::parse(&args.arch) {
        Some(a @ Arch::Sm90) if args.arch.ends_with('a') => a,
        _ => {
            return Err(CommandError::Input(format!(
                "--arch: `{}` is not supported: the kernels use Hopper-specific PTX. Fix: use \
                 --arch sm_90a.",
                mkc_ir::error::shorten(&args.arch)
            )))
        }
    };
    let (mut model, _) = super::resolve_model(&args.model)?;
    super::apply_tune(&mut model, args.tune.as_deref())?;
    super::override_workload(&mut model, args.prompt_len, args.tokens)?;
    let card = mkc_ir::embedded::resolve_device(&args.device)?;
    super::settle_unset_knobs(&mut model, &card);
    kernels::check_model(&model)?;
    // The cubin's file is created before the ~10 s compile, so that a bad path fails first.
    let cubin_error = |path: &std::path::Path, e: std::io::Error| {
        CommandError::Input(format!(
            "--cubin: cannot write {}: {e}. Fix: name a file in a writable directory",
            path.display()
        ))
    };
    let cubin_file = match &args.cubin {
        Some(path) => Some((
            path,
            std::fs::File::create(path).map_err(|e| cubin_error(path, e))?,
        )),
        None => None,
    };
    // The operator build reported is the one the chain targets run (`Model::for_chain`).
    if !args.persistent {
        use mkc_scheduler::Target;
        super::note_chain_lowering(&model, &[Target::Pdl, Target::Graph]);
        model = model.for_chain();
    }
    let compiled = if args.persistent {
        kernels::compile_persistent(&args.arch, &model)?
    } else {
        kernels::compile(&args.arch, &model)?
    };
    if let Some((path, mut file)) = cubin_file {
        use std::io::Write;
        file.write_all(&compiled.cubin)
            .map_err(|e| cubin_error(path, e))?;
    }
    let (found, source) = kernel_figures(compiled, &model.tuning)?;
    let infos = kernels::with_model(found, &model);
    let rules = ArchRules::of(arch);
    if args.json {
        let rows: Vec<serde_json::Value> = infos
            .iter()
            .map(|k| {
                let occ = occupancy(&rules, &resources(k), None).ok();
                serde_json::json!({
                    "name": k.name, "threads": k.threads, "registers": k.registers,
                    "static_smem": k.static_smem, "dynamic_smem": k.dynamic_smem,
                    "stack_bytes": k.stack_bytes, "spill_store_bytes": k.spill_store_bytes,
                    "spill_load_bytes": k.spill_load_bytes,
                    "code_hash": format!("{:016x}", k.code_hash),
                    "blocks_per_sm": occ.map(|o| o.blocks_per_sm),
                    "limiter": occ.map(|o| o.limiter.name()),
                })
            })
            .collect();
        let v = serde_json::json!({
            "schema": super::schema("kernels"), "arch": args.arch, "model": model.name,
            "tuning": model.tuning,
            "kernels": rows,
        });
        outln!("{v}");
    } else {
        outln!(
            "mkc kernels: {} for {} ({} kernels; figures from the {source}; tuning: {})",
            args.arch,
            model.name,
            infos.len(),
            tuning_label(&model.tuning)
        );
        // The name column fits the longest entry point (at least the header's 19).
        let w = infos
            .iter()
            .map(|k| k.name.len())
            .max()
            .unwrap_or(0)
            .max(19);
        outln!(
            "  {:<w$} threads  regs  static B  dynamic B  stack B  spill st/ld B  code          CTA/SM",
            "kernel"
        );
        for k in &infos {
            let occ = occupancy(&rules, &resources(k), None)
                .map(|o| format!("{} ({})", o.blocks_per_sm, o.limiter.name()))
                .unwrap_or_else(|e| format!("cannot launch: {e}"));
            outln!(
                "  {:<w$} {:>7} {:>5} {:>9} {:>10} {:>8} {:>7}/{:<6} {:012x}  {}",
                k.name,
                k.threads,
                k.registers,
                k.static_smem,
                k.dynamic_smem,
                k.stack_bytes,
                k.spill_store_bytes,
                k.spill_load_bytes,
                k.code_hash >> 16,
                occ
            );
        }
    }
    Ok(())
}

fn resources(k: &kernels::KernelInfo) -> CtaResources {
    CtaResources {
        threads: k.threads,
        registers: k.registers.max(1),
        static_smem: k.static_smem,
        dynamic_smem: k.dynamic_smem,
    }
}

/// The tuning knobs that are set, or `default`.
pub fn tuning_label(t: &mkc_ir::Tuning) -> String {
    let set = t.describe();
    if set.is_empty() {
        "default".into()
    } else {
        set.join(", ")
    }
}
