//! The tiled task DAG: operators, tensors, tasks, operator edges and VTP ready counters.
//!
//! One `TaskGraph` describes one decode step. Every tensor is written by exactly one operator
//! per step (activations are not reused within a step), so the only hazards are
//! read-after-write, and those are carried by counters (or implied by them, see [`Edge`]).

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::ids::{CounterId, EdgeId, OpId, TaskId, TensorId};

/// What a fused operator computes. The order of the variants is the order within a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OpKind {
    /// Residual sum + RMSNorm + QKV matvec + RoPE + KV-cache append (layer 0 gathers the
    /// embedding row instead of summing).
    QkvRope,
    /// Decode attention of one KV head's query heads over the KV cache.
    Attention,
    /// O-projection matvec, one partial block per K chunk (split-K by the attention edge's
    /// shards); up/gate adds the blocks to the residual.
    OProj,
    /// Residual sum + RMSNorm + up and gate matvecs + SiLU(gate) * up.
    UpGate,
    /// Down-projection matvec, one partial block per K chunk (split-K by the up/gate edge's
    /// shards); the next QKV or the LM head adds the blocks to the residual.
    Down,
    /// Final RMSNorm + LM-head matvec + fused cross-tile argmax.
    LmHead,
}

impl OpKind {
    /// Short stable name used in kernel names, tables and traces.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::QkvRope => "qkv_rope",
            OpKind::Attention => "attention",
            OpKind::OProj => "o_proj",
            OpKind::UpGate => "up_gate",
            OpKind::Down => "down",
            OpKind::LmHead => "lm_head",
        }
    }
}

/// A fused operator: a set of tasks of one shape, each a run of its kernel's work units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Operator {
    /// Its id (index in [`TaskGraph::ops`]).
    pub id: OpId,
    /// What it computes.
    pub kind: OpKind,
    /// Decoder layer, or `None` for the LM head.
    pub layer: Option<u32>,
    /// Whether the embedding lookup is fused in (layer 0's QKV).
    pub embed_fused: bool,
    /// Its tasks: ids `first_task .. first_task + tasks`.
    pub first_task: TaskId,
    /// Number of tasks.
    pub tasks: u32,
    /// Split-K factor: tasks are `k_split` chunks (major) of row runs (minor).
    pub k_split: u32,
}

impl Operator {
    /// Display name such as `L3.up_gate` or `lm_head`.
    pub fn label(&self) -> String {
        match self.layer {
            Some(l) => format!("L{l}.{}", self.kind.name()),
            None => self.kind.name().to_string(),
        }
    }

    /// Iterates the ids of this operator's tasks in tile order.
    pub fn task_ids(&self) -> impl Iterator<Item = TaskId> + '_ {
        (self.first_task.0..self.first_task.0 + self.tasks).map(TaskId)
    }
}

/// An intermediate tensor (or an external input such as the gathered embedding row).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tensor {
    /// Its id.
    pub id: TensorId,
    /// Name such as `L3.h`.
    pub name: String,
    /// Length in elements (rows of the vector).
    pub rows: u32,
    /// Operator writing it, `None` for inputs from outside the step.
    pub producer: Option<OpId>,
}

/// A half-open row range `[start, end)` of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rows {
    /// First row.
    pub start: u32,
    /// One past the last row.
    pub end: u32,
}

impl Rows {
    /// The range `[start, end)`.
    pub fn new(start: u32, end: u32) -> Rows {
        debug_assert!(start < end);
        Rows { start, end }
    }

    /// Whether the two ranges share a row.
    pub fn overlaps(self, other: Rows) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// Whether `other` lies inside `self`.
    pub fn contains(self, other: Rows) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    /// Number of rows.
    pub fn len(self) -> u32 {
        self.end - self.start
    }

    /// Whether the range is empty (never, for a well-formed range).
    pub fn is_empty(self) -> bool {
        self.end <= self.start
    }
}

/// A read or write of a row range of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Access {
    /// The tensor.
    pub tensor: TensorId,
    /// The rows touched.
    pub rows: Rows,
}

