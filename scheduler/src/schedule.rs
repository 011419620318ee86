//! The schedule artifact: what `mkc compile` writes and the simulator and backend read.
//!
//! It embeds the task graph (so a consumer needs nothing else) and one plan: per-SM
//! instruction streams for the persistent target, or a chain of grids for `pdl` and `graph`.

use serde::{Deserialize, Serialize};

use mkc_catalogue::ResourceSource;
use mkc_ir::device::DeviceProfile;
use mkc_ir::model::KernelResources;
use mkc_ir::{CounterId, KernelId, OpId, TaskGraph, TaskId, TensorId};

/// How the decode step is executed on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// One resident CTA per SM interpreting a per-SM instruction stream.
    Persistent,
    /// One grid per operator, linked by Programmatic Dependent Launch.
    Pdl,
    /// One grid per operator with ordinary (full-completion) graph edges.
    Graph,
}

impl Target {
    /// Name as spelled on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Target::Persistent => "persistent",
            Target::Pdl => "pdl",
            Target::Graph => "graph",
        }
    }
}

/// How tasks are assigned to SMs for the persistent target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Deal tasks round-robin over SMs in topological order (the anchors' baseline).
    RoundRobin,
    /// Readiness-aware list scheduling with critical-path priority.
    List,
    /// Per-operator integer programs over SM assignment (good_lp + microlp).
    Ilp,
}

impl Policy {
    /// Name as spelled on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::List => "list",
            Policy::Ilp => "ilp",
        }
    }
}

/// Where a producer grid calls `griddepcontrol.launch_dependents`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Right after the CTA has issued its independent (weight) loads.
    Early,
    /// At the end of the CTA (equivalent to the implicit trigger at exit).
    Late,
}

/// A load a grid may issue before `griddepcontrol.wait`: it reads nothing the step produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndependentLoad {
    /// The operator's weight tile.
    Weights,
    /// KV-cache entries of earlier positions.
    KvHistory,
}

/// One wait of a persistent instruction: spin until `counter >= target_per_step * step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    /// The counter.
    pub counter: CounterId,
    /// Signals the counter receives per decode step.
    pub target_per_step: u32,
}

/// One signal of a persistent instruction: add `count` to `counter` once its writes are
/// visible (each of its tasks that signals the counter adds one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signal {
    /// The counter.
    pub counter: CounterId,
    /// How much the instruction adds.
    pub count: u32,
}

/// One instruction of a persistent stream: a run of consecutive tasks of one operator, run in
/// order by one CTA, as a chain CTA runs its task run (one instruction costs its fixed overhead
/// once, however many tasks it runs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instruction {
    /// The first task of the run.
    pub first: TaskId,
    /// Tasks in the run: `first .. first + count`, all of one operator.
    pub count: u32,
    /// Position in the schedule's global order of instructions (a topological order).
    pub seq: u32,
    /// Counters waited on before the first dependent read: every counter a task of the run
    /// waits on, once, in first-appearance order (inline up to two).
    pub waits: smallvec::SmallVec<[Wait; 2]>,
    /// Counters signalled after the run's writes are visible, in first-appearance order.
    pub signals: smallvec::SmallVec<[Signal; 2]>,
}

impl Instruction {
    /// The instruction that runs tasks `first .. first + count` of `graph`: its waits are the
    /// union of theirs, its signals their sum.
    pub fn of_run(graph: &TaskGraph, first: TaskId, count: u32, seq: u32) -> Instruction {
        let mut waits: smallvec::SmallVec<[Wait; 2]> = smallvec::SmallVec::new();
        let mut signals: smallvec::SmallVec<[Signal; 2]> = smallvec::SmallVec::new();
        for t in first.0..first.0 + count {
            let task = graph.task(TaskId(t));
            for &c in &task.waits {
                if !waits.iter().any(|w| w.counter == c) {
                    waits.push(Wait {
                        counter: c,
                        target_per_step: graph.counter(c).signals_per_step,
                    });
                }
            }
            for &c in &task.signals {
                match signals.iter_mut().find(|s| s.counter == c) {
                    Some(s) => s.count += 1,
                    None => signals.push(Signal {
                        counter: c,
                        count: 1,
                    }),
                }
            }
        }
        Instruction {
            first,
            count,
            seq,
            waits,
            signals,
        }
    }

    /// The ids of the tasks it runs, in order.
    pub fn tasks(&self) -> impl Iterator<Item = TaskId> {
        (self.first.0..self.first.0.saturating_add(self.count)).map(TaskId)
    }
}

