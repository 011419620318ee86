//! `mkc calibrate`: the simulator beside every decode step the record says was measured on a
//! GPU (`measured/steps.ron`, read by `mkc_simulator::measured`), each predicted as `mkc bench`
//! predicted it (the card's profile, the run's measured bandwidth, the same schedule), with its
//! error, and per card how many are within the ±5% the simulator aims for.

use std::path::{Path, PathBuf};

use mkc_ir::FileKind;
use mkc_scheduler::{compile, CompileOptions, Policy, Target, Trigger};
use mkc_simulator::measured::{median, summarise, MeasuredStep, Record, Row, AIM_PERCENT};

use super::CommandError;
use crate::cli::CalibrateArgs;

/// The model step `i` names: the record-relative file or checkpoint, else an embedded name;
/// with its layers, workload and tuning, its unset knobs the card's (as `bench` builds it).
fn step_model(
    record_dir: &Path,
    file: &str,
    i: usize,
    s: &MeasuredStep,
    card: &mkc_ir::device::DeviceProfile,
) -> Result<mkc_ir::Model, CommandError> {
    let within = |e: CommandError| {
        CommandError::Input(format!(
            "{file}: steps[{i}] ({} on {}): {e}",
            s.model, s.card
        ))
    };
    let local = record_dir.join(&s.model);
    let arg = if local.exists() {
        local.display().to_string()
    } else {
        s.model.clone()
    };
    let (mut model, _) = super::resolve_model(&arg).map_err(within)?;
    if let Some(t) = &s.tuning {
        model.tuning = t.clone();
    }
    if let Some(n) = s.layers {
        model.geometry.layers = n;
        model
            .validate(&format!("{file}: steps[{i}].layers"))
            .map_err(|e| within(e.into()))?;
    }
    super::override_workload(&mut model, s.prompt_len, s.tokens).map_err(within)?;
    super::settle_knobs(&mut model, card);
    mkc_simulator::check_setup(&model, file, card, &[s.target.into()])
        .map_err(|e| within(e.into()))?;
    Ok(model)
}

/// Step `i`'s prediction, as `bench` made it: the schedule compiled for the card's profile,
/// the kernels' compiled figures where NVRTC has them, at the measured bandwidth.
fn predict_step(
    record_dir: &Path,
    file: &str,
    i: usize,
    s: &MeasuredStep,
    profiles: &[(String, mkc_ir::device::DeviceProfile)],
) -> Result<Row, CommandError> {
    let card = match profiles.iter().find(|(c, _)| *c == s.card) {
        Some((_, p)) => p.clone(),
        None => mkc_ir::embedded::resolve_device(&s.card).map_err(|e| {
            CommandError::Input(format!(
                "{file}: steps[{i}].card: {e} (the card's embedded profile, as bench took it)"
            ))
        })?,
    };
    let model = step_model(record_dir, file, i, s, &card)?;
    let target = Target::from(s.target);
    let opts = CompileOptions {
        target,
        trigger: Trigger::Early,
        policy: Policy::RoundRobin,
        ..CompileOptions::default()
    };
    let schedule = compile(&model, &card, &opts).schedule;
    let p = super::simulate::predict(
        &model,
        &schedule,
        false,
        Trigger::Early,
        s.rung.is_some(),
        Some(s.bandwidth_gbps),
        None,
    )?;
    let measured_us = median(&s.measured_us);
    let predicted_us = match &s.rung {
        None => p.report.step.step_us,
        Some(r) => p
            .report
            .ablation
            .iter()
            .find(|a| a.removed == *r)
            .map(|a| a.step_us)
            .ok_or_else(|| {
                CommandError::Internal(format!(
                    "{file}: steps[{i}].rung `{r}`: the simulator's ladder has no such rung"
                ))
            })?,
    };
    let shown = s.model.trim_start_matches("../");
    let mut model_name = match s.layers {
        Some(n) => format!("{shown} ({n} layers)"),
        None => shown.to_string(),
    };
    // The knobs the run's --tune set, abbreviated by their initials (boundary inflight: bi).
    if let Some(t) = &s.tuning {
        for (name, v) in t.knobs() {
            if let Some(v) = v {
                let short: String = name.split('_').filter_map(|w| w.chars().next()).collect();
                model_name.push_str(&format!(" {short}={v}"));
            }
        }
    }
    Ok(Row {
        lease: s.lease.clone(),
        card: s.card.clone(),
        model: model_name,
        target: target.name(),
        rung: s.rung.clone(),
        measured_us,
        predicted_us,
        error_percent: 100.0 * (predicted_us - measured_us) / measured_us,
    })
}

