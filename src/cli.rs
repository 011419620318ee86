//! Command-line definitions (clap derive).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// A whole number in `lo..=hi`, parsed wide so that `-5`, `4294967296` and `5.0` all get the
/// same message naming the range, whether written `--flag -5` or `--flag=-5`.
fn ranged(text: &str, lo: u64, hi: u64) -> Result<u32, String> {
    match text.trim().parse::<i128>() {
        Ok(v) if v >= lo as i128 && v <= hi as i128 => Ok(v as u32),
        _ => Err(format!("`{text}` is not a whole number from {lo} to {hi}")),
    }
}

/// A positive number of seconds, at most a day (so that it converts to a duration).
fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_SECONDS => Ok(v),
        _ => Err(format!(
            "`{text}` is not a number of seconds above 0 and at most {MAX_SECONDS}"
        )),
    }
}

/// Longest time limit a flag takes, in seconds (one day).
pub const MAX_SECONDS: f64 = 86_400.0;

fn sms(text: &str) -> Result<u32, String> {
    ranged(text, 1, 4096)
}
fn any_u32(text: &str) -> Result<u32, String> {
    ranged(text, 0, u32::MAX as u64)
}
fn positive_u32(text: &str) -> Result<u32, String> {
    ranged(text, 1, u32::MAX as u64)
}
fn percent(text: &str) -> Result<u32, String> {
    ranged(text, 0, 100)
}
fn count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<i128>() {
        Ok(v) if v >= 1 && v <= u64::MAX as i128 => Ok(v as u64),
        _ => Err(format!("`{text}` is not a whole number of at least 1")),
    }
}

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
    /// Predict a decode step's timeline, bubbles and occupancy for one or all targets.
    Simulate(SimulateArgs),
    /// How many CTAs of a kernel fit on one SM, and which resource binds.
    Occupancy(OccupancyArgs),
    /// Compile every CUDA kernel with NVRTC and report registers, shared memory and spills.
    Kernels(KernelsArgs),
    /// Run prefill and decode on the GPU and print the tokens and step latency.
    Run(RunArgs),
    /// Run several targets side by side on the GPU and compare their step times.
    Bench(BenchArgs),
    /// Measure on the GPU (sm_90) a hardware fact the simulator assumes.
    Probe(ProbeArgs),
    /// Write a model file for a Hugging Face Llama checkpoint: its config.json's geometry (an
    /// MLP width no lowering tiles zero-padded) and the first lowering the kernels accept.
    Model(ModelArgs),
    /// Put the simulator beside every recorded GPU measurement (the run's card and bandwidth,
    /// as `bench` predicted it): each error, and per card how many are within ±5%.
    Calibrate(CalibrateArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(CompletionsArgs),
}

/// Arguments of `mkc model`.
#[derive(Parser, Debug)]
pub struct ModelArgs {
    /// Checkpoint directory (its config.json is read; the weights are not).
    pub checkpoint: PathBuf,
    /// Write the model file here instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Model name in the file (default: the checkpoint directory's name).
    #[arg(long)]
    pub name: Option<String>,
}

