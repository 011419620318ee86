//! `mkc compile`: model file -> task DAG -> schedule, with a summary.

use mkc_scheduler::{check, CompileOptions, IlpOptions, Policy, Target, Trigger};

use super::CommandError;
use crate::cli::{CompileArgs, FormatArg};

/// Converts the CLI's options into the scheduler's, refusing flags the target would ignore.
fn options(args: &CompileArgs) -> Result<CompileOptions, CommandError> {
    let target: mkc_scheduler::Target = args.target.into();
    args.setup.refuse_ignored(&[target])?;
    let policy = args.setup.policy.map_or(Policy::RoundRobin, Policy::from);
    if args.ilp_time_limit.is_some() && policy != Policy::Ilp {
        return Err(CommandError::Input(
            "--ilp-time-limit applies to --policy ilp only. Fix: drop it or add --policy ilp."
                .into(),
        ));
    }
    let mut ilp = IlpOptions::default();
    if let Some(limit) = args.ilp_time_limit {
        ilp.time_limit_s = limit;
    }
    Ok(CompileOptions {
        target,
        policy,
        trigger: args.setup.trigger.map_or(Trigger::Early, Trigger::from),
        ilp,
    })
}

/// Runs `mkc compile`.
pub fn run(args: CompileArgs) -> Result<(), CommandError> {
    let opts = options(&args)?;
    let (model, device) = args.setup.resolve(&[opts.target])?;
    let persistent = opts.target == Target::Persistent;
    // The kernels' figures (loading NVRTC, or compiling on a cache miss) on a second thread,
    // beside the lowering and scheduling.
    let (mut compiled, found) = std::thread::scope(|scope| {
        let figures =
            scope.spawn(|| super::kernels::resource_figures(args.resources, &model, persistent));
        let compiled = mkc_scheduler::compile(&model, &device, &opts);
        let found = figures.join().expect("the kernel figures' thread panicked");
        (compiled, found)
    });
    let found = found?;
    // The plan still compiles (and simulates) with the model file's declared CTA; say why the
    // kernels' own figures are not used and that a run would be refused.
    if let Some(e) = super::kernels::backend_refusal(&model, persistent) {
        eprintln!(
            "mkc compile: note: {e}; the plan keeps the declared CTA and `mkc run` refuses it"
        );
    }
    if let Some(found) = found {
        mkc_backend::kernels::apply_to_schedule(&mut compiled.schedule, &found);
        compiled.summary = mkc_scheduler::summary::Summary::new(
            &compiled.schedule,
            compiled.summary.lower_bound_us.map(|b| b * 1e3),
            compiled.summary.estimates.clone(),
        );
    }
    if args.verify {
        let violations = check::check(&compiled.schedule);
        if !violations.is_empty() {
            return Err(CommandError::Internal(format!(
                "the schedule failed verification (a bug in mkc; please report it):\n{violations}"
            )));
        }
    }
    if let Some(path) = &args.output {
        let json = match args.format {
            Some(f) => f == FormatArg::Json,
            None => path.extension().is_some_and(|e| e == "json"),
        };
        let text = if json {
            serde_json::to_string(&compiled.schedule).map_err(|e| internal("JSON", e))?
        } else {
            ron::to_string(&compiled.schedule).map_err(|e| internal("RON", e))?
        };
        mkc_ir::input::write_output(path, text).map_err(|e| {
            CommandError::Input(format!(
                "cannot write `{}`: {e}. Fix: choose a writable path for -o.",
                path.display()
            ))
        })?;
    }
    if args.summary_json {
        let mut json = serde_json::to_value(&compiled.summary).map_err(|e| internal("JSON", e))?;
        json["schema"] = super::schema("compile").into();
        json["gpu_memory"] = serde_json::to_value(gpu_memory(&compiled.schedule, &model))
            .map_err(|e| internal("JSON", e))?;
        // `null` when the checker did not run, `true` when it ran and every invariant holds
        // (a failure exits above).
        json["verified"] = if args.verify {
            true.into()
        } else {
            serde_json::Value::Null
        };
        outln!("{json}");
    } else {
        let mut text = compiled.summary.table();
        if let Some(r) = &compiled.ilp {
            text += &format!(
                "  ilp: {} operator programs, {} proven optimal, {} stopped by the time limit, \
                 {} greedy fallbacks, {:.0} ms\n",
                r.ops, r.optimal, r.time_limited, r.fallbacks, r.solve_ms
            );
        }
        text += &format!("  {}\n", gpu_memory(&compiled.schedule, &model).describe());
        if args.verify {
            text += "  verified: all schedule invariants hold\n";
        }
        out!("{text}");
    }
    // The process ends here: returning ~10^5 tasks' memory to the allocator one by one took a
    // tenth of the command's time, and the OS reclaims it at exit anyway.
    std::mem::forget(compiled);
    Ok(())
}

/// The GPU memory a run of `schedule` allocates: its runner's buffers for the model it lowered
/// (a chain target's lowering of a fused file differs from the file's), `model` where the
/// schedule holds none.
fn gpu_memory(
    schedule: &mkc_scheduler::Schedule,
    model: &mkc_ir::Model,
) -> mkc_backend::memory::DeviceMemory {
    mkc_backend::memory::DeviceMemory::of(schedule.model.as_ref().unwrap_or(model))
}

fn internal(what: &str, e: impl std::fmt::Display) -> CommandError {
    CommandError::Internal(format!("cannot serialise the schedule as {what}: {e}"))
}
