//! `mkc simulate`: compile, then predict the step timeline of one or all targets, or sweep.

use mkc_scheduler::{compile, CompileOptions, Policy, Target, Trigger};
use mkc_simulator::sweep::{self, SweepSpec};
use mkc_simulator::{simulate, trace, SimOptions, SimReport};

use super::CommandError;
use crate::cli::{ResourcesArg, SimTargetArg, SimulateArgs};

/// Runs `mkc simulate`.
pub fn run(args: SimulateArgs) -> Result<(), CommandError> {
    if let Some(schedule) = super::schedule_arg(&args.setup.model)? {
        return run_schedule(&args, schedule);
    }
    if let Some(spec_path) = &args.sweep {
        return run_sweep(&args, spec_path);
    }
    let targets = match args.target {
        SimTargetArg::Persistent => vec![Target::Persistent],
        SimTargetArg::Pdl => vec![Target::Pdl],
        SimTargetArg::Graph => vec![Target::Graph],
        SimTargetArg::All => vec![Target::Persistent, Target::Pdl, Target::Graph],
    };
    args.setup.refuse_ignored(&targets)?;
    if (args.coresidency || args.phase_release) && targets == [Target::Persistent] {
        return Err(CommandError::Input(
            "--coresidency and --phase-release apply to the chain targets (pdl, graph) only. \
             Fix: drop them or choose --target pdl, graph or all."
                .into(),
        ));
    }
    if args.trace.is_some() && targets.len() > 1 {
        return Err(CommandError::Input(
            "--trace needs a single target. Fix: add --target persistent|pdl|graph.".into(),
        ));
    }
    let (model, mut device) = args.setup.resolve(&targets)?;
    apply_bandwidth(&args, &mut device)?;
    let generate = model.workload.generate as u64;
    let work = generate
        .saturating_mul(mkc_ir::lower::task_count(&model))
        .saturating_mul(targets.len() as u64);
    if args.trajectory && work > args.max_task_steps {
        return Err(CommandError::Input(format!(
            "--trajectory: {generate} decode steps of {} tasks on {} target(s) are {work} \
             simulated task-steps, more than the cap of {}. Fix: raise the cap with \
             --max-task-steps {work}, or shorten workload.generate.",
            mkc_ir::lower::task_count(&model),
            targets.len(),
            args.max_task_steps
        )));
    }
    let trigger = args.setup.trigger.map_or(Trigger::Early, Trigger::from);
    let sim = SimOptions {
        trigger: Some(trigger),
        coresidency: args.coresidency,
        phase_release: args.phase_release,
        ..SimOptions::default()
    };
    let workload = args
        .trajectory
        .then_some((model.workload.prompt_len, model.workload.generate));
    // The figures of each build a target needs: the chain's kernels, the persistent kernel.
    let chain = match targets.iter().any(|t| *t != Target::Persistent) {
        true => super::kernels::resource_figures(args.resources, &model, false)?,
        false => None,
    };
    let persistent = match targets.contains(&Target::Persistent) {
        true => super::kernels::resource_figures(args.resources, &model, true)?,
        false => None,
    };
    // Each reason the backend would refuse a target, once, with the targets it refuses.
    let mut refused: Vec<(String, Vec<&str>)> = Vec::new();
    for t in &targets {
        let Some(e) = super::kernels::backend_refusal(&model, *t == Target::Persistent) else {
            continue;
        };
        match refused.iter_mut().find(|(r, _)| *r == e) {
            Some((_, names)) => names.push(t.name()),
            None => refused.push((e, vec![t.name()])),
        }
    }
    for (e, names) in refused {
        eprintln!(
            "mkc simulate: note: {e}; `mkc run` refuses this plan ({})",
            names.join(", ")
        );
    }
    let mut reports: Vec<SimReport> = Vec::new();
    for target in targets {
        let opts = CompileOptions {
            target,
            policy: args.setup.policy.map_or(Policy::RoundRobin, Policy::from),
            trigger,
            ..CompileOptions::default()
        };
        let mut s = compile(&model, &device, &opts).schedule;
        let compiled = if target == Target::Persistent {
            &persistent
        } else {
            &chain
        };
        if let Some(infos) = compiled {
            mkc_backend::kernels::apply_to_schedule(&mut s, infos);
        }
        reports.push(simulate_one(
            args.trace.as_deref(),
            &s,
            &device,
            &sim,
            workload,
            Ladders::of(&args),
        )?);
    }
    print_reports(&args, &model.name, &reports)
}

