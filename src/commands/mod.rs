//! Subcommand implementations and the error type they share.

mod bench;
mod calibrate;
mod compile;
mod gpu_common;
mod kernels;
mod model;
mod occupancy;
mod probe;
mod run;
mod simulate;
mod timeline;

/// The `schema` value of a command's JSON output: one shape per command, versioned.
pub fn schema(command: &str) -> String {
    format!("mkc.{command}/1")
}

use crate::cli::{Cli, Command};

/// Why a command failed, and which exit code says so.
#[derive(Debug)]
pub enum CommandError {
    /// Bad input from the user (exit code 2).
    Input(String),
    /// The tool found a fault in its own output (exit code 1).
    Internal(String),
}

impl CommandError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            CommandError::Input(_) => 2,
            CommandError::Internal(_) => 1,
        }
    }
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::Input(m) | CommandError::Internal(m) => f.write_str(m),
        }
    }
}

impl From<mkc_backend::BackendError> for CommandError {
    fn from(e: mkc_backend::BackendError) -> Self {
        use mkc_backend::BackendError as B;
        match e {
            B::NoDevice(_) | B::NoNvrtc | B::Unsupported(_) | B::Weights(_) => {
                CommandError::Input(e.to_string())
            }
            _ => CommandError::Internal(e.to_string()),
        }
    }
}

impl From<mkc_ir::InputError> for CommandError {
    fn from(e: mkc_ir::InputError) -> Self {
        CommandError::Input(e.to_string())
    }
}

impl crate::cli::SetupArgs {
    /// The model (its unset knobs filled from the device profile's `tuning`) and the device
    /// (with any `--sms` override) these arguments name, checked together for `targets` by the
    /// one validation every command shares ([`mkc_simulator::check_setup`]).
    fn resolve(
        &self,
        targets: &[mkc_scheduler::Target],
    ) -> Result<(mkc_ir::Model, mkc_ir::device::DeviceProfile), CommandError> {
        let (mut model, file) = resolve_model(&self.model)?;
        apply_tune(&mut model, self.tune.as_deref())?;
        override_workload(&mut model, self.prompt_len, self.tokens)?;
        let mut device =
            mkc_ir::embedded::resolve_device(self.device.as_deref().unwrap_or("h200"))?;
        if let Some(n) = self.sms {
            // The range is enforced by the flag's parser.
            device = device.with_sms(n);
        }
        // The knobs the model leaves unset are the card's, and its split-KV parts the
        // workload's, as the kernels built for it take them: the schedule and its prediction
        // describe that build.
        settle_unset_knobs(&mut model, &device);
        mkc_simulator::check_setup(&model, &file, &device, targets)?;
        note_chain_lowering(&model, targets);
        Ok((model, device))
    }

    /// Refuses the scheduling flags that `targets` would ignore, naming the flag: the policy
    /// applies to persistent only, the trigger to pdl only, the grid grouping to the chains.
    fn refuse_ignored(&self, targets: &[mkc_scheduler::Target]) -> Result<(), CommandError> {
        use mkc_scheduler::Target as T;
        let has = |t| targets.contains(&t);
        let names: Vec<&str> = targets.iter().map(|t| t.name()).collect();
        let refuse = |flag: &str, needs: &str| {
            Err(CommandError::Input(format!(
                "{flag} applies to {needs} only, and --target {} would ignore it. Fix: drop \
                 {flag} or choose a target it applies to.",
                names.join(",")
            )))
        };
        if self.policy.is_some() && !has(T::Persistent) {
            return refuse("--policy", "the persistent target");
        }
        if self.trigger.is_some() && !has(T::Pdl) {
            return refuse("--trigger", "the pdl target");
        }
        Ok(())
    }
}

/// `workload` with the run's prompt length and tokens (`--prompt-len`/`--prompt-ids`,
/// `--tokens`): refused where they do not fit its KV capacity, before any GPU work.
pub fn run_workload(
    workload: &mkc_ir::model::Workload,
    prompt_len: usize,
    generate: u32,
) -> Result<mkc_ir::model::Workload, CommandError> {
    let max = workload.max_seq_len as u64;
    if prompt_len as u64 + generate as u64 > max {
        return Err(CommandError::Input(format!(
            "the prompt ({prompt_len} tokens) and --tokens {generate} exceed the model's \
             workload.max_seq_len {max}. Fix: shorten the prompt or --tokens, or raise \
             workload.max_seq_len in the model file"
        )));
    }
    Ok(mkc_ir::model::Workload {
        prompt_len: prompt_len as u32,
        generate,
        ..*workload
    })
}

/// `model` with the workload `--prompt-len` and `--tokens` ask for (each, where given,
/// replacing the model file's), through [`run_workload`].
pub fn override_workload(
    model: &mut mkc_ir::Model,
    prompt_len: Option<u32>,
    tokens: Option<u32>,
) -> Result<(), CommandError> {
    if prompt_len.is_some() || tokens.is_some() {
        let prompt = prompt_len.unwrap_or(model.workload.prompt_len);
        let tokens = tokens.unwrap_or(model.workload.generate);
        model.workload = run_workload(&model.workload, prompt as usize, tokens)?;
    }
    Ok(())
}

/// The schedule `arg` names, when it is a schedule file (`mkc compile -o`) rather than a model.
pub fn schedule_arg(arg: &str) -> Result<Option<mkc_scheduler::Schedule>, CommandError> {
    let path = std::path::Path::new(arg);
    if !mkc_scheduler::Schedule::sniff(path) {
        return Ok(None);
    }
    Ok(Some(mkc_scheduler::Schedule::load(path)?))
}

