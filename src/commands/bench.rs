//! `mkc bench`: several targets side by side in one process, on the same weights, over the
//! whole workload trajectory, several trials; correctness checked on every target.

use indicatif::{ProgressBar, ProgressStyle};
use mkc_backend::abi::Mark;
use mkc_backend::ablation::Ablation;
use mkc_backend::gpu::RunOptions;
use mkc_backend::reference::LayerValues;
use serde::Serialize;

use mkc_scheduler::Target;

use super::gpu_common::{
    check_many, context_growth_per_100, find_divergences, mean, percentiles, print_check,
    reference_margin, Check, Divergence, Session, Source,
};
use super::timeline::{print_breakdown, TimelineFiles};
use super::CommandError;
use crate::cli::BenchArgs;

/// One target's figures.
#[derive(Serialize)]
struct Row {
    target: String,
    median_step_us: f64,
    /// Mean over every timed step: the whole trajectory's time per token, which the later
    /// (longer-context) steps weigh on more than the median shows.
    mean_step_us: f64,
    p10_step_us: f64,
    p90_step_us: f64,
    /// Least-squares growth of the step with the KV history, µs per 100 positions: how much
    /// of the p10-p90 spread is the context rather than noise.
    context_growth_us_per_100: f64,
    /// The simulator's growth over the same positions (None where it refused the schedule).
    predicted_growth_us_per_100: Option<f64>,
    tokens_per_s: f64,
    achieved_tb_s: f64,
    fraction_of_measured_bandwidth: f64,
    steps: usize,
    /// The simulator's step for this target's schedule, made before anything was timed (None
    /// where it refused the schedule).
    predicted_step_us: Option<f64>,
}

/// One operator kind timed alone.
#[derive(Serialize)]
struct KernelRow {
    kernel: String,
    launches: usize,
    us_per_launch: f64,
    floor_us_per_launch: f64,
}

/// One target timed with an ablation build, in the same trials as its full chain.
#[derive(Serialize)]
struct AblationRow {
    target: String,
    /// What the build removes, e.g. `attention+loads`.
    removed: String,
    ablation: Ablation,
    median_step_us: f64,
    mean_step_us: f64,
    /// Median step time of the full chain minus this build's: what the removed work costs.
    saved_us: f64,
    /// What the simulator says the removed work costs (`mkc simulate --ablate`).
    predicted_saved_us: Option<f64>,
}

/// Mean CTA phase times of one operator kind in a traced step, µs.
#[derive(Serialize)]
struct PhaseRow {
    target: String,
    kernel: String,
    grids: usize,
    ctas_per_grid: usize,
    issue_us: f64,
    wait_us: f64,
    prepare_us: f64,
    land_us: f64,
    compute_us: f64,
    epilogue_us: f64,
    cta_life_us: f64,
    /// Mean increase of the step's last exit caused by each grid of this kind.
    marginal_us: f64,
    /// Mean over grids of (last CTA entry - first CTA entry).
    entry_spread_us: f64,
    /// Mean over grids of (last CTA exit - first CTA exit): the tail a successor's wait absorbs.
    exit_spread_us: f64,
}

/// The whole report.
#[derive(Serialize)]
struct Report {
    /// The tuning knobs the kernels were built and launched with.
    tuning: mkc_ir::Tuning,
    per_kernel: Vec<KernelRow>,
    cta_phases: Vec<PhaseRow>,
    ablation: Vec<AblationRow>,
    model: String,
    gpu: String,
    weights_and_kv_bytes_per_step: f64,
    measured_read_tb_s: f64,
    floor_us: f64,
    rows: Vec<Row>,
    same_tokens: bool,
    /// Targets whose tokens part from the first target's, and where.
    divergences: Vec<Divergence>,
    checks: Vec<(String, Check)>,
    /// `--timeline`: per target, the file written and where its traced step's time went.
    timelines: Vec<TimelineRow>,
}

/// One target's `--timeline`.
#[derive(Serialize)]
struct TimelineRow {
    #[serde(serialize_with = "target_name")]
    target: Target,
    file: std::path::PathBuf,
    breakdown: mkc_backend::timeline::Breakdown,
    /// The traced step's operator boundaries (median per kind over the layers).
    edges: Vec<mkc_ir::edges::LayerEdge>,
    /// The simulator's, for the same schedule at the same KV length (the median step's).
    predicted_edges: Vec<mkc_ir::edges::LayerEdge>,
}

