//! `mkc simulate`: compile, then predict the step timeline of one or all targets, or sweep.

use mkc_scheduler::{compile, CompileOptions, Target};
use mkc_simulator::sweep::{self, SweepSpec};
use mkc_simulator::{simulate, trace, SimOptions, SimReport};

use super::CommandError;
use crate::cli::{SimTargetArg, SimulateArgs};

/// Runs `mkc simulate`.
pub fn run(args: SimulateArgs) -> Result<(), CommandError> {
    let (model, mut device) = args.setup.resolve()?;
    if let Some(bw) = args.bandwidth {
        if !(bw.is_finite() && bw > 0.0) {
            return Err(CommandError::Input(format!(
                "--bandwidth: {bw} is not a positive GB/s figure. Fix: pass e.g. 4480."
            )));
        }
        device.read_bandwidth_gbps = bw;
    }
    if let Some(spec_path) = &args.sweep {
        let file = spec_path.display().to_string();
        let text = std::fs::read_to_string(spec_path).map_err(|e| {
            CommandError::Input(format!("cannot read `{file}`: {e}. Check the path."))
        })?;
        let spec = SweepSpec::parse(&file, &text)?;
        let rows = sweep::run(&model, &device, &spec, &file)?;
        let csv = sweep::to_csv(&rows);
        return match &args.csv {
            Some(path) => std::fs::write(path, csv).map_err(|e| {
                CommandError::Input(format!("cannot write `{}`: {e}.", path.display()))
            }),
            None => {
                print!("{csv}");
                Ok(())
            }
        };
    }
    let targets = match args.target {
        SimTargetArg::Persistent => vec![Target::Persistent],
        SimTargetArg::Pdl => vec![Target::Pdl],
        SimTargetArg::Graph => vec![Target::Graph],
        SimTargetArg::All => vec![Target::Persistent, Target::Pdl, Target::Graph],
    };
    if args.trace.is_some() && targets.len() > 1 {
        return Err(CommandError::Input(
            "--trace needs a single target. Fix: add --target persistent|pdl|graph.".into(),
        ));
    }
    let trigger = args.setup.trigger.into();
    let sim = SimOptions {
        trigger: Some(trigger),
        coresidency: args.coresidency,
        phase_release: args.phase_release,
        ..SimOptions::default()
    };
    let workload = args
        .trajectory
        .then_some((model.workload.prompt_len, model.workload.generate));
    let compiled = if args.compiled_kernels {
        let (found, _) = super::kernels::kernel_figures(mkc_backend::kernels::compile("sm_90a")?)?;
        Some(mkc_backend::kernels::with_model(found, &model, device.sms))
    } else {
        None
    };
    let mut reports: Vec<SimReport> = Vec::new();
    for target in targets {
        let opts = CompileOptions {
            target,
            policy: args.setup.policy.into(),
            trigger,
            grids: args.setup.grids.into(),
            ..CompileOptions::default()
        };
        let mut s = compile(&model, &device, &opts).schedule;
        if let Some(infos) = &compiled {
            mkc_backend::kernels::apply_to_schedule(&mut s, infos);
        }
        let (report, timeline) = simulate(&s, &device, &sim, workload)
            .map_err(|e| CommandError::Input(format!("{e}.")))?;
        if let Some(path) = &args.trace {
            let json = trace::chrome_trace(&s, &timeline).to_string();
            std::fs::write(path, json).map_err(|e| {
                CommandError::Input(format!("cannot write `{}`: {e}.", path.display()))
            })?;
        }
        reports.push(report);
    }
    if args.json {
        let value = if reports.len() == 1 {
            serde_json::to_value(&reports[0])
        } else {
            serde_json::to_value(&reports)
        }
        .map_err(|e| CommandError::Internal(format!("cannot serialise the report: {e}")))?;
        println!("{value}");
    } else {
        print!("{}", table(&model.name, &reports));
    }
    Ok(())
}

/// The side-by-side table.
fn table(model: &str, reports: &[SimReport]) -> String {
    let mut s = format!(
        "mkc simulate: {model} on {} (KV length {})\n",
        reports[0].device, reports[0].kv_len
    );
    s += "  target       step us   floor us   x floor   bandwidth   SM busy   worst boundary\n";
    for r in reports {
        let worst = r
            .step
            .boundaries
            .iter()
            .max_by(|a, b| a.bubble_us.total_cmp(&b.bubble_us))
            .map(|b| format!("{} -> {} {:.2} us", b.from, b.to, b.bubble_us))
            .unwrap_or_default();
        s += &format!(
            "  {:<11} {:>8.1} {:>10.1} {:>9.3} {:>10.1}% {:>8.1}%   {}\n",
            r.target,
            r.step.step_us,
            r.step.floor_us,
            r.step.step_us / r.step.floor_us,
            r.step.bandwidth_fraction * 100.0,
            r.step.sm_busy_fraction * 100.0,
            worst
        );
        if let Some(t) = &r.trajectory {
            s += &format!(
                "  {:<11} trajectory: {} steps, mean {:.1} us (first {:.1}, last {:.1}), total {:.2} ms\n",
                "", t.steps, t.mean_step_us, t.first_step_us, t.last_step_us, t.total_ms
            );
        }
        let occ: Vec<String> = r
            .occupancy
            .iter()
            .map(|o| format!("{} {} CTA/SM ({})", o.kernel, o.blocks_per_sm, o.limiter))
            .collect();
        s += &format!("  {:<11} occupancy: {}\n", "", occ.join(", "));
    }
    s
}
