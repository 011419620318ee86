//! What `mkc run` and `mkc bench` share: opening the GPU, weights, prompt, schedules, and the
//! correctness check against the CPU reference.

use std::time::Duration;

use mkc_backend::gpu::{Gpu, Runner, WeightSource};
use mkc_backend::reference::{argmax_margin, first_wrong_value, rel_l2, LayerValues, Reference};
use mkc_backend::weights::{self, HostWeights};
use mkc_ir::Model;
use mkc_scheduler::{compile, CompileOptions, Policy, Schedule, Target, Trigger};
use serde::Serialize;

use super::CommandError;
use crate::cli::{GpuRunArgs, TargetArg};

/// Everything a GPU command needs, set up once.
pub struct Session {
    /// The model.
    pub model: Model,
    /// The runner (GPU, module, buffers, weights): the model's own build.
    pub runner: Runner,
    /// The chain targets' runner where the model has options only the persistent kernel runs
    /// (`Model::for_chain`: their kernels and O-projection weights differ); the same
    /// weights. None otherwise: `runner` serves every target.
    chain_runner: Option<Runner>,
    /// The GPU's name.
    pub gpu_name: String,
    /// Prompt tokens.
    pub prompt: Vec<u32>,
    /// Tokens to generate.
    pub generate: u32,
    /// The seed of random weights, if random.
    seed: Option<u32>,
    /// The checkpoint the weights come from, if one was given (opened and checked; its values
    /// are read as they are uploaded, and whole only for the check).
    host: Option<mkc_backend::checkpoint_reader::Checkpoint>,
    /// Watchdog limit per step.
    pub watchdog: Duration,
    /// PDL trigger placement.
    pub trigger: Trigger,
    /// SM assignment of the persistent target.
    pub policy: Policy,
    /// The schedule file's schedule, when one was given.
    loaded: Option<Schedule>,
}

/// The embedded profile of the GPU the driver calls `gpu_name` (an H100 compiles, predicts and
/// is probed against `h100`), or h200's, said on stderr, for a GPU with no embedded profile.
pub fn profile_for(gpu_name: &str) -> Result<mkc_ir::device::DeviceProfile, CommandError> {
    if let Some(d) = mkc_ir::embedded::device_for_gpu(gpu_name) {
        return Ok(d);
    }
    eprintln!("mkc: no device profile for {gpu_name}; using h200's");
    Ok(mkc_ir::embedded::resolve_device("h200")?)
}

/// The target if the CUDA backend runs it (all three do).
pub fn runnable(t: Target) -> Result<Target, CommandError> {
    Ok(t)
}

/// What a GPU command runs: a model, and the compiled schedule it came from when the command
/// was given a schedule file (whose target, trigger and tuning are then fixed).
pub struct Source {
    /// The model (a schedule's embedded one).
    pub model: Model,
    /// The schedule file's schedule, if one was given.
    pub schedule: Option<Schedule>,
}

impl Source {
    /// Resolves the command's MODEL argument and `--tune`.
    pub fn resolve(args: &GpuRunArgs) -> Result<Source, CommandError> {
        if let Some(s) = super::schedule_arg(&args.model)? {
            super::refuse_with_schedule(
                &args.model,
                &[
                    ("--trigger", args.trigger.is_some()),
                    ("--policy", args.policy.is_some()),
                    ("--tune", args.tune.is_some()),
                ],
            )?;
            let model = s.model.clone().ok_or_else(|| {
                CommandError::Input(format!(
                    "`{}` was written before schedules embedded their model. Fix: compile it \
                     again with mkc compile MODEL ... -o FILE",
                    args.model
                ))
            })?;
            runnable(s.target)?;
            return Ok(Source {
                model,
                schedule: Some(s),
            });
        }
        let (mut model, _) = super::resolve_model(&args.model)?;
        super::apply_tune(&mut model, args.tune.as_deref())?;
        Ok(Source {
            model,
            schedule: None,
        })
    }

