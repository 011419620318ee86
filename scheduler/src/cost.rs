//! The scheduler's cost model: a per-task duration from bytes over per-SM bandwidth, a
//! makespan evaluator for SM assignments, and a lower bound every schedule is compared to.
//!
//! This is deliberately simpler than the simulator: it is what the policies optimise, fast
//! enough to call inside a search. The simulator is what predicts the GPU.

use mkc_ir::device::DeviceProfile;
use mkc_ir::{TaskGraph, TaskId};

use crate::assignment::Assignment;

/// Per-task durations, the per-instruction overhead and dependency latency, in nanoseconds.
#[derive(Clone, Debug)]
pub struct CostModel {
    /// Streaming time of each task (indexed by task id), without instruction overhead.
    pub task_ns: Vec<f64>,
    /// Fixed cost of one instruction (a run of consecutive tasks of one operator on one SM).
    pub overhead_ns: f64,
    /// Latency from a signal to a waiting consumer seeing it.
    pub signal_ns: f64,
}

impl CostModel {
    /// Costs for `graph` on `device` at the graph's typical KV length: each task streams its
    /// bytes at an equal share of the read bandwidth; each instruction adds a fixed overhead.
    pub fn new(graph: &TaskGraph, device: &DeviceProfile) -> CostModel {
        let bw = device.per_sm_bytes_per_ns();
        let kv = graph.typical_kv_len;
        CostModel {
            task_ns: graph
                .tasks
                .iter()
                .map(|t| t.cost.bytes_at(kv) as f64 / bw)
                .collect(),
            overhead_ns: device.latencies.instruction_overhead_ns,
            signal_ns: device.latencies.signal_visible_ns,
        }
    }

    /// Streaming time of task `t`.
    pub fn ns(&self, t: TaskId) -> f64 {
        self.task_ns[t.index()]
    }

    /// Duration of one instruction running tasks `first .. first + count`.
    pub fn run_ns(&self, first: TaskId, count: u32) -> f64 {
        self.overhead_ns
            + self.task_ns[first.index()..first.index() + count as usize]
                .iter()
                .sum::<f64>()
    }
}

/// The outcome of evaluating an assignment under the cost model.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// Time at which the last task ends.
    pub makespan_ns: f64,
    /// Busy time of each SM.
    pub busy_ns: Vec<f64>,
}

/// Each SM's free time and busy time, and each counter's completion, from an assignment.
pub struct Timing {
    /// When each SM finishes its last task.
    pub sm_free_ns: Vec<f64>,
    /// When each counter has received its last signal.
    pub counter_done_ns: Vec<f64>,
    /// Busy time of each SM (streaming plus instruction overheads).
    pub busy_ns: Vec<f64>,
}

/// Times tasks that are already placed, in the assignment's global order: each starts when its
/// SM is free and every counter it waits on is complete (plus the signal latency). A task that
/// does not continue its SM's run (the previous task there, of the same operator) starts a new
/// instruction and pays the instruction overhead, as `Assignment::to_plan` merges them.
pub fn time(graph: &TaskGraph, cost: &CostModel, a: &Assignment, sms: usize) -> Timing {
    let mut t = Timing {
        sm_free_ns: vec![0.0; sms],
        counter_done_ns: vec![0.0; graph.counters.len()],
        busy_ns: vec![0.0; sms],
    };
    let mut last: Vec<Option<TaskId>> = vec![None; sms];
    for &task in &a.order {
        let sm = a.sm[task.index()].index();
        let continues =
            last[sm].is_some_and(|p| p.0 + 1 == task.0 && graph.task(p).op == graph.task(task).op);
        last[sm] = Some(task);
        let ready = graph
            .task(task)
            .waits
            .iter()
            .map(|c| t.counter_done_ns[c.index()] + cost.signal_ns)
            .fold(t.sm_free_ns[sm], f64::max);
        let ns = cost.ns(task) + if continues { 0.0 } else { cost.overhead_ns };
        let end = ready + ns;
        t.busy_ns[sm] += ns;
        t.sm_free_ns[sm] = end;
        for c in &graph.task(task).signals {
            let done = &mut t.counter_done_ns[c.index()];
            *done = done.max(end);
        }
    }
    t
}

/// Evaluates a complete assignment.
pub fn evaluate(graph: &TaskGraph, cost: &CostModel, a: &Assignment, sms: usize) -> Estimate {
    let timing = time(graph, cost, a, sms);
    Estimate {
        makespan_ns: timing.sm_free_ns.iter().cloned().fold(0.0, f64::max),
        busy_ns: timing.busy_ns,
    }
}

/// A lower bound on any persistent schedule's makespan under the cost model.
///
/// The operator chain is cut into *segments* at barrier edges (edges where every consumer task
/// waits on every shard, so no consumer starts before the whole producer ends). A segment takes
/// at least the larger of its work spread evenly over the SMs (the LP relaxation of the
/// assignment problem) and its longest dependency path; segments are sequential and separated
/// by one signal latency.
pub fn lower_bound(graph: &TaskGraph, cost: &CostModel, sms: usize) -> f64 {
    let mut counter_path = vec![0.0f64; graph.counters.len()];
    let mut total = 0.0;
    let mut seg_work = 0.0;
    let mut seg_path: f64 = 0.0;
    for op in &graph.ops {
        if starts_segment(graph, op.id) {
            total += seg_bound(seg_work, seg_path, sms) + cost.signal_ns;
            seg_work = 0.0;
            seg_path = 0.0;
            counter_path.iter_mut().for_each(|c| *c = 0.0);
        }
        // Every operator runs in at least one instruction, and every task on a path is in an
        // instruction of its own operator: one overhead each.
        seg_work += cost.overhead_ns;
        for t in op.task_ids() {
            let task = graph.task(t);
            let start = task
                .waits
                .iter()
                .map(|c| counter_path[c.index()])
                .fold(0.0, f64::max);
            let end = start + cost.overhead_ns + cost.ns(t);
            seg_work += cost.ns(t);
            seg_path = seg_path.max(end);
            for c in &task.signals {
                let cp = &mut counter_path[c.index()];
                *cp = cp.max(end + cost.signal_ns);
            }
        }
    }
    total + seg_bound(seg_work, seg_path, sms)
}

fn seg_bound(work: f64, path: f64, sms: usize) -> f64 {
    (work / sms as f64).max(path)
}

/// Whether operator `op` starts a new segment: it is not the first operator, and every one of
/// its tasks waits on every counter of a synchronised edge from the immediately preceding
/// operator (a barrier).
fn starts_segment(graph: &TaskGraph, op: mkc_ir::OpId) -> bool {
    if op.index() == 0 {
        return false;
    }
    let prev = mkc_ir::OpId::from_index(op.index() - 1);
    let operator = graph.op(op);
    graph
        .edges
        .iter()
        .filter(|e| e.consumer == op && e.producer == prev && !e.implied())
        .any(|e| {
            operator
                .task_ids()
                .all(|t| e.counters.iter().all(|c| graph.task(t).waits.contains(c)))
        })
}