/// What a task moves and computes: everything a cost model or simulator needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCost {
    /// Weight bytes streamed from memory (counted once per step in the model's total).
    pub weight_bytes: u64,
    /// Activation bytes read (inputs, residual, embedding row).
    pub activation_read_bytes: u64,
    /// Bytes written (outputs, KV append).
    pub write_bytes: u64,
    /// KV-cache bytes read per cached token (multiply by the KV length of the step).
    pub kv_bytes_per_token: u64,
    /// Floating-point operations independent of the KV length.
    pub flops: u64,
    /// Floating-point operations per cached token.
    pub flops_per_token: u64,
    /// The part of the KV history the task reads, of [`TaskCost::kv_parts`]
    /// ([`crate::work::kv_part`]): split-KV attention deals a history over several tasks.
    #[serde(default)]
    pub kv_part: u32,
    /// Parts the task's KV history is dealt over (1: the whole history).
    #[serde(default = "one")]
    pub kv_parts: u32,
}

fn one() -> u32 {
    1
}

impl Default for TaskCost {
    fn default() -> Self {
        TaskCost {
            weight_bytes: 0,
            activation_read_bytes: 0,
            write_bytes: 0,
            kv_bytes_per_token: 0,
            flops: 0,
            flops_per_token: 0,
            kv_part: 0,
            kv_parts: 1,
        }
    }
}

impl TaskCost {
    /// The cached positions the task reads of a `kv_len`-position history: its part's.
    pub fn kv_positions(&self, kv_len: u32) -> u32 {
        let (lo, hi) = crate::work::kv_part(kv_len, self.kv_part, self.kv_parts);
        hi - lo
    }

    /// KV-cache bytes the task reads at KV length `kv_len`.
    pub fn kv_bytes_at(&self, kv_len: u32) -> u64 {
        self.kv_bytes_per_token
            .saturating_mul(self.kv_positions(kv_len) as u64)
    }

    /// Total bytes moved at KV length `kv_len`.
    pub fn bytes_at(&self, kv_len: u32) -> u64 {
        self.weight_bytes
            .saturating_add(self.activation_read_bytes)
            .saturating_add(self.write_bytes)
            .saturating_add(self.kv_bytes_at(kv_len))
    }

    /// Total flops at KV length `kv_len`.
    pub fn flops_at(&self, kv_len: u32) -> u64 {
        self.flops.saturating_add(
            self.flops_per_token
                .saturating_mul(self.kv_positions(kv_len) as u64),
        )
    }
}

/// A task's reads or writes: almost always two or fewer, kept inline (a lowering makes ~10^5
/// tasks; one heap allocation per list dominated compile time).
pub type Accesses = SmallVec<[Access; 2]>;

/// A task's waits or signals, inline up to two.
pub type CounterIds = SmallVec<[CounterId; 2]>;

/// One task of one operator: a run of its kernel's work units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Its id; ids increase along a topological order.
    pub id: TaskId,
    /// The operator it belongs to.
    pub op: OpId,
    /// Index of the task within the operator.
    pub tile: u32,
    /// Index of the run of output rows this task computes (within its K chunk).
    pub row_tile: u32,
    /// Split-K chunk this task computes (0 when the operator is not split).
    pub k_chunk: u32,
    /// Tensor ranges it reads within the step.
    pub reads: Accesses,
    /// Tensor ranges it writes.
    pub writes: Accesses,
    /// Tensor ranges it adds its products into (reductions in place): an earlier task's
    /// writes zero them, and tasks adding into one row need no order among themselves (the
    /// sum's order then varies from run to run). A reader of those rows waits for every task
    /// that adds into them.
    #[serde(default, skip_serializing_if = "SmallVec::is_empty")]
    pub accumulates: Accesses,
    /// Counters it waits on before its first dependent read.
    pub waits: CounterIds,
    /// Counters it signals after its writes are visible.
    pub signals: CounterIds,
    /// Bytes and arithmetic.
    pub cost: TaskCost,
}