    /// The targets to run: those asked for (each runnable, and the schedule's when there is
    /// one), else the schedule's, else `default` (persistent alone where the model has lowering
    /// options only the persistent kernel takes: the chain targets would lower it without
    /// them).
    pub fn targets(
        &self,
        asked: Option<&[TargetArg]>,
        default: &[Target],
    ) -> Result<Vec<Target>, CommandError> {
        let convert = |t: &TargetArg| runnable(mkc_scheduler::Target::from(*t));
        match (asked, &self.schedule) {
            (Some(a), Some(s)) => {
                let ts = a.iter().map(convert).collect::<Result<Vec<_>, _>>()?;
                if ts.iter().any(|&t| t != s.target) {
                    return Err(CommandError::Input(format!(
                        "the schedule file is a {} schedule; another target needs its own. Fix: \
                         drop --target(s), or compile one with mkc compile MODEL --target T -o FILE",
                        s.target.name()
                    )));
                }
                Ok(ts)
            }
            (Some(a), None) => a.iter().map(convert).collect(),
            (None, Some(s)) => Ok(vec![s.target]),
            (None, None) if self.model.lowering.persistent_only() => Ok(vec![Target::Persistent]),
            (None, None) => Ok(default.to_vec()),
        }
    }
}

impl Session {
    /// Checks the arguments, loads a checkpoint (before any GPU work, so that a bad one is
    /// refused on any machine), opens the GPU and prepares the model, weights and prompt;
    /// `targets` are the targets the command runs (a `--trigger` they would ignore is refused).
    pub fn open(
        args: &GpuRunArgs,
        source: Source,
        targets: &[Target],
    ) -> Result<Session, CommandError> {
        let Source {
            mut model,
            schedule: loaded,
        } = source;
        if args.trigger.is_some() && !targets.contains(&Target::Pdl) {
            return Err(CommandError::Input(
                "--trigger applies to the pdl target only, which this run does not include. \
                 Fix: drop --trigger or add pdl to the targets."
                    .into(),
            ));
        }
        if args.policy.is_some() && !targets.contains(&Target::Persistent) {
            return Err(CommandError::Input(
                "--policy applies to the persistent target only, which this run does not \
                 include. Fix: drop --policy or add persistent to the targets."
                    .into(),
            ));
        }
        // The check's CPU reference holds the weights in host memory (a run uploads a
        // checkpoint's tensor by tensor).
        if !args.no_check {
            mkc_backend::memory::check_host_fits(
                "the CPU reference's weights (bf16)",
                mkc_backend::memory::weight_bytes(&model),
                mkc_backend::memory::host_available(),
                "--no-check (the step times need no reference), or fewer layers in the model \
                 file",
            )
            .map_err(CommandError::Input)?;
        }
        let (seed, host) = match weights::parse_seed(&args.weights) {
            Some(seed) => (Some(seed), None),
            None if args.weights.starts_with("random:") => {
                return Err(CommandError::Input(format!(
                    "--weights `{}`: the seed must be an unsigned 32-bit number, e.g. random:1.",
                    args.weights
                )))
            }
            None => (
                None,
                Some(mkc_backend::checkpoint_reader::Checkpoint::open(
                    std::path::Path::new(&args.weights),
                    &model,
                )?),
            ),
        };
        let generate = args.tokens.unwrap_or(model.workload.generate);
        let prompt = match &args.prompt_ids {
            Some(ids) => ids.clone(),
            None => {
                let n = args.prompt_len.unwrap_or(model.workload.prompt_len);
                let s = seed.unwrap_or(0);
                (0..n)
                    .map(|i| weights::mix(s ^ 0x00C0_FFEE ^ weights::mix(i)) % model.geometry.vocab)
                    .collect()
            }
        };
        if generate == 0 || prompt.is_empty() {
            return Err(CommandError::Input(
                "--tokens and the prompt length must be at least 1.".into(),
            ));
        }
        if loaded.is_none() {
            // The run's workload is the one its kernels (the persistent attention chunk), its
            // schedule and its prediction are made for, not the model file's.
            model.workload = super::run_workload(&model.workload, prompt.len(), generate)?;
        }
        let gpu = Gpu::open()?;
        let gpu_name = gpu.name.clone();
        // The knobs the model leaves unset take this card's measured best (its profile's).
        super::settle_unset_knobs(&mut model, &profile_for(&gpu_name)?);
        let source = || match (&seed, &host) {
            (Some(s), _) => WeightSource::Random(*s),
            (None, Some(c)) => WeightSource::Checkpoint(c),
            (None, None) => unreachable!("one weight source"),
        };
        let runner = Runner::new(gpu, &model, source())?;
        if let Some(c) = &host {
            c.note_rounding();
        }
        // A chain target on a model with options only the persistent kernel runs takes the
        // model as the chain targets lower it (the kernels' header, the O-projection's
        // weights unsplit): a runner of its own, with the same weights.
        super::note_chain_lowering(&model, targets);
        let chain_runner = if model.lowering.persistent_only()
            && targets.iter().any(|t| *t != Target::Persistent)
        {
            Some(Runner::new(Gpu::open()?, &model.for_chain(), source())?)
        } else {
            None
        };
        Ok(Session {
            model,
            runner,
            chain_runner,
            gpu_name,
            prompt,
            generate,
            seed,
            host,
            // The flag's parser bounds it to (0, one day], which always converts.
            watchdog: Duration::try_from_secs_f64(args.watchdog)
                .map_err(|e| CommandError::Input(format!("--watchdog: {e}.")))?,
            trigger: args.trigger.map_or(Trigger::Early, Trigger::from),
            policy: args.policy.map_or(Policy::RoundRobin, Policy::from),
            loaded,
        })
    }