/// The model a MODEL argument names, and how to name it in errors: a checkpoint directory
/// (the model `mkc model` writes for its config.json), else a model file or an embedded model.
pub fn resolve_model(arg: &str) -> Result<(mkc_ir::Model, String), CommandError> {
    let path = std::path::Path::new(arg);
    if path.is_dir() {
        let model = model::from_checkpoint(path, None)?;
        return Ok((model, format!("{}", path.join("config.json").display())));
    }
    Ok(mkc_ir::embedded::resolve_model_named(arg)?)
}

/// Refuses, for a command given a schedule file, each flag the schedule decides instead.
fn refuse_with_schedule(file: &str, given: &[(&str, bool)]) -> Result<(), CommandError> {
    match given.iter().find(|(_, set)| *set) {
        Some((flag, _)) => Err(CommandError::Input(format!(
            "{flag} would be ignored: `{file}` is a compiled schedule, which fixes it. Fix: drop \
             {flag}, or compile a schedule with it (mkc compile MODEL ... -o FILE)"
        ))),
        None => Ok(()),
    }
}

/// Replaces the model file's `tuning` section with the knobs of `--tune FILE`, when given.
pub fn apply_tune(
    model: &mut mkc_ir::Model,
    tune: Option<&std::path::Path>,
) -> Result<(), CommandError> {
    if let Some(path) = tune {
        let text = mkc_ir::input::read_text(path, mkc_ir::FileKind::Tuning)?;
        model.tuning = mkc_ir::Tuning::parse(&path.display().to_string(), &text)?;
    }
    Ok(())
}

/// Says on stderr where a chain target among `targets` lowers `model` otherwise than the
/// persistent target ([`mkc_ir::Model::for_chain`]), so that no figure is read as the
/// file's own lowering when it is not.
pub fn note_chain_lowering(model: &mkc_ir::Model, targets: &[mkc_scheduler::Target]) {
    let chains: Vec<&str> = targets
        .iter()
        .filter(|t| **t != mkc_scheduler::Target::Persistent)
        .map(|t| t.name())
        .collect();
    if model.lowering.persistent_only() && !chains.is_empty() {
        eprintln!(
            "mkc: {} lower{} this model without lowering.attention_in_o_proj (attention runs \
             as an operator of its own there: the chain grids have no kernel that computes it \
             inside the O-projection); the persistent target takes it",
            chains.join(" and "),
            if chains.len() == 1 { "s" } else { "" }
        );
    }
}

/// Fills what `model` leaves unset, and says on stderr what was filled, so that a knob a later
/// check refuses is traced to where it came from rather than to the model file: the tuning
/// knobs from `card`'s (`Tuning::or_card`), then the split-KV parts from the run's workload
/// (`mkc_catalogue::kv_parts_for`, which sizes them with those knobs).
pub fn settle_unset_knobs(model: &mut mkc_ir::Model, card: &mkc_ir::device::DeviceProfile) {
    for note in settle_knobs(model, card) {
        eprintln!("mkc: {note}");
    }
}

/// [`settle_unset_knobs`] without printing: the notes it would print.
pub fn settle_knobs(
    model: &mut mkc_ir::Model,
    card: &mkc_ir::device::DeviceProfile,
) -> Vec<String> {
    let mut notes = Vec::new();
    let merged = model.tuning.or_card(&card.tuning);
    let own = model.tuning.knobs();
    let filled: Vec<String> = merged
        .knobs()
        .iter()
        .zip(own.iter())
        .filter_map(|((name, v), (_, mine))| match (v, mine) {
            (Some(v), None) => Some(format!("tuning.{name} = {v}")),
            _ => None,
        })
        .collect();
    if !filled.is_empty() {
        let them = if filled.len() > 1 { "them" } else { "it" };
        notes.push(format!(
            "the {} device profile sets {} (the model leaves {them} unset; the model's tuning \
             or --tune overrides {them})",
            card.name,
            filled.join(", ")
        ));
    }
    model.tuning = merged;
    if model.lowering.attention_kv_split.is_none() {
        let parts = mkc_catalogue::kv_parts_for(model);
        if parts > 1 {
            notes.push(format!(
                "the workload's history ({} positions) takes lowering.attention_kv_split = \
                 {parts}: the fewest parts that each fit one attention chunk, or the most the \
                 kernels take where none do (the model leaves it unset; setting it overrides \
                 this)",
                model.workload.longest_kv_len()
            ));
        }
        model.lowering.attention_kv_split = Some(parts);
    }
    notes
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), CommandError> {
    match cli.command {
        Command::Compile(args) => compile::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Occupancy(args) => occupancy::run(args),
        Command::Kernels(args) => kernels::run(args),
        Command::Run(args) => run::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Probe(args) => probe::run(args),
        Command::Model(args) => model::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Completions(args) => {
            let mut cmd = <crate::cli::Cli as clap::CommandFactory>::command();
            let mut text = Vec::new();
            clap_complete::generate(args.shell, &mut cmd, "mkc", &mut text);
            out!("{}", String::from_utf8_lossy(&text));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_workload_is_its_prompt_and_tokens_within_the_kv_capacity() {
        let w = mkc_ir::model::Workload::default();
        let r = run_workload(&w, 1024, 64).unwrap();
        assert_eq!(
            (r.prompt_len, r.generate, r.max_seq_len),
            (1024, 64, w.max_seq_len)
        );
        assert!(r.typical_kv_len() > w.typical_kv_len());
        let max = w.max_seq_len as usize;
        assert!(run_workload(&w, max, 0).is_ok());
        let e = run_workload(&w, max, 1).unwrap_err().to_string();
        assert!(e.contains("max_seq_len") && e.contains("Fix:"), "{e}");
    }
}