/// A prediction `mkc run` and `bench` print beside a measurement.
pub struct Prediction {
    /// The simulator's report of the step.
    pub report: SimReport,
    /// The step's growth with the context, µs per 100 positions, where it was asked for.
    pub growth_us_per_100: Option<f64>,
}

/// The simulator's prediction of `s`, a schedule of `model` that `mkc run` or `bench` is about
/// to launch: with the compiled kernels' figures where NVRTC has them (as `mkc simulate`'s
/// default), unless the schedule was loaded from a file (timed as written); with the ablation
/// ladder when `ablate`; at `bandwidth_gbps` where the caller measured the card's (else the
/// profile's). With `growth_between` (KV lengths `first` and `last`), also the step's growth
/// between them (what `bench` measures by least squares over its steps): None where `last` is
/// not past `first`.
pub fn predict(
    model: &mkc_ir::Model,
    s: &mkc_scheduler::Schedule,
    as_written: bool,
    trigger: Trigger,
    ablate: bool,
    bandwidth_gbps: Option<f64>,
    growth_between: Option<(u32, u32)>,
) -> Result<Prediction, CommandError> {
    let mut s = s.clone();
    if !as_written {
        let figures = super::kernels::resource_figures(
            ResourcesArg::Auto,
            model,
            s.target == Target::Persistent,
        )?;
        if let Some(infos) = figures {
            mkc_backend::kernels::apply_to_schedule(&mut s, &infos);
        }
    }
    let sim = SimOptions {
        trigger: Some(trigger),
        ..SimOptions::default()
    };
    let mut device = s.device.clone();
    if let Some(bw) = bandwidth_gbps {
        device.read_bandwidth_gbps = bw;
    }
    let report = simulate_one(
        None,
        &s,
        &device,
        &sim,
        None,
        Ladders {
            ablate,
            sensitivity: false,
            edges: true,
        },
    )?;
    let growth_us_per_100 =
        growth_between
            .filter(|(first, last)| last > first)
            .map(|(first, last)| {
                let at = |kv| mkc_simulator::simulate_step(&s, &device, &sim, kv).step_ns / 1e3;
                (at(last) - at(first)) * 100.0 / (last - first) as f64
            });
    Ok(Prediction {
        report,
        growth_us_per_100,
    })
}

/// `mkc simulate FILE` where FILE is a compiled schedule: the schedule is timed as written,
/// on the device it was compiled for (`--bandwidth` may override that device's bandwidth).
fn run_schedule(args: &SimulateArgs, s: mkc_scheduler::Schedule) -> Result<(), CommandError> {
    let file = &args.setup.model;
    let other_target = args.target != SimTargetArg::All
        && args.target
            != match s.target {
                Target::Persistent => SimTargetArg::Persistent,
                Target::Pdl => SimTargetArg::Pdl,
                Target::Graph => SimTargetArg::Graph,
            };
    super::refuse_with_schedule(
        file,
        &[
            ("--target", other_target),
            ("--policy", args.setup.policy.is_some()),
            ("--trigger", args.setup.trigger.is_some()),
            ("--device", args.setup.device.is_some()),
            ("--sms", args.setup.sms.is_some()),
            ("--tune", args.setup.tune.is_some()),
            ("--prompt-len", args.setup.prompt_len.is_some()),
            ("--tokens", args.setup.tokens.is_some()),
            ("--sweep", args.sweep.is_some()),
            ("--trajectory", args.trajectory),
            ("--resources", args.resources != ResourcesArg::Auto),
        ],
    )?;
    if (args.coresidency || args.phase_release) && s.target == Target::Persistent {
        return Err(CommandError::Input(
            "--coresidency and --phase-release apply to the chain targets (pdl, graph) only, \
             and this schedule is persistent. Fix: drop them."
                .into(),
        ));
    }
    let mut device = s.device.clone();
    apply_bandwidth(args, &mut device)?;
    let sim = SimOptions {
        coresidency: args.coresidency,
        phase_release: args.phase_release,
        ..SimOptions::default()
    };
    let report = simulate_one(
        args.trace.as_deref(),
        &s,
        &device,
        &sim,
        None,
        Ladders::of(args),
    )?;
    print_reports(args, &s.graph.model, &[report])
}

/// The what-if predictions beside a step: the ablation ladder, the latency sensitivity; and
/// its operator boundaries (with a trace, and beside a traced GPU step).
#[derive(Clone, Copy, Default)]
struct Ladders {
    ablate: bool,
    sensitivity: bool,
    edges: bool,
}

impl Ladders {
    fn of(args: &SimulateArgs) -> Ladders {
        Ladders {
            ablate: args.ablate,
            sensitivity: args.sensitivity,
            edges: args.trace.is_some(),
        }
    }
}