    /// The runner that runs `target`: the chain targets' own where there is one.
    pub fn runner_for(&self, target: Target) -> &Runner {
        match &self.chain_runner {
            Some(r) if target != Target::Persistent => r,
            _ => &self.runner,
        }
    }

    /// [`Session::runner_for`], mutable (a traced step records into the runner).
    pub fn runner_for_mut(&mut self, target: Target) -> &mut Runner {
        match &mut self.chain_runner {
            Some(r) if target != Target::Persistent => r,
            _ => &mut self.runner,
        }
    }

    /// The chain schedule of `target` for this GPU: the schedule file's, when one was given
    /// (it must have been compiled for this GPU's SM count), else compiled now.
    pub fn schedule(&self, target: Target, sms: u32) -> Result<Schedule, CommandError> {
        if let Some(s) = &self.loaded {
            if s.device.sms != sms {
                return Err(CommandError::Input(format!(
                    "the schedule was compiled for {} SMs and this GPU has {sms}. Fix: compile \
                     it with --sms {sms}",
                    s.device.sms
                )));
            }
            return Ok(s.clone());
        }
        let device = profile_for(&self.gpu_name)?.with_sms(sms);
        let opts = CompileOptions {
            target,
            trigger: self.trigger,
            policy: self.policy,
            ..CompileOptions::default()
        };
        Ok(compile(&self.model, &device, &opts).schedule)
    }

    /// The simulator's prediction of `sched` (this session's schedule of a target), with its
    /// ablation ladder when `ablate`, at `bandwidth_gbps` where the card's was measured (else
    /// the profile's), and with `growth` its growth with the context over this run's decode
    /// steps (µs per 100 positions, as `bench` measures it); None, said on stderr, where the
    /// simulator refuses it.
    pub fn predict(
        &self,
        sched: &Schedule,
        ablate: bool,
        bandwidth_gbps: Option<f64>,
        growth: bool,
    ) -> Option<super::simulate::Prediction> {
        let as_written = self.loaded.is_some();
        // The timed steps' KV lengths: the first decode step's, then one more each.
        let first = self.prompt.len() as u32 + 1;
        let between = growth.then(|| (first, first + self.generate.saturating_sub(2)));
        let (model, trigger) = (&self.model, self.trigger);
        match super::simulate::predict(
            model,
            sched,
            as_written,
            trigger,
            ablate,
            bandwidth_gbps,
            between,
        ) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("mkc: no prediction for {}: {e}", sched.target.name());
                None
            }
        }
    }

    /// The decode position a traced step runs at (`--timeline`, `--cta-phases`): the middle
    /// one, the KV length of the median step a benchmark reports.
    pub fn timeline_position(&self) -> u32 {
        self.prompt.len() as u32 + self.generate.saturating_sub(1) / 2
    }

    /// Decode positions checked against the reference: first, middle and last.
    pub fn check_positions(&self) -> Vec<u32> {
        let first = self.prompt.len() as u32;
        let last = first + self.generate - 2;
        if self.generate < 2 {
            return Vec::new();
        }
        let mut v = vec![first, first + (last - first) / 2, last];
        v.dedup();
        v
    }

    /// Host weights for the reference: the checkpoint's, read whole, or generated from the
    /// seed (the host's memory for them was checked when the session opened).
    pub fn host_weights(&self) -> Result<HostWeights, CommandError> {
        match (&self.host, self.seed) {
            (Some(c), _) => Ok(c.host_weights()?),
            (None, Some(seed)) => Ok(weights::generate(&self.model, seed)),
            (None, None) => unreachable!("one weight source"),
        }
    }
}

