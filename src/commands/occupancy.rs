//! `mkc occupancy`: the `cuda_occupancy.h` rule for one kernel.

use mkc_ir::device::Arch;
use mkc_simulator::occupancy::{occupancy, ArchRules, CtaResources};

use super::CommandError;
use crate::cli::OccupancyArgs;

/// Runs `mkc occupancy`.
pub fn run(args: OccupancyArgs) -> Result<(), CommandError> {
    let arch = Arch::parse(&args.arch).ok_or_else(|| {
        CommandError::Input(format!(
            "--arch: `{}` is not a supported architecture. Fix: use one of sm_80, sm_86, \
             sm_89, sm_90, sm_100, sm_120.",
            mkc_ir::error::shorten(&args.arch)
        ))
    })?;
    let rules = ArchRules::of(arch);
    let k = CtaResources {
        threads: args.threads,
        registers: args.regs,
        static_smem: args.static_smem,
        dynamic_smem: args.dyn_smem,
    };
    let o = occupancy(&rules, &k, args.carveout).map_err(|e| {
        CommandError::Input(format!(
            "this kernel cannot launch on {}: {e}.",
            arch.name()
        ))
    })?;
    if args.json {
        let json = serde_json::json!({
            "schema": super::schema("occupancy"),
            "arch": arch.name(),
            "blocks_per_sm": o.blocks_per_sm,
            "limiter": o.limiter.name(),
            "limits": o.limits,
        });
        outln!("{json}");
    } else {
        outln!(
            "{}: {} threads x {} registers, {} B static + {} B dynamic shared memory",
            arch.name(),
            args.threads,
            args.regs,
            args.static_smem,
            args.dyn_smem
        );
        outln!(
            "  {} CTA(s) per SM, limited by {}",
            o.blocks_per_sm,
            o.limiter.name()
        );
        outln!(
            "  limits: registers {}, shared memory {}, warps {}, blocks {}",
            o.limits.registers,
            o.limits.shared_memory,
            o.limits.warps,
            o.limits.blocks
        );
    }
    Ok(())
}