/// Arguments of `mkc completions`.
#[derive(Parser, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `mkc probe`.
#[derive(Parser, Debug)]
pub struct ProbeArgs {
    /// What to measure.
    #[arg(value_enum)]
    pub what: ProbeWhat,
    /// Model whose operator kernels `pages` and `attention` build and measure (file, embedded name, or a
    /// checkpoint directory); the other probes run kernels of their own.
    #[arg(long, default_value = "llama1b")]
    pub model: String,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// The probes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeWhat {
    /// Which pairs of kernels share an SM (a CTA of one admitted beside a running CTA of
    /// another, as a PDL successor beside its predecessor), for 840 pairs of register and warp
    /// counts, against the simulator's rule.
    Coresidency,
    /// L2-hit latency of a dependent chain, idle and while HBM streams (on other SMs, and on
    /// the chain's own SM).
    Latency,
    /// How fast a grid streams weight pages that L2 holds (read just before, or prefetched)
    /// against pages from HBM, for 8-48 MiB.
    L2,
    /// Two matvec engines alone on the operators' shapes: rows by plain 16-byte loads against
    /// pages by bulk copies into a shared-memory ring (results checked against the CPU).
    Matvec,
    /// The occupancy rule against the driver (`cuOccupancyMaxActiveBlocksPerMultiprocessor`)
    /// on 12,000 random kernel configurations.
    Occupancy,
    /// How long the operators' page loop takes over weight pages already in shared memory,
    /// for 1-8 consumer warps and up to a persistent ring of 10 pages, the input slice in
    /// registers or loaded from L2 in the span (results checked against the CPU).
    Pages,
    /// How long attention's body takes alone, as the chain and the persistent kernel compile
    /// it, for 1, 2 and 4 query heads per task and 32-1024 KV positions (results checked
    /// against the CPU): what folding attention into the O-projection would cost per head.
    Attention,
    /// Whether dealing an operator's pages to SMs in contiguous runs (as mkc's plans do)
    /// streams slower than the floor's interleaved sweep, and how far the slowest SM's share
    /// trails the median, on down, up/gate and LM-head sizes.
    Partition,
    /// How fast each SM streams while every SM streams (a persistent ring's 11 bulk copies in
    /// flight each): its rate and its speed relative to the mean, by `%smid`.
    SmSpeeds,
}

/// Arguments of `mkc kernels`.
#[derive(Parser, Debug)]
pub struct KernelsArgs {
    /// Model whose shapes set the dynamic shared memory (file, embedded name, or a checkpoint
    /// directory: the model `mkc model` writes for it).
    #[arg(long, default_value = "llama1b")]
    pub model: String,
    /// GPU architecture to compile for.
    #[arg(long, default_value = "sm_90a")]
    pub arch: String,
    /// Tuning knobs (a `Tuning(...)` RON file) replacing the model file's `tuning` section.
    #[arg(long, value_name = "FILE")]
    pub tune: Option<PathBuf>,
    /// Device profile (an embedded name or a RON file) whose `tuning` fills the knobs the model
    /// leaves unset, as `run` and `bench` do with the GPU's own profile.
    #[arg(long, default_value = "h200")]
    pub device: String,
    /// Build the persistent megakernel instead (`k_persistent`, a build of its own with
    /// `tuning.persistent_warps` consumer warps, holding no chain kernel).
    #[arg(long)]
    pub persistent: bool,
    /// Also write the compiled cubin to FILE, for `cuobjdump -sass` or `nvdisasm` (to see
    /// where the spills and the hot loops are).
    #[arg(long, value_name = "FILE")]
    pub cubin: Option<PathBuf>,
    /// The workload's prompt length (default: the model file's), which sizes the persistent
    /// kernel's attention chunk beside its ring, as `run --prompt-len` does.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u32)]
    pub prompt_len: Option<u32>,
    /// The workload's generated tokens (default: the model file's), as `run --tokens`.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u32)]
    pub tokens: Option<u32>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Options shared by `mkc run` and `mkc bench`.
#[derive(Parser, Debug)]
pub struct GpuRunArgs {
    /// Model file (RON), embedded model name, a checkpoint directory (the model `mkc model`
    /// writes for its config.json), or a schedule written by `mkc compile -o` (its model,
    /// target, trigger and tuning are then the schedule's).
    #[arg(default_value = "llama1b")]
    pub model: String,
    /// Weights: `random:SEED` (generated on the GPU, reproduced on the CPU) or a Hugging Face
    /// checkpoint directory (config.json + *.safetensors).
    #[arg(long, default_value = "random:1")]
    pub weights: String,
    /// Prompt length (random prompt tokens from the seed).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u32, conflicts_with = "prompt_ids")]
    pub prompt_len: Option<u32>,
    /// Prompt token ids, comma separated.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true, value_parser = any_u32)]
    pub prompt_ids: Option<Vec<u32>>,
    /// Tokens to generate (default: the model file's workload).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u32)]
    pub tokens: Option<u32>,
    /// Trigger placement of the pdl target (default: early).
    #[arg(long, value_enum)]
    pub trigger: Option<TriggerArg>,
    /// SM assignment of the persistent target (default: round-robin).
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Skip the CPU-reference correctness check.
    #[arg(long)]
    pub no_check: bool,
    /// Tuning knobs (a `Tuning(...)` RON file) replacing the model file's `tuning` section.
    #[arg(long, value_name = "FILE")]
    pub tune: Option<PathBuf>,
    /// Seconds a decode step may take before the watchdog stops the run (at most a day).
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true, value_parser = seconds)]
    pub watchdog: f64,
    /// Also trace one decode step (the middle position) with a build that records every
    /// CTA's or persistent instruction's phases, and write it as a Perfetto trace in the
    /// format of `mkc simulate --trace` (several targets: FILE.TARGET.json each); prints where
    /// each SM's time went.
    #[arg(long, value_name = "FILE.json")]
    pub timeline: Option<PathBuf>,
}