/// The `--profile CARD=FILE` replacements: each card once, each file a valid profile.
fn replacement_profiles(
    given: &[String],
) -> Result<Vec<(String, mkc_ir::device::DeviceProfile)>, CommandError> {
    let mut out: Vec<(String, mkc_ir::device::DeviceProfile)> = Vec::new();
    for g in given {
        let Some((card, path)) = g
            .split_once('=')
            .filter(|(c, p)| !c.is_empty() && !p.is_empty())
        else {
            return Err(CommandError::Input(format!(
                "--profile {g}: expected CARD=FILE. Fix: name the card the record says \
                 (h100, h200) and a profile file, e.g. --profile h200=my_h200.ron"
            )));
        };
        if out.iter().any(|(c, _)| c == card) {
            return Err(CommandError::Input(format!(
                "--profile names card `{card}` twice. Fix: give one profile per card"
            )));
        }
        let p = std::path::Path::new(path);
        let text = mkc_ir::input::read_text(p, FileKind::Device)?;
        let profile = mkc_ir::device::DeviceProfile::parse(path, &text)?;
        out.push((card.to_string(), profile));
    }
    Ok(out)
}

/// Runs `mkc calibrate`.
pub fn run(args: CalibrateArgs) -> Result<(), CommandError> {
    let profiles = replacement_profiles(&args.profiles)?;
    let path: PathBuf = args.record.clone();
    let file = path.display().to_string();
    let text = mkc_ir::input::read_text(&path, FileKind::Measured)?;
    let record = Record::parse(&file, &text)?;
    if let Some((card, _)) = profiles
        .iter()
        .find(|(c, _)| !record.steps.iter().any(|s| s.card == *c))
    {
        return Err(CommandError::Input(format!(
            "--profile {card}=...: {file} has no step measured on card `{card}`. Fix: name a \
             card the record lists"
        )));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let rows = record
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| args.card.as_ref().is_none_or(|c| *c == s.card))
        .map(|(i, s)| predict_step(dir, &file, i, s, &profiles))
        .collect::<Result<Vec<_>, _>>()?;
    if rows.is_empty() {
        return Err(CommandError::Input(format!(
            "{file}: no step was measured on card `{}`. Fix: name a card the record lists, or \
             drop --card",
            args.card.as_deref().unwrap_or("")
        )));
    }
    let cards = summarise(&rows);
    if args.json {
        let v = serde_json::json!({
            "schema": super::schema("calibrate"),
            "record": file,
            "compiled_figures": mkc_backend::kernels::nvrtc_present(),
            "profiles": profiles.iter().map(|(c, p)| serde_json::json!({"card": c, "profile": p.name})).collect::<Vec<_>>(),
            "aim_percent": AIM_PERCENT,
            "steps": rows,
            "cards": cards,
        });
        outln!("{v}");
        return Ok(());
    }
    outln!(
        "mkc calibrate: the simulator beside {} measured steps ({file}; µs); kernel figures: {}",
        rows.len(),
        if mkc_backend::kernels::nvrtc_present() {
            "NVRTC's, as bench's"
        } else {
            "declared (no NVRTC here; bench predicted with NVRTC's)"
        }
    );
    outln!(
        "  {:<5} {:<5} {:<38} {:<10} {:<30} {:>9} {:>9} {:>7}",
        "lease",
        "card",
        "model",
        "target",
        "removed (bench --ablate)",
        "measured",
        "predicted",
        "error"
    );
    for r in &rows {
        outln!(
            "  {:<5} {:<5} {:<38} {:<10} {:<30} {:>9.1} {:>9.1} {:>+6.1}%{}",
            r.lease,
            r.card,
            r.model,
            r.target,
            r.rung.as_deref().unwrap_or("-"),
            r.measured_us,
            r.predicted_us,
            r.error_percent,
            if r.error_percent.abs() > AIM_PERCENT {
                "  (outside ±5%)"
            } else {
                ""
            }
        );
    }
    for (card, p) in &profiles {
        outln!(
            "  ({card}'s steps predicted with the profile `{}` given)",
            p.name
        );
    }
    for c in &cards {
        outln!(
            "  {}: {} of {} within ±{AIM_PERCENT}%, RMS {:.1}%, worst {:+.1}%",
            match c.target {
                None => c.card.clone(),
                Some(t) => format!("  {} {t}", c.card),
            },
            c.within_aim,
            c.count,
            c.rms_percent,
            c.worst_percent
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_of_the_committed_record_names_a_model_its_card_can_plan() {
        let path = Path::new("measured/steps.ron");
        let text = std::fs::read_to_string(path).unwrap();
        let record = Record::parse("measured/steps.ron", &text).unwrap();
        let dir = path.parent().unwrap();
        for (i, s) in record.steps.iter().enumerate() {
            let card = mkc_ir::embedded::resolve_device(&s.card).unwrap();
            let m = step_model(dir, "measured/steps.ron", i, s, &card)
                .unwrap_or_else(|e| panic!("steps[{i}]: {e}"));
            if let Some(n) = s.layers {
                assert_eq!(m.geometry.layers, n);
            }
        }
    }
}