/// Simulates one schedule, refuses impossible figures ([`check_sane`]) and, with `trace`,
/// writes its Perfetto trace there and says so.
fn simulate_one(
    trace_file: Option<&std::path::Path>,
    s: &mkc_scheduler::Schedule,
    device: &mkc_ir::device::DeviceProfile,
    sim: &SimOptions,
    workload: Option<(u32, u32)>,
    ladders: Ladders,
) -> Result<SimReport, CommandError> {
    let (mut report, timeline) =
        simulate(s, device, sim, workload).map_err(|e| CommandError::Input(format!("{e}.")))?;
    check_sane(&report)?;
    if ladders.ablate {
        report.ablation = mkc_simulator::ablation_ladder(s, device, sim, report.step.step_us);
    }
    if ladders.sensitivity {
        report.sensitivity = mkc_simulator::sensitivity(s, device, sim, report.step.step_us);
    }
    if ladders.edges {
        report.edges =
            mkc_ir::edges::layer_edges(&s.graph, &mkc_simulator::timeline::task_ends(&timeline));
    }
    if let Some(path) = trace_file {
        let json = trace::chrome_trace(s, &timeline).to_string();
        mkc_ir::input::write_output(path, json).map_err(|e| {
            CommandError::Input(format!(
                "cannot write `{}`: {e}. Fix: choose a writable path for --trace.",
                path.display()
            ))
        })?;
        eprintln!(
            "mkc: wrote the {} trace to {} (open it in ui.perfetto.dev)",
            s.target.name(),
            path.display()
        );
    }
    Ok(report)
}

/// Prints the reports as the table or the JSON object.
fn print_reports(
    args: &SimulateArgs,
    model: &str,
    reports: &[SimReport],
) -> Result<(), CommandError> {
    if args.json {
        let mut by_target = serde_json::Map::new();
        for r in reports {
            let v = serde_json::to_value(r)
                .map_err(|e| CommandError::Internal(format!("cannot serialise the report: {e}")))?;
            by_target.insert(r.target.clone(), v);
        }
        let value = serde_json::json!({
            "schema": super::schema("simulate"),
            "model": model,
            "targets": by_target,
        });
        outln!("{value}");
    } else {
        out!("{}", table(model, reports));
    }
    Ok(())
}

/// Applies `--bandwidth`, within the device profile's range.
fn apply_bandwidth(
    args: &SimulateArgs,
    device: &mut mkc_ir::device::DeviceProfile,
) -> Result<(), CommandError> {
    if let Some(bw) = args.bandwidth {
        mkc_ir::device::check_bandwidth(
            "<command line>",
            "--bandwidth",
            bw,
            "pass the read bandwidth in GB/s, e.g. 4480",
        )?;
        device.read_bandwidth_gbps = bw;
    }
    Ok(())
}

/// A report whose figures are not finite, below the floor or outside 0-1 is a bug in mkc: say
/// so instead of printing it.
fn check_sane(r: &SimReport) -> Result<(), CommandError> {
    let s = &r.step;
    let fractions = [s.bandwidth_fraction, s.sm_busy_fraction];
    let sane = s.step_us.is_finite()
        && s.floor_us.is_finite()
        && s.floor_us > 0.0
        && s.step_us >= s.floor_us * (1.0 - 1e-9)
        && fractions.iter().all(|f| (0.0..=1.0 + 1e-9).contains(f));
    if sane {
        return Ok(());
    }
    Err(CommandError::Internal(format!(
        "the {} simulation produced impossible figures (step {} us, floor {} us, bandwidth \
         {}, SM busy {}); this is a bug in mkc, please report it with the model file",
        r.target, s.step_us, s.floor_us, s.bandwidth_fraction, s.sm_busy_fraction
    )))
}

