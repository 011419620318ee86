//! `mkc compile`: model file -> task DAG -> schedule, with a summary.

use std::io::Write;

use mkc_scheduler::{check, CompileOptions, IlpOptions};

use super::CommandError;
use crate::cli::{CompileArgs, FormatArg};

/// Converts the CLI's options into the scheduler's.
fn options(args: &CompileArgs) -> Result<CompileOptions, CommandError> {
    if !(args.ilp_time_limit.is_finite() && args.ilp_time_limit > 0.0) {
        return Err(CommandError::Input(format!(
            "--ilp-time-limit: {} is not a positive number of seconds. Fix: pass e.g. \
             --ilp-time-limit 20.",
            args.ilp_time_limit
        )));
    }
    Ok(CompileOptions {
        target: args.target.into(),
        policy: args.setup.policy.into(),
        trigger: args.setup.trigger.into(),
        grids: args.setup.grids.into(),
        ilp: IlpOptions {
            time_limit_s: args.ilp_time_limit,
            ..IlpOptions::default()
        },
    })
}

/// Runs `mkc compile`.
pub fn run(args: CompileArgs) -> Result<(), CommandError> {
    let (model, device) = args.setup.resolve()?;
    let compiled = mkc_scheduler::compile(&model, &device, &options(&args)?);
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
        std::fs::write(path, text).map_err(|e| {
            CommandError::Input(format!(
                "cannot write `{}`: {e}. Fix: choose a writable path for -o.",
                path.display()
            ))
        })?;
    }
    let mut out = std::io::stdout().lock();
    let printed = if args.summary_json {
        let json = serde_json::to_string(&compiled.summary).map_err(|e| internal("JSON", e))?;
        writeln!(out, "{json}")
    } else {
        let mut text = compiled.summary.table();
        if let Some(r) = &compiled.ilp {
            text += &format!(
                "  ilp: {} operator programs, {} proven optimal, {} stopped by the time limit, \
                 {} greedy fallbacks, {:.0} ms\n",
                r.ops, r.optimal, r.time_limited, r.fallbacks, r.solve_ms
            );
        }
        if args.verify {
            text += "  verified: all schedule invariants hold\n";
        }
        write!(out, "{text}")
    };
    printed.map_err(|e| CommandError::Internal(format!("cannot write to stdout: {e}")))
}

fn internal(what: &str, e: impl std::fmt::Display) -> CommandError {
    CommandError::Internal(format!("cannot serialise the schedule as {what}: {e}"))
}
