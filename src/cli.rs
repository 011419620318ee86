//! Command-line definitions (clap derive).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// mkc: a static schedule compiler and simulator for GPU megakernels (LLM decode, batch 1).
#[derive(Parser, Debug)]
#[command(name = "mkc", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Lower a model to a tiled task DAG and schedule it for a target.
    Compile(CompileArgs),
}

/// Execution target.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetArg {
    /// One resident CTA per SM interpreting a per-SM instruction stream.
    Persistent,
    /// One grid per operator, linked by Programmatic Dependent Launch.
    Pdl,
    /// One grid per operator, ordinary graph edges (the baseline).
    Graph,
}

/// Persistent assignment policy.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyArg {
    /// Round robin over a topological order (the anchors' baseline).
    RoundRobin,
    /// Readiness-aware list scheduling with critical-path priority.
    List,
    /// Per-operator integer programs (good_lp + microlp), compared with the heuristics.
    Ilp,
}

/// PDL trigger placement.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerArg {
    /// After the producer has issued its independent loads.
    Early,
    /// At the end of the producer CTA.
    Late,
}

/// Schedule file format.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatArg {
    /// Rusty Object Notation.
    Ron,
    /// JSON.
    Json,
}

/// Arguments of `mkc compile`.
#[derive(Parser, Debug)]
pub struct CompileArgs {
    /// Model file (RON), or the name of an embedded model (llama1b, llama3b, llama8b, tiny).
    #[arg(default_value = "llama1b")]
    pub model: String,
    /// Execution target.
    #[arg(long, value_enum, default_value_t = TargetArg::Persistent)]
    pub target: TargetArg,
    /// Assignment policy of the persistent target.
    #[arg(long, value_enum, default_value_t = PolicyArg::RoundRobin)]
    pub policy: PolicyArg,
    /// Device profile: an embedded name (h200) or a profile RON file.
    #[arg(long, default_value = "h200")]
    pub device: String,
    /// Override the device's SM count.
    #[arg(long)]
    pub sms: Option<u32>,
    /// Trigger placement of the pdl target.
    #[arg(long, value_enum, default_value_t = TriggerArg::Early)]
    pub trigger: TriggerArg,
    /// Total time limit of the ILP policy's solves, in seconds.
    #[arg(long, default_value_t = 20.0)]
    pub ilp_time_limit: f64,
    /// Write the schedule to this file.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Format of the schedule file (default: from the extension, else RON).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Print one JSON object with the summary instead of the table.
    #[arg(long)]
    pub summary_json: bool,
    /// Re-verify the schedule with the independent checker.
    #[arg(long)]
    pub verify: bool,
}