/// An operator-level data edge: `consumer` reads `tensor`, which `producer` writes.
///
/// An edge is either *synchronised* (its tensor is split into shards, each guarded by a
/// counter the consumer waits on) or *implied*: every producer task is already ordered before
/// every consumer task by the waits of other edges (e.g. a residual read two operators later).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Its id.
    pub id: EdgeId,
    /// Writing operator.
    pub producer: OpId,
    /// Reading operator.
    pub consumer: OpId,
    /// The tensor carried.
    pub tensor: TensorId,
    /// Shard count (1 = whole tensor); 0 for implied edges.
    pub shards: u32,
    /// One counter per shard, in row order; empty for implied edges.
    pub counters: Vec<CounterId>,
}

impl Edge {
    /// Whether the edge is implied by other edges' waits rather than carried by counters.
    pub fn implied(&self) -> bool {
        self.counters.is_empty()
    }
}

/// A monotonic ready counter: one shard of one edge.
///
/// Producers add 1 after their writes to the shard are visible; at decode step `s` (1-based)
/// a consumer waits until the value reaches `signals_per_step * s`, so counters are never reset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    /// Its id.
    pub id: CounterId,
    /// The edge it belongs to.
    pub edge: EdgeId,
    /// Shard index within the edge.
    pub shard: u32,
    /// The tensor rows the shard covers.
    pub access: Access,
    /// Number of producer tasks that signal it each step.
    pub signals_per_step: u32,
}

/// The tiled task DAG of one decode step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskGraph {
    /// Model name.
    pub model: String,
    /// Operators in topological order.
    pub ops: Vec<Operator>,
    /// Tensors.
    pub tensors: Vec<Tensor>,
    /// Tasks, grouped by operator; id order is a topological order.
    pub tasks: Vec<Task>,
    /// Operator edges (synchronised and implied).
    pub edges: Vec<Edge>,
    /// Ready counters.
    pub counters: Vec<Counter>,
    /// Weight bytes of the model per step, from the geometry (for cross-checking tasks).
    pub model_weight_bytes: u64,
    /// KV length (tokens in the cache) at the workload's middle decode step.
    pub typical_kv_len: u32,
}

impl TaskGraph {
    /// The task with id `id`.
    pub fn task(&self, id: TaskId) -> &Task {
        &self.tasks[id.index()]
    }

    /// The operator with id `id`.
    pub fn op(&self, id: OpId) -> &Operator {
        &self.ops[id.index()]
    }

    /// The operator that task `id` belongs to.
    pub fn op_of(&self, id: TaskId) -> &Operator {
        self.op(self.task(id).op)
    }

    /// The counter with id `id`.
    pub fn counter(&self, id: CounterId) -> &Counter {
        &self.counters[id.index()]
    }

    /// Sum of all tasks' weight bytes.
    pub fn task_weight_bytes(&self) -> u64 {
        self.tasks.iter().map(|t| t.cost.weight_bytes).sum()
    }

    /// For every counter, the tasks that signal it (in id order).
    pub fn signalers(&self) -> Vec<Vec<TaskId>> {
        let mut out = vec![Vec::new(); self.counters.len()];
        for t in &self.tasks {
            for c in &t.signals {
                out[c.index()].push(t.id);
            }
        }
        out
    }

    /// For every counter, the tasks that wait on it (in id order).
    pub fn waiters(&self) -> Vec<Vec<TaskId>> {
        let mut out = vec![Vec::new(); self.counters.len()];
        for t in &self.tasks {
            for c in &t.waits {
                out[c.index()].push(t.id);
            }
        }
        out
    }
}

impl TaskGraph {
    /// The tasks of operator `op`, in tile order.
    pub fn tasks_of(&self, op: OpId) -> impl Iterator<Item = &Task> + '_ {
        let o = &self.ops[op.index()];
        self.tasks[o.first_task.index()..o.first_task.index() + o.tasks as usize].iter()
    }
}
