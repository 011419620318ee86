//! `mkc run`: prefill and decode on the GPU with one target; tokens, latency, correctness.

use mkc_backend::gpu::RunOptions;

use mkc_scheduler::Target;

use super::gpu_common::{check, percentiles, print_check, Session, Source};
use super::timeline::{print_breakdown, TimelineFiles};
use super::CommandError;
use crate::cli::RunArgs;

/// Runs `mkc run`.
pub fn run(args: RunArgs) -> Result<(), CommandError> {
    let source = Source::resolve(&args.common)?;
    let asked = args.target.map(|t| vec![t]);
    let target = source.targets(asked.as_deref(), &[Target::Pdl])?[0];
    let mut timeline = match &args.common.timeline {
        Some(path) => Some(TimelineFiles::create(path, &[target])?),
        None => None,
    };
    let mut s = Session::open(&args.common, source, &[target])?;
    let sms = mkc_backend::gpu::sm_count(&s.runner);
    let schedule = s.schedule(target, sms)?;
    // The simulator's prediction, made before the run (printed beside the measured median).
    let predicted = s
        .predict(&schedule, false, None, false)
        .map(|p| p.report.step.step_us);
    let graph = s.runner_for(target).capture(&schedule)?;
    let first = s.prompt.len() as u32;
    let decode: Vec<u32> = (first..first + s.generate - 1).collect();
    let checked = if args.common.no_check {
        Vec::new()
    } else {
        s.check_positions()
    };
    let capture = if args.logits_out.is_some() {
        decode.clone()
    } else {
        checked.clone()
    };
    let out = s.runner_for(target).run(
        &graph,
        &s.prompt,
        s.generate,
        &RunOptions {
            capture_logits: capture,
            capture_layers: checked.clone(),
            watchdog: s.watchdog,
        },
    )?;
    outln!(
        "mkc run: {} on {} ({}), prompt {} tokens, {} generated",
        s.model.name,
        s.gpu_name,
        target.name(),
        s.prompt.len(),
        out.tokens.len()
    );
    let ids: Vec<String> = out.tokens.iter().map(u32::to_string).collect();
    outln!("  tokens: {}", ids.join(","));
    let (med, p10, p90) = percentiles(&out.step_us);
    outln!(
        "  decode step: median {med:.1} us, p10 {p10:.1}, p90 {p90:.1} ({} steps){}",
        out.step_us.len(),
        predicted
            .filter(|_| med > 0.0)
            .map_or_else(String::new, |p| format!(
                "; the simulator predicted {p:.1} us ({:+.1}%)",
                (p - med) / med * 100.0
            ))
    );
    if let Some(path) = &args.logits_out {
        let rows: Vec<&Vec<f32>> = out.logits.iter().map(|(_, l)| l).collect();
        write_npy(path, &rows)
            .map_err(|e| CommandError::Input(format!("cannot write `{}`: {e}.", path.display())))?;
        outln!(
            "  logits of {} decode steps written to {}",
            rows.len(),
            path.display()
        );
    }
    if !checked.is_empty() {
        let w = s.host_weights()?;
        let captured: Vec<(u32, Vec<f32>)> = out
            .logits
            .iter()
            .filter(|(p, _)| checked.contains(p))
            .cloned()
            .collect();
        let c = check(&s.model, &w, &out.sequence, &captured, &out.layers);
        print_check(target.name(), &c);
        if !c.passed {
            return Err(CommandError::Internal(
                "the GPU logits disagree with the CPU reference".into(),
            ));
        }
    }
    let pos = s.timeline_position();
    if let Some(files) = timeline.as_mut() {
        let name = s.model.name.clone();
        let (path, b, edges) =
            files.write(s.runner_for_mut(target), &name, pos, target, &schedule)?;
        print_breakdown(target, &path, &b, &edges, &[]);
    }
    Ok(())
}

/// Writes a 2-D f32 array as .npy (version 1.0).
pub fn write_npy(path: &std::path::Path, rows: &[&Vec<f32>]) -> std::io::Result<()> {
    use std::io::Write;
    let cols = rows.first().map_or(0, |r| r.len());
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
        rows.len(),
        cols
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut f = std::io::BufWriter::new(mkc_ir::input::create_output(path)?);
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&(header.len() as u16).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    for r in rows {
        for v in r.iter() {
            f.write_all(&v.to_le_bytes())?;
        }
    }
    f.flush()
}