/// Arguments of `mkc run`.
#[derive(Parser, Debug)]
pub struct RunArgs {
    /// Shared options.
    #[command(flatten)]
    pub common: GpuRunArgs,
    /// Target: pdl or graph (default: pdl, or a schedule's own).
    #[arg(long, value_enum)]
    pub target: Option<TargetArg>,
    /// Write every decode step's logits (f32) to this .npy file.
    #[arg(long)]
    pub logits_out: Option<PathBuf>,
}

/// Arguments of `mkc bench`.
#[derive(Parser, Debug)]
pub struct BenchArgs {
    /// Shared options.
    #[command(flatten)]
    pub common: GpuRunArgs,
    /// Targets, comma separated (default: graph,pdl, or a schedule's own).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub targets: Option<Vec<TargetArg>>,
    /// Timed trials per target (after one warm-up each).
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = positive_u32)]
    pub trials: u32,
    /// Also time each operator kind alone (all layers back to back) against its floor.
    #[arg(long)]
    pub per_kernel: bool,
    /// Also trace one decode step per target (the middle position): per operator kind, the mean time of each CTA
    /// phase (issue, wait, prepare, weights landing, compute, epilogue) and each grid's
    /// marginal time in the chain.
    #[arg(long)]
    pub cta_phases: bool,
    /// With --cta-phases: also write every traced CTA as one CSV row (target, grid, kind,
    /// layer, CTA, SM, entry and exit in ns from the step's first entry, then each phase mark
    /// in ns from the CTA's entry), for timeline plots.
    #[arg(long, value_name = "FILE", requires = "cta_phases")]
    pub cta_trace_out: Option<std::path::PathBuf>,
    /// Also time each target with kinds of work removed (attention; the streaming operators'
    /// activation loads; the page math; attention and loads; those and every wait; those and
    /// the page math, i.e. the weight stream alone; and, persistent only, the weights, i.e. the
    /// dependency chain alone), in the same trials as the full step: what each kind costs.
    /// Ablated kernels compute meaningless (but finite) values and are never checked.
    #[arg(long)]
    pub ablate: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Target of `mkc simulate` (`all` runs the three side by side).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimTargetArg {
    /// Persistent megakernel.
    Persistent,
    /// PDL-linked grids.
    Pdl,
    /// Grids with ordinary edges.
    Graph,
    /// All three, side by side.
    All,
}

