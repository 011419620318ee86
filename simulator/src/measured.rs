//! Recorded GPU measurements of decode steps (`measured/steps.ron`): what `mkc calibrate`
//! puts the simulator beside, so that a change to the model or a profile is judged against
//! every measured configuration at once, not against the one run it was fitted on. This module
//! reads and checks the record and summarises the errors; the prediction of each step is the
//! CLI's (it builds the schedule `mkc bench` launched).

use mkc_ir::model::Tuning;
use mkc_ir::{FileKind, InputError};
use mkc_scheduler::Target;
use serde::Deserialize;

/// The band the simulator aims to be within on every measurement (the brief's ±5%).
pub const AIM_PERCENT: f64 = 5.0;

/// A record of measured decode steps.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Each measured configuration.
    pub steps: Vec<MeasuredStep>,
}

/// Which target a measurement timed (the record's spelling).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum MeasuredTarget {
    /// The persistent megakernel.
    Persistent,
    /// The PDL-linked chain.
    Pdl,
    /// The plain CUDA graph chain.
    Graph,
}

impl From<MeasuredTarget> for Target {
    fn from(t: MeasuredTarget) -> Target {
        match t {
            MeasuredTarget::Persistent => Target::Persistent,
            MeasuredTarget::Pdl => Target::Pdl,
            MeasuredTarget::Graph => Target::Graph,
        }
    }
}

/// One configuration as a lease ran it, and the step medians it measured.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredStep {
    /// The lease that measured it (its section in docs/perf.md).
    pub lease: String,
    /// The card's embedded device profile (`h100`, `h200`): the profile `bench` predicted with.
    pub card: String,
    /// A model file or checkpoint directory, relative to the record's directory, or an
    /// embedded model's name.
    pub model: String,
    /// The run's layer count, where it cut the model's.
    #[serde(default)]
    pub layers: Option<u32>,
    /// The run's prompt length (`--prompt-len`), where not the model file's.
    #[serde(default)]
    pub prompt_len: Option<u32>,
    /// The run's generated tokens (`--tokens`), where not the model file's.
    #[serde(default)]
    pub tokens: Option<u32>,
    /// The run's `--tune` knobs, replacing the model file's tuning.
    #[serde(default)]
    pub tuning: Option<Tuning>,
    /// The target timed.
    pub target: MeasuredTarget,
    /// The `mkc bench --ablate` rung timed, by its label (`attention`, `loads+waits`, ...: the
    /// work removed); the full step where absent.
    #[serde(default)]
    pub rung: Option<String>,
    /// The card's read bandwidth measured in the same run, GB/s (bench predicts at it).
    pub bandwidth_gbps: f64,
    /// The step medians of each run of this configuration, µs.
    pub measured_us: Vec<f64>,
}

/// One measurement beside its prediction.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    /// The lease.
    pub lease: String,
    /// The card's profile.
    pub card: String,
    /// The model as the record names it (with its layers where cut).
    pub model: String,
    /// The target.
    pub target: &'static str,
    /// The ablation rung, where the step had work removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rung: Option<String>,
    /// The median of the runs' medians, µs.
    pub measured_us: f64,
    /// The simulator's step, µs.
    pub predicted_us: f64,
    /// (predicted - measured) / measured, percent: negative is optimistic.
    pub error_percent: f64,
}

/// Per card: how the simulator does over its measurements.
#[derive(Debug, PartialEq, serde::Serialize)]
pub struct CardSummary {
    /// The card's profile.
    pub card: String,
    /// The target, where the summary is of one target's steps; None for all of the card's.
    pub target: Option<&'static str>,
    /// Measurements.
    pub count: usize,
    /// Of them, within ±[`AIM_PERCENT`].
    pub within_aim: usize,
    /// Root mean square of the errors, percent.
    pub rms_percent: f64,
    /// The error farthest from zero, percent.
    pub worst_percent: f64,
}

impl Record {
    /// Parses a record; `file` names it in errors, which name the step and field too.
    pub fn parse(file: &str, text: &str) -> Result<Record, InputError> {
        let r: Record = ron::Options::default()
            .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
            .from_str(text)
            .map_err(|e| InputError::from_ron(FileKind::Measured, file, text, &e))?;
        r.validate(file)?;
        Ok(r)
    }

    /// Checks what parsing cannot: figures in range, a measurement per step.
    fn validate(&self, file: &str) -> Result<(), InputError> {
        if self.steps.is_empty() {
            return Err(InputError::invalid(
                file,
                "steps",
                "the record lists no step",
                "add a MeasuredStep(...) for each measured configuration",
            ));
        }
        for (i, s) in self.steps.iter().enumerate() {
            let field = |f: &str| format!("steps[{i}].{f}");
            mkc_ir::device::check_bandwidth(
                file,
                &field("bandwidth_gbps"),
                s.bandwidth_gbps,
                "give the read bandwidth the run measured, in GB/s",
            )?;
            if s.measured_us.is_empty() {
                return Err(InputError::invalid(
                    file,
                    field("measured_us"),
                    "no measurement",
                    "list each run's step median in µs",
                ));
            }
            if let Some(v) = s
                .measured_us
                .iter()
                .find(|v| !(v.is_finite() && **v > 0.0 && **v < 1e9))
            {
                return Err(InputError::invalid(
                    file,
                    field("measured_us"),
                    format!("{v} is not a step time"),
                    "give each run's step median in µs, above 0 and below 1e9",
                ));
            }
            if let Some(r) = &s.rung {
                let persistent = s.target == MeasuredTarget::Persistent;
                let labels: Vec<String> = mkc_catalogue::Ablation::ladder(persistent)
                    .map(|a| a.label())
                    .collect();
                if !labels.contains(r) {
                    return Err(InputError::invalid(
                        file,
                        field("rung"),
                        format!("`{r}` is not a rung of the {:?} ladder", s.target),
                        format!("name one of {}", labels.join(", ")),
                    ));
                }
            }
            if let Some(t) = &s.tuning {
                t.validate(file)
                    .map_err(|e| prefix_field(e, &field("tuning")))?;
            }
        }
        Ok(())
    }
}

