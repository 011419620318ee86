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
            args.arch
        ))
    })?;
    if args.carveout.is_some_and(|c| c > 100) {
        return Err(CommandError::Input(
            "--carveout: a percentage is 0 to 100. Fix: pass e.g. --carveout 100.".into(),
        ));
    }
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
            "arch": arch.name(),
            "blocks_per_sm": o.blocks_per_sm,
            "limiter": o.limiter.name(),
            "limits": o.limits,
        });
        println!("{json}");
    } else {
        println!(
            "{}: {} threads x {} registers, {} B static + {} B dynamic shared memory",
            arch.name(),
            args.threads,
            args.regs,
            args.static_smem,
            args.dyn_smem
        );
        println!(
            "  {} CTA(s) per SM, limited by {}",
            o.blocks_per_sm,
            o.limiter.name()
        );
        println!(
            "  limits: registers {}, shared memory {}, warps {}, blocks {}",
            o.limits.registers, o.limits.shared_memory, o.limits.warps, o.limits.blocks
        );
    }
    Ok(())
}