/// One checked position.
#[derive(Clone, Debug, Serialize)]
pub struct PositionCheck {
    /// Position.
    pub pos: u32,
    /// Relative L2 error against the reference that stores K/V in bf16 as the kernels do.
    pub rel_l2: f64,
    /// Relative L2 error against the pure f32 reference.
    pub rel_l2_f32: f64,
    /// GPU argmax.
    pub gpu_argmax: usize,
    /// Reference argmax.
    pub ref_argmax: usize,
    /// Reference top-2 margin.
    pub margin: f32,
    /// Whether the margin is clear (larger than the error budget can flip).
    pub clear: bool,
    /// Where the logits fail and the run copied its layers back: the first layer value that
    /// departs from the reference's (`reference::first_wrong_value`), e.g. "L3 o: rel L2 8.7e-1".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_wrong: Option<String>,
}

/// Relative L2 error above which logits, and a layer's values, fail their check.
const CHECK_TOLERANCE: f64 = 1e-2;

/// The check of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// Per position.
    pub positions: Vec<PositionCheck>,
    /// Whether every criterion held.
    pub passed: bool,
}

/// Compares captured GPU logits of one or more runs with the CPU reference, teacher-forced
/// with `sequence` (the runs must have produced it). The reference runs once; beside the
/// checks it returns its top-2 margin, and whether that is clear, at every position it
/// stepped (0 to the last captured), so that a divergence there needs no second pass. Where a
/// run's logits fail at a position whose layer values it captured (`layers[i]`, empty for
/// none), the check names the first of them that departs from the reference's.
pub fn check_many(
    model: &Model,
    w: &HostWeights,
    sequence: &[u32],
    runs: &[&[(u32, Vec<f32>)]],
    layers: &[&[(u32, Vec<LayerValues>)]],
) -> (Vec<Check>, Vec<(f32, bool)>) {
    let last = runs
        .iter()
        .flat_map(|r| r.iter().map(|(p, _)| *p))
        .max()
        .unwrap_or(0);
    let mut bf = Reference::new(model, w, true);
    let mut f32_ref = Reference::new(model, w, false);
    let mut checks: Vec<Check> = runs
        .iter()
        .map(|_| Check {
            positions: Vec::new(),
            passed: false,
        })
        .collect();
    let mut margins = Vec::with_capacity(last as usize + 1);
    for pos in 0..=last {
        let tok = sequence[pos as usize];
        let want = bf.step(tok, pos);
        let want_f32 = f32_ref.step(tok, pos);
        let (ref_argmax, margin) = argmax_margin(&want);
        let clear = margin_clear(&want, margin);
        margins.push((margin, clear));
        for (i, (run, c)) in runs.iter().zip(checks.iter_mut()).enumerate() {
            if let Some((_, got)) = run.iter().find(|(p, _)| *p == pos) {
                let (gpu_argmax, _) = argmax_margin(got);
                let rel = rel_l2(got, &want);
                let first_wrong = (rel.is_nan() || rel >= CHECK_TOLERANCE)
                    .then(|| {
                        let captured = layers.get(i)?.iter().find(|(p, _)| *p == pos)?;
                        first_wrong_value(&captured.1, bf.last_layers(), CHECK_TOLERANCE)
                    })
                    .flatten();
                c.positions.push(PositionCheck {
                    pos,
                    rel_l2: rel,
                    rel_l2_f32: rel_l2(got, &want_f32),
                    gpu_argmax,
                    ref_argmax,
                    margin,
                    clear,
                    first_wrong,
                });
            }
        }
    }
    for c in &mut checks {
        c.passed = !c.positions.is_empty()
            && c.positions.iter().all(|p| {
                p.rel_l2.is_finite()
                    && p.rel_l2 < CHECK_TOLERANCE
                    && (!p.clear || p.gpu_argmax == p.ref_argmax)
            });
    }
    (checks, margins)
}

/// Whether the reference's top-2 margin in `logits` is clear: larger than the error budget
/// (5% of the logits' RMS) can flip. The checks and the targets' divergence share it.
fn margin_clear(logits: &[f32], margin: f32) -> bool {
    let rms =
        (logits.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / logits.len() as f64).sqrt();
    margin as f64 > 0.05 * rms
}

/// Where a target's tokens first part from the first target's: the position whose logits chose
/// the differing token, and the reference's top-2 margin there on the history both share.
/// Targets whose float sums run in another order may part at a near tie (the margin not
/// clear): a rounding question, after which each is checked on its own tokens. A clear margin
/// is a wrong token.
#[derive(Clone, Debug, Serialize)]
pub struct Divergence {
    /// The target that parted.
    pub target: String,
    /// The position whose argmax differs.
    pub pos: u32,
    /// The reference's top-2 margin there.
    pub margin: f32,
    /// Whether that margin is clear.
    pub clear: bool,
}