/// `e` with its field under `parent` (a step's tuning knobs are checked as a tuning file's).
fn prefix_field(e: InputError, parent: &str) -> InputError {
    match e {
        InputError::Invalid {
            file,
            field,
            problem,
            fix,
        } => InputError::Invalid {
            file,
            field: format!("{parent}.{}", field.trim_start_matches("tuning.")),
            problem,
            fix,
        },
        other => other,
    }
}

/// The median of `v` (not empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Per card, in the order the cards first appear.
/// Each card's summary, then one per target it has steps of, in the order the cards and
/// targets first appear.
pub fn summarise(rows: &[Row]) -> Vec<CardSummary> {
    let mut cards: Vec<&str> = Vec::new();
    for r in rows {
        if !cards.contains(&r.card.as_str()) {
            cards.push(&r.card);
        }
    }
    let mut out = Vec::new();
    for card in cards {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.card == card).collect();
        out.push(summary_of(card, None, &mine));
        let mut targets: Vec<&'static str> = Vec::new();
        for r in &mine {
            if !targets.contains(&r.target) {
                targets.push(r.target);
            }
        }
        for t in targets {
            let of: Vec<&Row> = mine.iter().copied().filter(|r| r.target == t).collect();
            out.push(summary_of(card, Some(t), &of));
        }
    }
    out
}

/// The summary of `rows` (not empty), of `card` and `target`.
fn summary_of(card: &str, target: Option<&'static str>, rows: &[&Row]) -> CardSummary {
    let errs: Vec<f64> = rows.iter().map(|r| r.error_percent).collect();
    CardSummary {
        card: card.to_string(),
        target,
        count: errs.len(),
        within_aim: errs.iter().filter(|e| e.abs() <= AIM_PERCENT).count(),
        rms_percent: (errs.iter().map(|e| e * e).sum::<f64>() / errs.len() as f64).sqrt(),
        worst_percent: errs
            .iter()
            .copied()
            .max_by(|a, b| a.abs().total_cmp(&b.abs()))
            .unwrap_or(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(card: &str, error_percent: f64) -> Row {
        Row {
            lease: "X".into(),
            card: card.into(),
            model: "m".into(),
            target: "pdl",
            rung: None,
            measured_us: 100.0,
            predicted_us: 100.0 + error_percent,
            error_percent,
        }
    }

    #[test]
    fn each_card_counts_its_errors_within_the_aim_and_keeps_the_worst_sign() {
        let rows = [
            row("h100", 2.0),
            row("h200", -8.0),
            row("h100", -5.0),
            row("h200", 3.0),
        ];
        let s = summarise(&rows);
        // Each card, then its one target.
        assert_eq!(s.len(), 4);
        assert_eq!(
            (s[0].card.as_str(), s[0].target, s[0].count, s[0].within_aim),
            ("h100", None, 2, 2)
        );
        assert_eq!(s[0].worst_percent, -5.0);
        assert_eq!((s[1].target, s[1].count), (Some("pdl"), 2));
        assert_eq!((s[2].card.as_str(), s[2].within_aim), ("h200", 1));
        assert_eq!(s[2].worst_percent, -8.0);
        assert!((s[2].rms_percent - (36.5f64).sqrt()).abs() < 1e-12);
        let mut mixed = rows.to_vec();
        mixed[2].target = "persistent";
        let s = summarise(&mixed);
        let h100: Vec<_> = s.iter().filter(|c| c.card == "h100").collect();
        assert_eq!(h100.len(), 3);
        assert_eq!(
            (h100[1].target, h100[1].count, h100[2].target, h100[2].count),
            (Some("pdl"), 1, Some("persistent"), 1)
        );
    }

    #[test]
    fn the_measured_figure_is_the_median_of_the_runs() {
        assert_eq!(median(&[722.4]), 722.4);
        assert_eq!(median(&[723.0, 722.4]), 722.7);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }

    const STEP: &str = r#"Record(steps: [MeasuredStep(lease: "FD", card: "h200", model: "llama1b",
        target: Persistent, bandwidth_gbps: 4580.0, measured_us: [722.4, 723.0])])"#;

    #[test]
    fn a_bad_figure_is_refused_naming_the_step_and_field() {
        assert!(Record::parse("r.ron", STEP).is_ok());
        for (from, to, field) in [
            ("4580.0", "0.0", "steps[0].bandwidth_gbps"),
            ("[722.4, 723.0]", "[]", "steps[0].measured_us"),
            (
                "target: Persistent,",
                "target: Persistent, rung: \"attention+weights+loads\",",
                "steps[0].rung",
            ),
            ("[722.4, 723.0]", "[722.4, -1.0]", "steps[0].measured_us"),
            (
                "target: Persistent,",
                "target: Persistent, tuning: Tuning(persistent_warps: Some(0)),",
                "steps[0].tuning.persistent_warps",
            ),
        ] {
            let e = Record::parse("r.ron", &STEP.replace(from, to))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("r.ron") && e.contains(field) && e.contains("Fix"),
                "{e}"
            );
        }
        let e = Record::parse("r.ron", &STEP.replace("lease:", "leese:"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("leese"), "{e}");
    }
}