/// `mkc simulate --sweep`: the spec's knob lists replace the target and what-if flags (clap
/// refuses those); `--bandwidth` and `--sms` set the base device unless the spec lists them.
fn run_sweep(args: &SimulateArgs, spec_path: &std::path::Path) -> Result<(), CommandError> {
    let file = spec_path.display().to_string();
    let text = mkc_ir::input::read_text(spec_path, mkc_ir::FileKind::Sweep)?;
    let spec = SweepSpec::parse(&file, &text)?;
    if args.bandwidth.is_some() && !spec.bandwidth_gbps.is_empty() {
        return Err(CommandError::Input(format!(
            "--bandwidth would be ignored: `{file}` lists bandwidth_gbps. Fix: drop one of them."
        )));
    }
    if args.setup.sms.is_some() && !spec.sms.is_empty() {
        return Err(CommandError::Input(format!(
            "--sms would be ignored: `{file}` lists sms. Fix: drop one of them."
        )));
    }
    let targets = if spec.targets.is_empty() {
        vec![Target::Persistent, Target::Pdl, Target::Graph]
    } else {
        spec.targets.clone()
    };
    let (model, mut device) = args.setup.resolve(&targets)?;
    apply_bandwidth(args, &mut device)?;
    let rows = sweep::run(&model, &device, &spec, &file, args.max_task_steps)?;
    let csv = sweep::to_csv(&rows);
    match &args.csv {
        Some(path) => mkc_ir::input::write_output(path, csv).map_err(|e| {
            CommandError::Input(format!(
                "cannot write `{}`: {e}. Fix: choose a writable path for --csv.",
                path.display()
            ))
        }),
        None => {
            out!("{csv}");
            Ok(())
        }
    }
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
        for rung in &r.ablation {
            s += &format!(
                "  {:<11} without {:<37} {:>8.1} us (that work costs {:.1} us)\n",
                "", rung.removed, rung.step_us, rung.saved_us
            );
        }
        for t in &r.sensitivity {
            s += &format!(
                "  {:<11} half {:<40} {:>8.1} us (saves {:.1} us; now {:.0} ns)\n",
                "", t.term, t.step_us, t.saved_us, t.ns
            );
        }
        if !r.edges.is_empty() {
            s += &format!(
                "  {:<11} {}\n",
                "",
                super::timeline::edges_line(&r.edges, &[])
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `bench` and `run` print beside a measurement is `mkc simulate`'s figure for the same
    /// schedule, and with `ablate` the same ladder `mkc simulate --ablate` prints.
    #[test]
    fn a_prediction_is_the_simulators_figure_for_the_schedule() {
        let model = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        let device = mkc_ir::embedded::resolve_device("h200").unwrap();
        for target in [Target::Persistent, Target::Pdl] {
            let opts = CompileOptions {
                target,
                ..CompileOptions::default()
            };
            let s = compile(&model, &device, &opts).schedule;
            let p = predict(&model, &s, false, Trigger::Early, true, None, None)
                .unwrap()
                .report;
            let rungs = mkc_catalogue::Ablation::ladder(target == Target::Persistent).count();
            assert_eq!(p.ablation.len(), rungs, "{target:?}");
            // The same as simulating the schedule with the same figures, as `simulate` does.
            let mut with_figures = s.clone();
            if let Some(infos) = crate::commands::kernels::resource_figures(
                ResourcesArg::Auto,
                &model,
                target == Target::Persistent,
            )
            .unwrap()
            {
                mkc_backend::kernels::apply_to_schedule(&mut with_figures, &infos);
            }
            let sim = SimOptions {
                trigger: Some(Trigger::Early),
                ..SimOptions::default()
            };
            let (direct, _) = simulate(&with_figures, &device, &sim, None).unwrap();
            assert_eq!(p.step.step_us, direct.step.step_us, "{target:?}");
            // Taken as written (a schedule file), the figures are not reapplied.
            let written = |bandwidth, growth| {
                predict(&model, &s, true, Trigger::Early, false, bandwidth, growth).unwrap()
            };
            let as_written = written(None, None).report;
            let (plain, _) = simulate(&s, &device, &sim, None).unwrap();
            assert_eq!(as_written.step.step_us, plain.step.step_us, "{target:?}");
            // At a measured bandwidth, the figure `simulate --bandwidth` gives.
            let at = written(Some(3070.0), None).report;
            let mut slower = device.clone();
            slower.read_bandwidth_gbps = 3070.0;
            let (direct_at, _) = simulate(&s, &slower, &sim, None).unwrap();
            assert_eq!(at.step.step_us, direct_at.step.step_us, "{target:?}");
            assert!(at.step.step_us > plain.step.step_us, "{target:?}");
            // The growth is the slope between the two KV lengths' steps, as simulated.
            let (first, last) = (200, 1200);
            let g = written(None, Some((first, last)))
                .growth_us_per_100
                .unwrap();
            let step = |kv| mkc_simulator::simulate_step(&s, &device, &sim, kv).step_ns / 1e3;
            let want = (step(last) - step(first)) / 10.0;
            assert!(
                (g - want).abs() < 1e-9 && g > 0.0,
                "{target:?}: {g} against {want}"
            );
            assert_eq!(written(None, Some((first, first))).growth_us_per_100, None);
        }
    }
}