/// The index of the first token where `b` differs from `a` (None when they agree).
pub fn first_difference(a: &[u32], b: &[u32]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then(|| a.len().min(b.len())))
}

/// Where each target's tokens (`sequences[i]`, prompt and generated) part from the first
/// target's: the position whose logits chose the first differing token, with `margin_at(pos)`
/// (the reference's top-2 margin there and whether it is clear, on the history both share).
pub fn find_divergences(
    names: &[&str],
    sequences: &[&[u32]],
    mut margin_at: impl FnMut(u32) -> (f32, bool),
) -> Vec<Divergence> {
    let mut out = Vec::new();
    for (name, seq) in names.iter().zip(sequences).skip(1) {
        if let Some(d) = first_difference(sequences[0], seq) {
            let pos = d.saturating_sub(1) as u32;
            let (margin, clear) = margin_at(pos);
            out.push(Divergence {
                target: name.to_string(),
                pos,
                margin,
                clear,
            });
        }
    }
    out
}

/// The reference's top-2 margin, and whether it is clear, at position `pos`, teacher-forced
/// with `sequence` up to it.
pub fn reference_margin(model: &Model, w: &HostWeights, sequence: &[u32], pos: u32) -> (f32, bool) {
    let mut bf = Reference::new(model, w, true);
    let mut last = Vec::new();
    for p in 0..=pos {
        last = bf.step(sequence[p as usize], p);
    }
    let (_, margin) = argmax_margin(&last);
    (margin, margin_clear(&last, margin))
}

/// [`check_many`] for one run.
pub fn check(
    model: &Model,
    w: &HostWeights,
    sequence: &[u32],
    captured: &[(u32, Vec<f32>)],
    layers: &[(u32, Vec<LayerValues>)],
) -> Check {
    check_many(model, w, sequence, &[captured], &[layers])
        .0
        .remove(0)
}

/// Prints a check as lines.
pub fn print_check(label: &str, c: &Check) {
    for p in &c.positions {
        outln!(
            "  check {label} pos {:>4}: rel L2 {:.2e} (f32 ref {:.2e}), argmax gpu {} ref {} (margin {:.3}{})",
            p.pos,
            p.rel_l2,
            p.rel_l2_f32,
            p.gpu_argmax,
            p.ref_argmax,
            p.margin,
            if p.clear { ", clear" } else { ", not clear" }
        );
        if let Some(wrong) = &p.first_wrong {
            outln!("    first layer value off the reference: {wrong}");
        }
    }
    outln!(
        "  check {label}: {}",
        if c.passed { "PASSED" } else { "FAILED" }
    );
}

/// Mean of a sample (NaN when empty, as `percentiles`).
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

/// Least-squares growth of the step time with the context, in µs per 100 positions: `v` holds
/// runs of `per_run` steps each, step `i` of a run one position after step `i - 1`. Tells
/// whether a target's spread (p10 to p90) is its attention growing with the KV history or noise
/// (NaN when there are fewer than two positions).
pub fn context_growth_per_100(v: &[f64], per_run: usize) -> f64 {
    if per_run < 2 {
        return f64::NAN;
    }
    let points: Vec<(f64, f64)> = v
        .iter()
        .enumerate()
        .map(|(i, &y)| ((i % per_run) as f64, y))
        .collect();
    mkc_backend::line_fit::Line::through(&points)
        .and_then(|l| l.slope)
        .map_or(f64::NAN, |s| 100.0 * s)
}