/// Arguments of `mkc simulate`.
#[derive(Parser, Debug)]
pub struct SimulateArgs {
    /// Model, device and scheduling choices.
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Target, or `all`.
    #[arg(long, value_enum, default_value_t = SimTargetArg::All)]
    pub target: SimTargetArg,
    /// Override the device's read bandwidth, GB/s.
    #[arg(long, allow_negative_numbers = true)]
    pub bandwidth: Option<f64>,
    /// Allow successor CTAs to co-reside with predecessor CTAs (chain targets).
    #[arg(long)]
    pub coresidency: bool,
    /// Phase-scoped resource release (a CTA frees its slot once its loads are done; chain
    /// targets).
    #[arg(long)]
    pub phase_release: bool,
    /// Also simulate every decode step of the workload (KV length growing).
    #[arg(long)]
    pub trajectory: bool,
    /// Also predict each rung of `mkc bench --ablate`: the step without attention, without
    /// the streaming operators' activation loads, without both, and without both and every
    /// dependency wait.
    #[arg(long)]
    pub ablate: bool,
    /// Also predict the step with each latency term of the device profile halved in turn
    /// (largest saving first): which latency the schedule's time hangs on.
    #[arg(long)]
    pub sensitivity: bool,
    /// Where the pdl and graph grids' registers and static shared memory come from.
    #[arg(long, value_enum, default_value_t = ResourcesArg::Auto)]
    pub resources: ResourcesArg,
    /// Print one JSON object (`schema`, and `targets` keyed by target name).
    #[arg(long)]
    pub json: bool,
    /// Write a Chrome/Perfetto trace of the step (single target only).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Run a what-if sweep from this RON spec instead (see the README); the spec's lists
    /// replace the target, trigger, policy and what-if flags.
    #[arg(long, conflicts_with_all = ["target", "trigger", "coresidency", "phase_release",
        "policy", "json", "trace", "trajectory", "ablate", "sensitivity"])]
    pub sweep: Option<PathBuf>,
    /// Where the sweep's CSV goes (default: stdout).
    #[arg(long, requires = "sweep")]
    pub csv: Option<PathBuf>,
    /// The most work --trajectory or --sweep may do, in simulated task-steps (tasks per step
    /// x steps, or x configurations): a larger run is refused before it starts (raise this to
    /// run it). The default, 3e8, is ~10,000 steps or configurations of Llama-3.2-1B.
    #[arg(long, default_value_t = mkc_simulator::sweep::DEFAULT_MAX_TASK_STEPS,
        allow_negative_numbers = true, value_parser = count)]
    pub max_task_steps: u64,
}