/// The persistent target's plan: one stream per SM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PersistentPlan {
    /// `streams[sm]` is the instruction list of SM `sm`, in execution order.
    pub streams: Vec<Vec<Instruction>>,
    /// The persistent kernel's CTA resources: the model file's declared `lowering.kernel`, or
    /// the compiled `k_persistent`'s (its static shared memory counted in the dynamic).
    pub resources: KernelResources,
    /// Which of the two `resources` are.
    #[serde(default)]
    pub source: ResourceSource,
}

/// How a grid in a chain is linked to its predecessor grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeSync {
    /// Ordinary graph edge: the grid starts after the predecessor completes.
    Full,
    /// Programmatic edge: admitted once every predecessor CTA has triggered.
    Programmatic,
}

/// Where a chain grid waits for its predecessors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridWait {
    /// Loads issued before `griddepcontrol.wait`.
    pub early_loads: Vec<IndependentLoad>,
    /// Tensors first read after the wait (the dependent reads).
    pub dependent_reads: Vec<TensorId>,
}

/// One grid of a chain target, as the backend launches it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    /// Its id (position in the chain).
    pub id: KernelId,
    /// The operator it runs.
    pub op: OpId,
    /// Name such as `L3.up_gate`.
    pub name: String,
    /// The kernel entry point it launches (`mkc_catalogue::ENTRY_POINTS`).
    pub entry: String,
    /// CTAs of the grid.
    pub ctas: u32,
    /// The tasks each CTA runs, `[first, count]` with `first` counted within the operator:
    /// contiguous runs in task order, balanced to within one task (`mkc_catalogue::cta_tasks`,
    /// the rule the kernels implement).
    pub runs: Vec<[u32; 2]>,
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per CTA in bytes.
    #[serde(default)]
    pub static_smem_bytes: u32,
    /// Dynamic shared memory per CTA in bytes (the launch's `sharedMemBytes`).
    pub dynamic_smem_bytes: u32,
    /// Bytes of independent loads a CTA holds before its wait (its page ring, attention's KV
    /// chunk): the rest of its weights stream only once its consumers run.
    pub prefetch_bytes: u64,
    /// Where the registers and static shared memory come from: the compiled kernels (NVRTC)
    /// or the catalogue's declared values.
    pub resources: ResourceSource,
    /// Link to the previous grid (`None` for the first grid of the step).
    pub incoming: Option<EdgeSync>,
    /// Whether the launch carries the programmatic-serialization attribute.
    pub pdl_attribute: bool,
    /// The in-kernel wait, if the grid calls `griddepcontrol.wait`.
    pub wait: Option<GridWait>,
    /// Where the grid triggers its successor, if it does.
    pub trigger: Option<Trigger>,
}

impl Kernel {
    /// The task ids CTA `cta` runs, given its operator's first task.
    pub fn cta_task_range(&self, first_task: TaskId, cta: usize) -> std::ops::Range<u32> {
        let [first, count] = self.runs[cta];
        first_task.0 + first..first_task.0 + first + count
    }
}

/// The chain targets' plan: grids in launch order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainPlan {
    /// Grids in launch order: every operator once, in operator order.
    pub kernels: Vec<Kernel>,
}

/// A plan for one target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    /// Per-SM instruction streams.
    Persistent(PersistentPlan),
    /// A chain of grids (`pdl` or `graph`).
    Chain(ChainPlan),
}

/// A compiled schedule: the task graph, the device it was built for, and the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Version of mkc that wrote it.
    pub mkc_version: String,
    /// The target.
    pub target: Target,
    /// The policy (persistent target only).
    pub policy: Option<Policy>,
    /// The device profile it was built for (after any `--sms` override).
    pub device: DeviceProfile,
    /// The model file it was compiled from (geometry, workload, lowering), so that `mkc
    /// simulate|run|bench` can take the schedule alone; `None` in files written before it was
    /// embedded.
    #[serde(default)]
    pub model: Option<mkc_ir::Model>,
    /// The CUDA backend's tuning knobs the schedule was compiled with (the model file's
    /// `tuning` section, or `--tune`): what the backend builds and launches it with.
    #[serde(default, skip_serializing_if = "mkc_ir::Tuning::is_default")]
    pub tuning: mkc_ir::Tuning,
    /// The task DAG of one decode step.
    pub graph: TaskGraph,
    /// The plan.
    pub plan: Plan,
}

impl Schedule {
    /// The persistent plan, if this is one.
    pub fn persistent(&self) -> Option<&PersistentPlan> {
        match &self.plan {
            Plan::Persistent(p) => Some(p),
            Plan::Chain(_) => None,
        }
    }

    /// The chain plan, if this is one.
    pub fn chain(&self) -> Option<&ChainPlan> {
        match &self.plan {
            Plan::Chain(c) => Some(c),
            Plan::Persistent(_) => None,
        }
    }
}