/// (median, p10, p90) of a sample.
pub fn percentiles(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.1), at(0.9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_growth_recovers_a_ramp_repeated_over_runs() {
        // Two runs of 50 steps: 900 µs + 0.2 µs per position, with alternating noise.
        let ramp: Vec<f64> = (0..100)
            .map(|i| 900.0 + 0.2 * (i % 50) as f64 + if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let g = context_growth_per_100(&ramp, 50);
        assert!((g - 20.0).abs() < 0.5, "{g}");
        // The same values read as one run of 100 positions halve the slope's meaning.
        assert!((context_growth_per_100(&ramp, 100) - 20.0).abs() > 5.0);
        let flat = vec![900.0; 40];
        assert_eq!(context_growth_per_100(&flat, 20), 0.0);
        assert!(context_growth_per_100(&flat, 1).is_nan());
        assert!(context_growth_per_100(&[], 20).is_nan());
    }

    #[test]
    fn first_difference_finds_where_two_token_runs_part() {
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(first_difference(&[1, 2, 3], &[1, 5, 3]), Some(1));
        assert_eq!(first_difference(&[1, 2, 3], &[9, 2, 3]), Some(0));
        assert_eq!(first_difference(&[1, 2], &[1, 2, 3]), Some(2));
    }

    #[test]
    fn targets_that_part_are_reported_where_they_part_with_the_references_margin() {
        let first: &[u32] = &[7, 7, 1, 2, 3];
        let same: &[u32] = &[7, 7, 1, 2, 3];
        let parted: &[u32] = &[7, 7, 1, 9, 9];
        let mut asked = Vec::new();
        let d = find_divergences(
            &["persistent", "pdl", "graph"],
            &[first, same, parted],
            |pos| {
                asked.push(pos);
                (0.01, false)
            },
        );
        // Token 3 differs: the logits at position 2 chose it, on the history both share.
        assert_eq!(asked, vec![2]);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].target.as_str(), d[0].pos, d[0].clear),
            ("graph", 2, false)
        );
        let none = find_divergences(&["a", "b"], &[first, same], |_| unreachable!());
        assert!(none.is_empty());
    }

    /// Where a run's logits fail and it captured its layers, the check names the first layer
    /// value (in the step's order) that departs from the reference's; where they pass, none.
    #[test]
    fn a_failing_check_names_the_first_layer_value_off_the_reference() {
        let model = mkc_ir::embedded::resolve_model("tiny").unwrap();
        let w = mkc_backend::weights::generate(&model, 3);
        let sequence: Vec<u32> = (0..6)
            .map(|i| (i * 37 + 5) % model.geometry.vocab)
            .collect();
        let mut r = Reference::new(&model, &w, true);
        let mut logits = Vec::new();
        for p in 0..=4 {
            logits = r.step(sequence[p as usize], p);
        }
        let layers = r.last_layers().to_vec();
        let (good, _) = check_many(
            &model,
            &w,
            &sequence,
            &[&[(4, logits.clone())]],
            &[&[(4, layers.clone())]],
        );
        assert!(good[0].passed && good[0].positions[0].first_wrong.is_none());
        // Layer 1's O-projection output and everything after it wrong, as a broken O-projection
        // would leave them; the logits with them.
        let mut bad_layers = layers;
        let l1 = &mut bad_layers[1];
        for v in l1.o.iter_mut().chain(l1.h.iter_mut()) {
            *v = -*v;
        }
        let bad_logits: Vec<f32> = logits.iter().map(|v| -v).collect();
        let (bad, _) = check_many(
            &model,
            &w,
            &sequence,
            &[&[(4, bad_logits)]],
            &[&[(4, bad_layers)]],
        );
        assert!(!bad[0].passed);
        let wrong = bad[0].positions[0].first_wrong.as_deref().unwrap();
        assert!(wrong.starts_with("L1 o: rel L2"), "{wrong}");
    }

    /// The margins `check_many` returns are the ones a pass of their own finds, so that bench
    /// may take a divergence's margin from the check's pass.
    #[test]
    fn the_checks_margins_are_the_references_at_every_position() {
        let model = mkc_ir::embedded::resolve_model("tiny").unwrap();
        let w = mkc_backend::weights::generate(&model, 3);
        let sequence: Vec<u32> = (0..6)
            .map(|i| (i * 37 + 5) % model.geometry.vocab)
            .collect();
        let logits = |pos: u32| {
            let mut r = Reference::new(&model, &w, true);
            let mut last = Vec::new();
            for p in 0..=pos {
                last = r.step(sequence[p as usize], p);
            }
            last
        };
        let captured = vec![(1, logits(1)), (4, logits(4))];
        let (checks, margins) = check_many(&model, &w, &sequence, &[&captured], &[]);
        assert!(checks[0].passed, "the reference's own logits pass");
        assert_eq!(margins.len(), 5, "positions 0 to the last captured");
        for (pos, m) in margins.iter().enumerate() {
            assert_eq!(
                *m,
                reference_margin(&model, &w, &sequence, pos as u32),
                "{pos}"
            );
        }
    }

    #[test]
    fn a_clear_margin_is_larger_than_five_percent_of_the_logits_rms() {
        let logits = [1.0f32, -1.0, 1.0, -1.0];
        assert!(margin_clear(&logits, 0.06));
        assert!(!margin_clear(&logits, 0.04));
    }
}