/// A target as its name (`pdl`), as the rows give it.
fn target_name<S: serde::Serializer>(t: &Target, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

/// Runs `mkc bench`.
pub fn run(args: BenchArgs) -> Result<(), CommandError> {
    let source = Source::resolve(&args.common)?;
    let targets = source.targets(args.targets.as_deref(), &[Target::Graph, Target::Pdl])?;
    // Create the trace file first, so that a bad path fails before any GPU work.
    let mut trace_file = match &args.cta_trace_out {
        Some(path) => Some(mkc_ir::input::create_output(path).map_err(|e| {
            CommandError::Input(format!(
                "--cta-trace-out {}: cannot create it ({e}). Fix: give a path in a writable \
                 directory.",
                path.display()
            ))
        })?),
        None => None,
    };
    let mut timeline_files = match &args.common.timeline {
        Some(path) => Some(TimelineFiles::create(path, &targets)?),
        None => None,
    };
    let mut s = Session::open(&args.common, source, &targets)?;
    let sms = mkc_backend::gpu::sm_count(&s.runner);
    let measured_gbs = s.runner.read_bandwidth(2 << 30, 5)?;
    // One schedule per target, compiled once: the graphs, the ablation builds, the per-kernel
    // timings and the traces all run it.
    let schedules = targets
        .iter()
        .map(|&t| s.schedule(t, sms))
        .collect::<Result<Vec<_>, CommandError>>()?;
    // The simulator's prediction of each schedule (and of each ablation rung), made before
    // anything runs, printed beside the measurement: at the bandwidth just measured, so that
    // one card's HBM against another's (3% between two H100s, docs/perf.md) is not its error.
    // A reading outside the profiles' bandwidth range leaves the profile's.
    let (lo, hi) = mkc_ir::device::BANDWIDTH_RANGE_GBPS;
    let bw = Some(measured_gbs).filter(|b| (lo..=hi).contains(b));
    let predictions: Vec<Option<super::simulate::Prediction>> = schedules
        .iter()
        .map(|sched| s.predict(sched, args.ablate, bw, true))
        .collect();
    let graphs = schedules
        .iter()
        .map(|sched| s.runner_for(sched.target).capture(sched))
        .collect::<Result<Vec<_>, _>>()?;
    // Ablation builds: the same schedules with other kernels, timed in the same trials as the
    // full chains. Their values never reach a check: every run rewrites the state it reads.
    let mut ablated = Vec::new();
    if args.ablate {
        for a in Ablation::LADDER {
            for (i, sched) in schedules.iter().enumerate() {
                if !a.applies_to(sched.persistent().is_some()) {
                    continue;
                }
                let runner = s.runner_for_mut(sched.target);
                ablated.push((a, i, runner.capture_ablated(sched, a)?));
            }
        }
    }
    let checked = if args.common.no_check {
        Vec::new()
    } else {
        s.check_positions()
    };
    let run = |t: Target, g: &mkc_backend::gpu::StepGraph, capture: Vec<u32>| {
        s.runner_for(t).run(
            g,
            &s.prompt,
            s.generate,
            &RunOptions {
                capture_logits: capture.clone(),
                capture_layers: capture,
                watchdog: s.watchdog,
            },
        )
    };
    // Warm-up runs (also the correctness runs: logits poisoned, then captured).
    let warm = graphs
        .iter()
        .zip(&targets)
        .map(|(g, &t)| run(t, g, checked.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let per_run = warm.first().map_or(0, |w| w.step_us.len());
    let same_tokens = warm.windows(2).all(|w| w[0].tokens == w[1].tokens);
    // Every timed graph with the target whose runner captured it.
    let timed: Vec<(Target, &mkc_backend::gpu::StepGraph)> = targets
        .iter()
        .copied()
        .zip(&graphs)
        .chain(ablated.iter().map(|(_, i, g)| (targets[*i], g)))
        .collect();
    for &(t, g) in &timed[graphs.len()..] {
        run(t, g, Vec::new())?;
    }
    let bar = ProgressBar::new(args.trials as u64 * timed.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs {eta}").expect("template"),
    );
    let mut steps: Vec<Vec<f64>> = vec![Vec::new(); timed.len()];
    for _ in 0..args.trials {
        for (i, &(t, g)) in timed.iter().enumerate() {
            steps[i].extend(run(t, g, Vec::new())?.step_us);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    // A copy: the traces below borrow the session's runners mutably.
    let model = s.model.clone();
    let m = &model;
    let g = &m.geometry;
    let first = s.prompt.len() as f64;
    let mean_len = first + (s.generate as f64 - 1.0) / 2.0 + 0.5;
    let kv = g.layers as f64 * g.kv_heads as f64 * 2.0 * mean_len * g.head_dim as f64 * 2.0;
    let bytes = m.weight_bytes() as f64 + kv;
    let rows: Vec<Row> = targets
        .iter()
        .zip(&steps)
        .zip(&predictions)
        .map(|((t, v), predicted)| {
            let (med, p10, p90) = percentiles(v);
            let tb = bytes / (med * 1e-6) / 1e12;
            Row {
                target: t.name().to_string(),
                median_step_us: med,
                mean_step_us: mean(v),
                p10_step_us: p10,
                p90_step_us: p90,
                context_growth_us_per_100: context_growth_per_100(v, per_run),
                predicted_growth_us_per_100: predicted.as_ref().and_then(|p| p.growth_us_per_100),
                tokens_per_s: 1e6 / med,
                achieved_tb_s: tb,
                fraction_of_measured_bandwidth: tb * 1e3 / measured_gbs,
                steps: v.len(),
                predicted_step_us: predicted.as_ref().map(|p| p.report.step.step_us),
            }
        })
        .collect();
    let ablation: Vec<AblationRow> = ablated
        .iter()
        .zip(&steps[graphs.len()..])
        .map(|((a, i, _), v)| {
            let (med, _, _) = percentiles(v);
            AblationRow {
                target: targets[*i].name().to_string(),
                removed: a.label(),
                ablation: *a,
                median_step_us: med,
                mean_step_us: mean(v),
                saved_us: rows[*i].median_step_us - med,
                predicted_saved_us: predictions[*i].as_ref().and_then(|p| {
                    p.report
                        .ablation
                        .iter()
                        .find(|r| r.removed == a.label())
                        .map(|r| r.saved_us)
                }),
            }
        })
        .collect();
    // Each target is checked against the reference teacher-forced with its own tokens (one
    // reference pass per distinct sequence); where a target's tokens part from the first
    // target's, the reference's margin on their shared history says whether that was a near
    // tie that another order of float sums may flip, or a wrong token.
    let mut divergences = Vec::new();
    let checks: Vec<(String, Check)> = if checked.is_empty() {
        Vec::new()
    } else {
        let w = s.host_weights()?;
        let mut cs: Vec<Option<Check>> = vec![None; warm.len()];
        // The reference's margins along the first target's tokens, from its group's pass.
        let mut first_margins = Vec::new();
        for i in 0..warm.len() {
            if cs[i].is_some() {
                continue;
            }
            let group: Vec<usize> = (i..warm.len())
                .filter(|&j| warm[j].sequence == warm[i].sequence)
                .collect();
            let runs: Vec<&[(u32, Vec<f32>)]> =
                group.iter().map(|&j| warm[j].logits.as_slice()).collect();
            let layers: Vec<&[(u32, Vec<LayerValues>)]> =
                group.iter().map(|&j| warm[j].layers.as_slice()).collect();
            let (group_checks, margins) = check_many(m, &w, &warm[i].sequence, &runs, &layers);
            for (j, c) in group.iter().zip(group_checks) {
                cs[*j] = Some(c);
            }
            if i == 0 {
                first_margins = margins;
            }
        }
        let names: Vec<&str> = targets.iter().map(|t| t.name()).collect();
        let sequences: Vec<&[u32]> = warm.iter().map(|o| o.sequence.as_slice()).collect();
        // A divergence past the last checked position (none in practice: the last position is
        // checked) takes a pass of its own.
        divergences = find_divergences(&names, &sequences, |pos| {
            first_margins
                .get(pos as usize)
                .copied()
                .unwrap_or_else(|| reference_margin(m, &w, &warm[0].sequence, pos))
        });
        targets
            .iter()
            .map(|t| t.name().to_string())
            .zip(cs.into_iter().map(|c| c.expect("every run checked")))
            .collect()
    };
    let mut per_kernel = Vec::new();
    if args.per_kernel {
        // Each operator's grids alone: a chain plan's (the persistent kernel has none).
        let chain = schedules
            .iter()
            .find(|c| c.target != Target::Persistent)
            .ok_or_else(|| {
                CommandError::Input(
                    "--per-kernel times a chain's grids. Fix: add pdl or graph to --targets."
                        .into(),
                )
            })?;
        let graph = &chain.graph;
        let kv_len = s.prompt.len() as u32 + s.generate / 2;
        // The chain's kernels are built for the model it lowered (the schedule's own).
        let shapes =
            mkc_backend::launch_plan::launch_plan(chain, chain.model.as_ref().unwrap_or(m))?;
        for (name, kind) in mkc_backend::kernels::ENTRY_POINTS {
            let ops: Vec<_> = graph.ops.iter().filter(|o| o.kind == *kind).collect();
            let launches: Vec<_> = shapes.iter().filter(|l| l.kind == *kind).copied().collect();
            let bytes: u64 = ops
                .iter()
                .flat_map(|o| graph.tasks_of(o.id))
                .map(|t| t.cost.bytes_at(kv_len))
                .sum();
            let us = s.runner_for(chain.target).time_grids(&launches, 20)?;
            per_kernel.push(KernelRow {
                kernel: name.to_string(),
                launches: launches.len(),
                us_per_launch: us / launches.len() as f64,
                floor_us_per_launch: bytes as f64 / launches.len() as f64 / (measured_gbs * 1e3),
            });
        }
    }
    let mut cta_phases = Vec::new();
    if args.cta_phases {
        let khz = s.runner.clock_khz()? as f64;
        // The middle decode position: the KV length of the median step the table reports.
        let pos = s.timeline_position();
        let mut csv = String::from(TRACE_CSV_HEADER);
        for (&t, sched) in targets.iter().zip(&schedules) {
            if t == Target::Persistent {
                continue;
            }
            let grids = s.runner_for_mut(t).trace_step(sched, pos)?;
            cta_phases.extend(phase_rows(t.name(), &grids, khz));
            trace_csv(&mut csv, t.name(), &grids, khz);
        }
        if let (Some(file), Some(path)) = (trace_file.as_mut(), &args.cta_trace_out) {
            use std::io::Write;
            file.write_all(csv.as_bytes()).map_err(|e| {
                CommandError::Internal(format!(
                    "--cta-trace-out {}: write failed: {e}",
                    path.display()
                ))
            })?;
        }
    }
    let mut timelines = Vec::new();
    let pos = s.timeline_position();
    if let Some(files) = timeline_files.as_mut() {
        for ((&t, sched), predicted) in targets.iter().zip(&schedules).zip(&predictions) {
            let name = s.model.name.clone();
            let (file, breakdown, edges) =
                files.write(s.runner_for_mut(t), &name, pos, t, sched)?;
            let predicted_edges = predicted
                .as_ref()
                .map_or_else(Vec::new, |p| p.report.edges.clone());
            timelines.push(TimelineRow {
                target: t,
                file,
                breakdown,
                edges,
                predicted_edges,
            });
        }
    }
    let report = Report {
        timelines,
        tuning: s.model.tuning.clone(),
        per_kernel,
        cta_phases,
        ablation,
        model: m.name.clone(),
        gpu: s.gpu_name.clone(),
        weights_and_kv_bytes_per_step: bytes,
        measured_read_tb_s: measured_gbs / 1e3,
        floor_us: bytes / (measured_gbs * 1e3),
        rows,
        same_tokens,
        divergences,
        checks,
    };
    if args.json {
        let mut v =
            serde_json::to_value(&report).map_err(|e| CommandError::Internal(e.to_string()))?;
        v["schema"] = super::schema("bench").into();
        outln!("{v}");
    } else {
        for (label, c) in &report.checks {
            print_check(label, c);
        }
        outln!(
            "mkc bench: {} on {}, {} trials x {} decode steps, measured read bandwidth {:.2} TB/s, floor {:.1} us",
            report.model,
            report.gpu,
            args.trials,
            s.generate - 1,
            report.measured_read_tb_s,
            report.floor_us
        );
        outln!("  tuning: {}", super::kernels::tuning_label(&report.tuning));
        outln!("  same tokens across targets: {}", report.same_tokens);
        for d in &report.divergences {
            outln!(
                "  {} parts from {} at position {}: the reference's top-2 margin there is {:.3}, {}",
                d.target,
                targets[0].name(),
                d.pos,
                d.margin,
                if d.clear {
                    "clear: a wrong token"
                } else {
                    "a near tie that another order of float sums may flip; each target is checked on its own tokens"
                }
            );
        }
        for k in &report.per_kernel {
            outln!(
                "  alone: {:<12} {:>3} launches  {:>8.2} us each  floor {:>8.2} us  ({:.2}x)",
                k.kernel,
                k.launches,
                k.us_per_launch,
                k.floor_us_per_launch,
                k.us_per_launch / k.floor_us_per_launch
            );
        }
        if !report.cta_phases.is_empty() {
            outln!("  CTA phases (us, means over CTAs and grids of a kind; one traced step):");
            outln!("  target kernel         grids  CTAs   issue   wait  prepare  land  compute  epilog   life  marginal  entry±  exit±");
            // A phase whose marks a kernel never records (attention has no weight pages) has
            // no mean: shown as `-`, never as NaN.
            let us = |v: f64, w: usize| {
                if v.is_finite() {
                    format!("{v:>w$.2}")
                } else {
                    format!("{:>w$}", "-")
                }
            };
            for r in &report.cta_phases {
                outln!(
                    "  {:<6} {:<13} {:>5} {:>5} {} {} {} {} {} {} {} {} {} {}",
                    r.target,
                    r.kernel,
                    r.grids,
                    r.ctas_per_grid,
                    us(r.issue_us, 7),
                    us(r.wait_us, 6),
                    us(r.prepare_us, 8),
                    us(r.land_us, 5),
                    us(r.compute_us, 8),
                    us(r.epilogue_us, 7),
                    us(r.cta_life_us, 6),
                    us(r.marginal_us, 9),
                    us(r.entry_spread_us, 7),
                    us(r.exit_spread_us, 6)
                );
            }
        }
        outln!(
            "  target   median us   mean us    p10 us    p90 us   tokens/s   TB/s   of measured   predicted us   error"
        );
        for r in &report.rows {
            outln!(
                "  {:<7} {:>10.1} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>6.2} {:>12.1}%   {}",
                r.target,
                r.median_step_us,
                r.mean_step_us,
                r.p10_step_us,
                r.p90_step_us,
                r.tokens_per_s,
                r.achieved_tb_s,
                r.fraction_of_measured_bandwidth * 100.0,
                predicted_cells(r.predicted_step_us, r.median_step_us)
            );
        }
        let growth: Vec<String> = report
            .rows
            .iter()
            .map(|r| {
                let model = r
                    .predicted_growth_us_per_100
                    .map_or(String::new(), |g| format!(" (model {g:+.1})"));
                format!("{} {:+.1}{model}", r.target, r.context_growth_us_per_100)
            })
            .collect();
        outln!(
            "  step growth with the context, us per 100 positions: {}",
            growth.join(", ")
        );
        for t in &report.timelines {
            print_breakdown(
                t.target,
                &t.file,
                &t.breakdown,
                &t.edges,
                &t.predicted_edges,
            );
        }
        if !report.ablation.is_empty() {
            outln!(
                "  ablation (same trials; removed work, meaningless values by design, unchecked):"
            );
            outln!(
                "  {:<7} {:<37} {:>9} {:>9} {:>10} {:>15}",
                "target",
                "removed",
                "median us",
                "mean us",
                "saved us",
                "predicted saved"
            );
            for r in &report.ablation {
                outln!(
                    "  {:<7} {:<37} {:>9.1} {:>9.1} {:>10.1} {:>15}",
                    r.target,
                    r.removed,
                    r.median_step_us,
                    r.mean_step_us,
                    r.saved_us,
                    r.predicted_saved_us
                        .map_or_else(|| "-".to_string(), |p| format!("{p:.1}"))
                );
            }
        }
    }
    // Tokens that part at a clear margin are wrong; without the reference (--no-check) any
    // parting is.
    let parted_wrongly = if checked.is_empty() {
        !report.same_tokens
    } else {
        report.divergences.iter().any(|d| d.clear)
    };
    let failed = report.checks.iter().any(|(_, c)| !c.passed) || parted_wrongly;
    if failed {
        return Err(CommandError::Internal(
            "correctness failed: see the checks above (tokens part between targets at a clear \
             margin, or logits disagree with the CPU reference)"
                .into(),
        ));
    }
    Ok(())
}

/// The traced step's first CTA entry (globaltimer, ns).
fn step_start(grids: &[mkc_backend::gpu::GridTrace]) -> u64 {
    grids
        .iter()
        .flat_map(|g| g.ctas.iter().map(|c| c[Mark::EntryNs.slot()]))
        .filter(|&t| t > 0)
        .min()
        .unwrap_or(0)
}

/// The clock marks `--cta-trace-out` writes after entry and exit, in its column order.
const CSV_MARKS: [Mark; 7] = [
    Mark::Issued,
    Mark::Released,
    Mark::Prepared,
    Mark::Landed,
    Mark::Computed,
    Mark::Sub1,
    Mark::Sub2,
];

/// Columns of `--cta-trace-out`.
const TRACE_CSV_HEADER: &str =
    "target,grid,kind,layer,cta,sm,entry_ns,exit_ns,issued_ns,released_ns,prepared_ns,landed_ns,computed_ns,sub1_ns,sub2_ns\n";

/// Appends one CSV row per traced CTA: entry and exit (globaltimer) relative to the step's
/// first entry, phase marks (clock64, including the two finer marks) converted to ns after the
/// CTA's entry; a mark the kernel never records is left empty.
fn trace_csv(
    out: &mut String,
    target: &str,
    grids: &[mkc_backend::gpu::GridTrace],
    clock_khz: f64,
) {
    use std::fmt::Write;
    let t0 = step_start(grids);
    for (gi, g) in grids.iter().enumerate() {
        for (ci, c) in g.ctas.iter().enumerate() {
            let layer = g.layer.map(|l| l.to_string()).unwrap_or_default();
            let kind = g.kind.name();
            let _ = write!(
                out,
                "{target},{gi},{kind},{layer},{ci},{},{},{}",
                c[Mark::Sm.slot()],
                c[Mark::EntryNs.slot()].saturating_sub(t0),
                c[Mark::ExitNs.slot()].saturating_sub(t0)
            );
            let entry = c[Mark::Entry.slot()];
            for mark in CSV_MARKS {
                let t = c[mark.slot()];
                if t > 0 && t >= entry {
                    let ns = (t - entry) as f64 / clock_khz * 1e6;
                    let _ = write!(out, ",{ns:.0}");
                } else {
                    out.push(',');
                }
            }
            out.push('\n');
        }
    }
}

/// Summarises a traced step per operator kind.
fn phase_rows(
    target: &str,
    grids: &[mkc_backend::gpu::GridTrace],
    clock_khz: f64,
) -> Vec<PhaseRow> {
    let us = |cycles: f64| cycles / clock_khz * 1e3;
    // Marginal time of grid i: how much it moves the step's last exit (globaltimer, ns).
    let mut last_exit = step_start(grids);
    let mut marginal = Vec::with_capacity(grids.len());
    for g in grids {
        let exit = g
            .ctas
            .iter()
            .map(|c| c[Mark::ExitNs.slot()])
            .max()
            .unwrap_or(0)
            .max(last_exit);
        marginal.push((exit - last_exit) as f64 / 1e3);
        last_exit = exit;
    }
    let mut rows = Vec::new();
    for &(name, kind) in mkc_backend::kernels::ENTRY_POINTS {
        let of_kind: Vec<usize> = (0..grids.len())
            .filter(|&i| grids[i].kind == kind)
            .collect();
        if of_kind.is_empty() {
            continue;
        }
        let phase = |a: Mark, b: Mark| {
            let (a, b) = (a.slot(), b.slot());
            let v: Vec<f64> = of_kind
                .iter()
                .flat_map(|&i| grids[i].ctas.iter())
                .filter(|c| c[a] > 0 && c[b] >= c[a])
                .map(|c| us((c[b] - c[a]) as f64))
                .collect();
            mean(&v)
        };
        let spread = |mark: Mark| {
            let per_grid = of_kind.iter().map(|&i| {
                let t = grids[i]
                    .ctas
                    .iter()
                    .map(|c| c[mark.slot()])
                    .filter(|&t| t > 0);
                let (lo, hi) = t.fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
                hi.saturating_sub(lo) as f64 / 1e3
            });
            per_grid.sum::<f64>() / of_kind.len() as f64
        };
        rows.push(PhaseRow {
            target: target.to_string(),
            kernel: name.to_string(),
            grids: of_kind.len(),
            ctas_per_grid: grids[of_kind[0]].ctas.len(),
            issue_us: phase(Mark::Entry, Mark::Issued),
            wait_us: phase(Mark::Issued, Mark::Released),
            prepare_us: phase(Mark::Released, Mark::Prepared),
            land_us: phase(Mark::Prepared, Mark::Landed),
            compute_us: phase(Mark::Landed, Mark::Computed),
            epilogue_us: phase(Mark::Computed, Mark::Exit),
            cta_life_us: phase(Mark::Entry, Mark::Exit),
            marginal_us: of_kind.iter().map(|&i| marginal[i]).sum::<f64>() / of_kind.len() as f64,
            entry_spread_us: spread(Mark::EntryNs),
            exit_spread_us: spread(Mark::ExitNs),
        });
    }
    rows
}

/// The prediction's cells of a target's row: the simulated step and its error against the
/// measured median, `+2.4%` where the simulator is slower; `-` where there is none.
fn predicted_cells(predicted: Option<f64>, measured: f64) -> String {
    match predicted {
        Some(p) if measured > 0.0 => {
            format!("{p:>12.1} {:>+7.1}%", (p - measured) / measured * 100.0)
        }
        _ => format!("{:>12} {:>8}", "-", "-"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use mkc_backend::gpu::GridTrace;
    use mkc_ir::graph::OpKind;

    #[test]
    fn a_prediction_is_shown_with_its_error_against_the_measured_median() {
        let cells = predicted_cells(Some(816.5), 797.6);
        assert!(cells.contains("816.5"), "{cells}");
        assert!(cells.contains("+2.4%"), "{cells}");
        assert!(predicted_cells(Some(700.0), 800.0).contains("-12.5%"));
        let none = predicted_cells(None, 797.6);
        assert!(!none.contains('%') && none.contains('-'), "{none}");
    }

    /// Entry and exit are relative to the step's first entry, marks to the CTA's entry (clock
    /// cycles converted at the given rate), SMs carried through, unreached marks left empty.
    #[test]
    fn the_trace_csv_puts_every_cta_on_the_step_timeline() {
        // 1 GHz: one cycle per ns. CTA slots: marks 0-6, SM, entry ns, exit ns, marks 10-12.
        let cta = |entry_clk: u64, sm: u64, entry: u64, exit: u64, issued: u64| {
            [entry_clk, issued, 0, 0, 0, 0, 0, sm, entry, exit, 0, 0, 0]
        };
        let grids = [
            GridTrace {
                kind: OpKind::QkvRope,
                layer: Some(3),
                ctas: vec![cta(1000, 7, 5000, 9000, 1500), cta(2000, 9, 5200, 9100, 0)],
            },
            GridTrace {
                kind: OpKind::LmHead,
                layer: None,
                ctas: vec![cta(100, 7, 9050, 20000, 130)],
            },
        ];
        let mut csv = String::from(TRACE_CSV_HEADER);
        trace_csv(&mut csv, "pdl", &grids, 1e6);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count());
        assert_eq!(lines[1], "pdl,0,qkv_rope,3,0,7,0,4000,500,,,,,,");
        assert_eq!(lines[2], "pdl,0,qkv_rope,3,1,9,200,4100,,,,,,,");
        assert_eq!(lines[3], "pdl,1,lm_head,,0,7,4050,15000,30,,,,,,");
    }
}