/// Arguments of `mkc calibrate`.
#[derive(Parser, Debug)]
pub struct CalibrateArgs {
    /// The record of measured steps (RON; each step's model path is relative to it).
    #[arg(default_value = "measured/steps.ron")]
    pub record: PathBuf,
    /// Only the steps measured on this card (its profile's name: h100, h200).
    #[arg(long)]
    pub card: Option<String>,
    /// Predict one card's steps with another profile, `CARD=FILE` (repeatable): a profile
    /// change judged against every measurement of that card before it is embedded.
    #[arg(long = "profile", value_name = "CARD=FILE")]
    pub profiles: Vec<String>,
    /// Print one JSON object (`schema`, `steps`, `cards`).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `mkc occupancy`.
#[derive(Parser, Debug)]
pub struct OccupancyArgs {
    /// Architecture: sm_80, sm_86, sm_89, sm_90, sm_100, sm_120.
    #[arg(long)]
    pub arch: String,
    /// Threads per CTA.
    #[arg(long, allow_negative_numbers = true, value_parser = any_u32)]
    pub threads: u32,
    /// Registers per thread.
    #[arg(long, allow_negative_numbers = true, value_parser = any_u32)]
    pub regs: u32,
    /// Static shared memory per CTA, bytes.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = any_u32)]
    pub static_smem: u32,
    /// Dynamic shared memory per CTA, bytes (the kernel opts in to the per-block maximum).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = any_u32)]
    pub dyn_smem: u32,
    /// Preferred shared-memory carveout, percent (default: the driver's, full capacity). A
    /// hint: where one CTA needs more, the smallest carveout holding one CTA is taken.
    #[arg(long, allow_negative_numbers = true, value_parser = percent)]
    pub carveout: Option<u32>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Where a chain plan's grid resources come from.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourcesArg {
    /// The compiled kernels' where NVRTC is installed (compiled once per build, ~10 s, then
    /// read from the cache), the catalogue's declared values otherwise.
    Auto,
    /// The operator catalogue's declared values (a test keeps them equal to the default
    /// build's).
    Declared,
    /// The compiled kernels' (NVRTC, no GPU needed); an error where NVRTC is missing.
    Compiled,
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

/// What `compile` and `simulate` share: the model, the device and the scheduling choices.
#[derive(Parser, Debug)]
pub struct SetupArgs {
    /// Model file (RON), the name of an embedded model (llama1b, llama3b, llama8b, tiny), a
    /// checkpoint directory (the model `mkc model` writes for its config.json), or, for
    /// `simulate`, a schedule written by `mkc compile -o`.
    #[arg(default_value = "llama1b")]
    pub model: String,
    /// Assignment policy of the persistent target (default: round-robin).
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Device profile: an embedded name (h200, h100, a100, b200) or a profile RON file
    /// (default: h200).
    #[arg(long)]
    pub device: Option<String>,
    /// Tuning knobs of the CUDA backend (a `Tuning(...)` RON file) replacing the model file's
    /// `tuning` section.
    #[arg(long, value_name = "FILE")]
    pub tune: Option<PathBuf>,
    /// Override the device's SM count (1 to 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = sms)]
    pub sms: Option<u32>,
    /// Trigger placement of the pdl target (default: early).
    #[arg(long, value_enum)]
    pub trigger: Option<TriggerArg>,
    /// Prompt length of the workload (default: the model file's): the persistent layout, the
    /// schedule and the prediction are made for it, as `mkc run --prompt-len` makes them.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u32)]
    pub prompt_len: Option<u32>,
    /// Tokens the workload generates (default: the model file's), as `mkc run --tokens`.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u32)]
    pub tokens: Option<u32>,
}

/// Arguments of `mkc compile`.
#[derive(Parser, Debug)]
pub struct CompileArgs {
    /// Model, device and scheduling choices.
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Execution target.
    #[arg(long, value_enum, default_value_t = TargetArg::Persistent)]
    pub target: TargetArg,
    /// Total time limit of the ILP policy's solves, in seconds (with --policy ilp; default 20,
    /// at most a day).
    #[arg(long, allow_negative_numbers = true, value_parser = seconds)]
    pub ilp_time_limit: Option<f64>,
    /// Write the schedule to this file.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Format of the schedule file (default: from the extension, else RON).
    #[arg(long, value_enum, requires = "output")]
    pub format: Option<FormatArg>,
    /// Print one JSON object with the summary instead of the table.
    #[arg(long)]
    pub summary_json: bool,
    /// Where the pdl and graph grids' registers and static shared memory come from.
    #[arg(long, value_enum, default_value_t = ResourcesArg::Auto)]
    pub resources: ResourcesArg,
    /// Re-verify the schedule with the independent checker.
    #[arg(long)]
    pub verify: bool,
}

impl From<TargetArg> for mkc_scheduler::Target {
    fn from(t: TargetArg) -> Self {
        match t {
            TargetArg::Persistent => mkc_scheduler::Target::Persistent,
            TargetArg::Pdl => mkc_scheduler::Target::Pdl,
            TargetArg::Graph => mkc_scheduler::Target::Graph,
        }
    }
}

impl From<PolicyArg> for mkc_scheduler::Policy {
    fn from(p: PolicyArg) -> Self {
        match p {
            PolicyArg::RoundRobin => mkc_scheduler::Policy::RoundRobin,
            PolicyArg::List => mkc_scheduler::Policy::List,
            PolicyArg::Ilp => mkc_scheduler::Policy::Ilp,
        }
    }
}

impl From<TriggerArg> for mkc_scheduler::Trigger {
    fn from(t: TriggerArg) -> Self {
        match t {
            TriggerArg::Early => mkc_scheduler::Trigger::Early,
            TriggerArg::Late => mkc_scheduler::Trigger::Late,
        }
    }
}
