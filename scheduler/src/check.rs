//! The schedule checker: re-verifies a schedule without trusting the code that built it.
//!
//! Invariants checked (each violation is reported with the ids involved):
//! 0. Operator edges form a DAG, listed in topological order (petgraph).
//! 1. Counters: every counter's `signals_per_step` equals the tasks that signal it; those tasks
//!    belong to the edge's producer and write the counter's rows; each edge's shards partition
//!    its tensor in row order.
//! 2. Waits, no more: every counter a task waits on belongs to an edge into the task's operator
//!    and covers rows the task reads.
//! 3. Waits, exactly: for a synchronised edge, a task waits on exactly the edge's counters whose
//!    rows overlap what it reads.
//! 4. Waits, no fewer: for every row a task reads of a tensor produced in the step, every task
//!    writing or adding into that row is guaranteed finished by the task's waits (directly or
//!    transitively); for every row it adds into, every task storing that row (additions
//!    commute, so they need no order among themselves).
//! 5. Task ids form a topological order (signalers of a waited counter have smaller ids).
//! 6. The summed task weight bytes equal the model's weight bytes.
//! 7. Persistent plans: every task exactly once, each instruction a run of consecutive tasks
//!    of one operator; `seq` is a permutation of the instructions and a topological order
//!    (every counter an instruction waits on is signalled only by instructions of smaller
//!    `seq`); each SM's stream is increasing in `seq` (a subsequence of one topological order,
//!    so one resident CTA per SM cannot deadlock); an instruction's waits are its tasks'
//!    counters once each, its signals their counts, its targets the counters' signals per step.
//! 8. Chain plans: one grid per operator in order, launching that operator's kernel; its CTAs
//!    run every task once, in contiguous runs as the kernels divide them; with PDL, every grid that
//!    reads a tensor produced in the step waits, its early loads are independent of the step,
//!    and no grid that never waits carries the PDL attribute or a programmatic edge; without
//!    PDL, no grid waits, triggers or carries the attribute.

use std::collections::HashMap;

use petgraph::algo::is_cyclic_directed;
use petgraph::graph::DiGraph;

use mkc_ir::{CounterId, Rows, TaskGraph, TaskId, TensorId};

use crate::schedule::{EdgeSync, Plan, Schedule, Target};

/// At most this many violations are collected before the checker stops looking.
const MAX_VIOLATIONS: usize = 20;

/// Violations found by the checker; empty means the schedule is valid.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Violations(pub Vec<String>);

impl Violations {
    fn push(&mut self, message: String) {
        if self.0.len() < MAX_VIOLATIONS {
            self.0.push(message);
        }
    }

    fn full(&self) -> bool {
        self.0.len() >= MAX_VIOLATIONS
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for Violations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for v in &self.0 {
            writeln!(f, "  - {v}")?;
        }
        Ok(())
    }
}

/// Checks a whole schedule: its graph and its plan.
pub fn check(schedule: &Schedule) -> Violations {
    let mut v = check_graph(&schedule.graph);
    match &schedule.plan {
        Plan::Persistent(_) => check_persistent(schedule, &mut v),
        Plan::Chain(_) => check_chain(schedule, &mut v),
    }
    v
}

/// Checks the task graph's invariants (1-6).
pub fn check_graph(g: &TaskGraph) -> Violations {
    let mut v = Violations::default();
    check_operator_order(g, &mut v);
    check_counters(g, &mut v);
    check_wait_sets(g, &mut v);
    check_topological_ids(g, &mut v);
    if v.is_empty() {
        check_coverage(g, &mut v);
    }
    let sum = g.task_weight_bytes();
    if sum != g.model_weight_bytes {
        v.push(format!(
            "task weight bytes sum to {sum}, the model has {}",
            g.model_weight_bytes
        ));
    }
    v
}

/// Operator edges form a DAG and the operator list is one of its topological orders.
fn check_operator_order(g: &TaskGraph, v: &mut Violations) {
    let mut ops: DiGraph<(), ()> = DiGraph::new();
    let nodes: Vec<_> = g.ops.iter().map(|_| ops.add_node(())).collect();
    for e in &g.edges {
        ops.add_edge(nodes[e.producer.index()], nodes[e.consumer.index()], ());
        if e.producer >= e.consumer {
            v.push(format!(
                "{}: {} feeds the earlier {}",
                e.id, e.producer, e.consumer
            ));
        }
    }
    if is_cyclic_directed(&ops) {
        v.push("operator edges form a cycle".to_string());
    }
}

fn check_counters(g: &TaskGraph, v: &mut Violations) {
    let signalers = g.signalers();
    for c in &g.counters {
        let s = &signalers[c.id.index()];
        if s.len() as u32 != c.signals_per_step {
            v.push(format!(
                "{} expects {} signals per step but {} tasks signal it",
                c.id,
                c.signals_per_step,
                s.len()
            ));
        }
        let edge = &g.edges[c.edge.index()];
        for &t in s {
            let task = g.task(t);
            let writes = task
                .writes
                .iter()
                .chain(&task.accumulates)
                .any(|w| w.tensor == c.access.tensor && w.rows.overlaps(c.access.rows));
            if task.op != edge.producer || !writes {
                v.push(format!(
                    "{t} signals {} but is not a producer of its rows",
                    c.id
                ));
            }
        }
    }
    for e in g.edges.iter().filter(|e| !e.implied()) {
        let rows = g.tensors[e.tensor.index()].rows;
        let mut next = 0;
        for &c in &e.counters {
            let counter = g.counter(c);
            if counter.access.tensor != e.tensor || counter.access.rows.start != next {
                v.push(format!("{}: shards of {} do not tile its tensor", c, e.id));
            }
            next = counter.access.rows.end;
        }
        if next != rows || e.counters.len() as u32 != e.shards {
            v.push(format!(
                "{}: {} shards cover rows 0..{next} of a {rows}-row tensor",
                e.id, e.shards
            ));
        }
    }
}

fn check_wait_sets(g: &TaskGraph, v: &mut Violations) {
    for task in &g.tasks {
        for &c in &task.waits {
            let counter = g.counter(c);
            let edge = &g.edges[counter.edge.index()];
            let reads = task
                .reads
                .iter()
                .any(|r| r.tensor == counter.access.tensor && r.rows.overlaps(counter.access.rows));
            if edge.consumer != task.op || !reads {
                v.push(format!(
                    "{} waits on {c}, which guards nothing it reads",
                    task.id
                ));
            }
        }
        for e in g
            .edges
            .iter()
            .filter(|e| e.consumer == task.op && !e.implied())
        {
            for &c in &e.counters {
                let rows = g.counter(c).access.rows;
                let reads = task
                    .reads
                    .iter()
                    .any(|r| r.tensor == e.tensor && r.rows.overlaps(rows));
                if reads != task.waits.contains(&c) {
                    v.push(format!(
                        "{} reads rows guarded by {c}: waits {} but should {}",
                        task.id,
                        task.waits.contains(&c),
                        reads
                    ));
                }
            }
        }
        if v.full() {
            return;
        }
    }
}

fn check_topological_ids(g: &TaskGraph, v: &mut Violations) {
    let signalers = g.signalers();
    for task in &g.tasks {
        for c in &task.waits {
            if let Some(&late) = signalers[c.index()].iter().find(|&&s| s >= task.id) {
                v.push(format!(
                    "{} waits on {c}, signalled by the later {late}",
                    task.id
                ));
            }
        }
    }
}

/// A dense bit set over task ids.
#[derive(Clone)]
struct TaskSet(Vec<u64>);

impl TaskSet {
    fn new(n: usize) -> Self {
        TaskSet(vec![0; n.div_ceil(64)])
    }
    fn insert(&mut self, t: TaskId) {
        self.0[t.index() / 64] |= 1 << (t.index() % 64);
    }
    fn contains(&self, t: TaskId) -> bool {
        self.0[t.index() / 64] & (1 << (t.index() % 64)) != 0
    }
    fn union(&mut self, other: &TaskSet) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }
}

/// Invariant 4: every row read was written by tasks guaranteed finished.
fn check_coverage(g: &TaskGraph, v: &mut Violations) {
    let n = g.tasks.len();
    let signalers = g.signalers();
    // Tasks guaranteed finished once each counter is complete, in producer order.
    let mut by_producer: Vec<CounterId> = g.counters.iter().map(|c| c.id).collect();
    by_producer.sort_by_key(|c| signalers[c.index()].first().copied());
    let mut done: Vec<Option<TaskSet>> = vec![None; g.counters.len()];
    for c in by_producer {
        let mut set = TaskSet::new(n);
        let mut upstream: Vec<CounterId> = Vec::new();
        for &s in &signalers[c.index()] {
            set.insert(s);
            upstream.extend(&g.task(s).waits);
        }
        upstream.sort_unstable();
        upstream.dedup();
        for w in upstream {
            match &done[w.index()] {
                Some(d) => set.union(d),
                None => {
                    v.push(format!("{c}: counters depend on each other in a cycle"));
                    return;
                }
            }
        }
        done[c.index()] = Some(set);
    }
    // Writers of each tensor: (task, rows, whether it adds into them).
    let mut writers: HashMap<TensorId, Vec<(TaskId, Rows, bool)>> = HashMap::new();
    for t in &g.tasks {
        for (w, adds) in t
            .writes
            .iter()
            .map(|w| (w, false))
            .chain(t.accumulates.iter().map(|w| (w, true)))
        {
            writers
                .entry(w.tensor)
                .or_default()
                .push((t.id, w.rows, adds));
        }
    }
    // Per (wait set, tensor, whether the access adds): prefix count of rows with some writer
    // not yet finished. A read waits for every writer of its rows; an addition only for the
    // plain writes that zero them (additions into one row commute).
    let mut memo: HashMap<(Vec<CounterId>, TensorId, bool), Vec<u32>> = HashMap::new();
    for task in &g.tasks {
        let accesses = task
            .reads
            .iter()
            .map(|r| (r, false))
            .chain(task.accumulates.iter().map(|r| (r, true)));
        for (r, adds) in accesses {
            if g.tensors[r.tensor.index()].producer.is_none() {
                continue;
            }
            let key = (task.waits.to_vec(), r.tensor, adds);
            let unsafe_prefix = memo.entry(key).or_insert_with(|| {
                let mut finished = TaskSet::new(n);
                for c in &task.waits {
                    if let Some(d) = &done[c.index()] {
                        finished.union(d);
                    }
                }
                let rows = g.tensors[r.tensor.index()].rows as usize;
                let mut bad = vec![false; rows];
                for &(w, wr, w_adds) in writers.get(&r.tensor).map(Vec::as_slice).unwrap_or(&[]) {
                    // Another addition into the row needs no order with this one.
                    let commutes = adds && w_adds;
                    if !commutes && !finished.contains(w) {
                        bad[wr.start as usize..wr.end as usize].fill(true);
                    }
                }
                let mut prefix = vec![0u32; rows + 1];
                for i in 0..rows {
                    prefix[i + 1] = prefix[i] + bad[i] as u32;
                }
                prefix
            });
            let (s, e) = (r.rows.start as usize, r.rows.end as usize);
            if unsafe_prefix[e] != unsafe_prefix[s] {
                v.push(format!(
                    "{} {} {} rows {}..{} before all their writers are guaranteed done",
                    task.id,
                    if adds { "adds into" } else { "reads" },
                    g.tensors[r.tensor.index()].name,
                    s,
                    e
                ));
                if v.full() {
                    return;
                }
            }
        }
    }
}

fn check_persistent(s: &Schedule, v: &mut Violations) {
    let g = &s.graph;
    let Some(plan) = s.persistent() else { return };
    if plan.streams.len() != s.device.sms as usize {
        v.push(format!(
            "{} streams for a {}-SM device",
            plan.streams.len(),
            s.device.sms
        ));
    }
    let n = g.tasks.len();
    let total: usize = plan.streams.iter().map(Vec::len).sum();
    let mut seq_of = vec![None; n];
    let mut seen_seq = vec![false; total];
    for (sm, stream) in plan.streams.iter().enumerate() {
        let mut last = None;
        for ins in stream {
            let end = ins.first.index() + ins.count as usize;
            if ins.count == 0 || end > n {
                v.push(format!(
                    "sm{sm}: instruction at {} runs {} tasks, outside the graph's {n}",
                    ins.first, ins.count
                ));
                continue;
            }
            let last_task = TaskId(end as u32 - 1);
            if g.task(ins.first).op != g.task(last_task).op {
                v.push(format!(
                    "sm{sm}: instruction {}..={last_task} spans two operators",
                    ins.first
                ));
            }
            for (t, seq) in seq_of[ins.first.index()..end].iter_mut().enumerate() {
                if seq.replace(ins.seq).is_some() {
                    v.push(format!("task{} is scheduled twice", ins.first.index() + t));
                }
            }
            match seen_seq.get_mut(ins.seq as usize) {
                Some(seen) if !*seen => *seen = true,
                _ => v.push(format!("seq {} is repeated or out of range", ins.seq)),
            }
            if last.is_some_and(|l| l >= ins.seq) {
                v.push(format!(
                    "sm{sm}: stream is not in global order at {}",
                    ins.first
                ));
            }
            last = Some(ins.seq);
            // The run's waits are every counter its tasks wait on, once; its signals the
            // number of its tasks signalling each counter, both in first-appearance order.
            let mut waits: Vec<CounterId> = Vec::new();
            let mut signals: Vec<(CounterId, u32)> = Vec::new();
            for t in &g.tasks[ins.first.index()..end] {
                for &c in &t.waits {
                    if !waits.contains(&c) {
                        waits.push(c);
                    }
                }
                for &c in &t.signals {
                    match signals.iter_mut().find(|(d, _)| *d == c) {
                        Some((_, k)) => *k += 1,
                        None => signals.push((c, 1)),
                    }
                }
            }
            let got_waits: Vec<CounterId> = ins.waits.iter().map(|w| w.counter).collect();
            let got_signals: Vec<(CounterId, u32)> =
                ins.signals.iter().map(|s| (s.counter, s.count)).collect();
            if got_waits != waits || got_signals != signals {
                v.push(format!(
                    "{}: instruction waits/signals differ from its tasks'",
                    ins.first
                ));
            }
            for w in &ins.waits {
                if w.target_per_step != g.counter(w.counter).signals_per_step {
                    v.push(format!(
                        "{} waits for {} per step on {}, which receives {}",
                        ins.first,
                        w.target_per_step,
                        w.counter,
                        g.counter(w.counter).signals_per_step
                    ));
                }
            }
            if v.full() {
                return;
            }
        }
    }
    if let Some(missing) = seq_of.iter().position(Option::is_none) {
        v.push(format!("task{missing} is not scheduled"));
        return;
    }
    // Every counter an instruction waits on is signalled only by instructions before it.
    let mut last_signal: Vec<Option<(u32, TaskId)>> = vec![None; g.counters.len()];
    for t in &g.tasks {
        let mine = seq_of[t.id.index()].expect("every task is scheduled");
        for c in &t.signals {
            let slot = &mut last_signal[c.index()];
            if slot.is_none_or(|(s, _)| mine > s) {
                *slot = Some((mine, t.id));
            }
        }
    }
    for stream in &plan.streams {
        for ins in stream {
            for w in &ins.waits {
                if let Some((s, signaller)) = last_signal[w.counter.index()] {
                    if s >= ins.seq {
                        v.push(format!(
                            "{} is ordered before {signaller}, which signals the {} it waits on",
                            ins.first, w.counter
                        ));
                        if v.full() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// A grid's CTAs run every task of its operator once, in order, as the kernels divide them:
/// CTA b of g over n tasks starts at floor(b n / g), and every CTA has at least one task.
fn check_runs(k: &crate::schedule::Kernel, tasks: u32, v: &mut Violations) {
    if k.ctas == 0 || k.runs.len() != k.ctas as usize {
        v.push(format!(
            "grid {} has {} CTAs but {} task runs",
            k.name,
            k.ctas,
            k.runs.len()
        ));
        return;
    }
    let g = k.ctas as u64;
    for (b, &[first, count]) in k.runs.iter().enumerate() {
        let start = (b as u64 * tasks as u64 / g) as u32;
        let end = ((b as u64 + 1) * tasks as u64 / g) as u32;
        if first != start || first as u64 + count as u64 != end as u64 || count == 0 {
            v.push(format!(
                "grid {} CTA {b} runs tasks {first}+{count}, not the kernels' run {start}..{end} \
                 of {tasks} tasks over {} CTAs",
                k.name, k.ctas
            ));
            return;
        }
    }
}

fn check_chain(s: &Schedule, v: &mut Violations) {
    let g = &s.graph;
    let Some(plan) = s.chain() else { return };
    let pdl = s.target == Target::Pdl;
    // Every operator runs once, in operator order.
    let covered: Vec<_> = plan.kernels.iter().map(|k| k.op).collect();
    let in_order: Vec<_> = g.ops.iter().map(|o| o.id).collect();
    if covered != in_order {
        v.push(format!(
            "the grids run operators {covered:?}, not each of the {} operators once in order",
            g.ops.len()
        ));
    }
    for (i, k) in plan.kernels.iter().enumerate() {
        let Some(op) = g.ops.get(k.op.index()) else {
            continue;
        };
        check_runs(k, op.tasks, v);
        if k.entry != mkc_catalogue::entry_point(op.kind) {
            v.push(format!(
                "grid {} launches {}, not the {} kernel",
                k.name,
                k.entry,
                mkc_catalogue::entry_point(op.kind)
            ));
        }
        // The wait must guard every tensor the grid reads that an earlier grid produced.
        let mut step_reads: Vec<TensorId> = g
            .tasks_of(k.op)
            .flat_map(|t| &t.reads)
            .map(|r| r.tensor)
            .filter(|t| g.tensors[t.index()].producer.is_some())
            .collect();
        step_reads.sort_unstable();
        step_reads.dedup();
        match (&k.wait, pdl) {
            (None, true) if !step_reads.is_empty() => v.push(format!(
                "grid {} reads a predecessor's output without waiting",
                k.name
            )),
            (Some(w), true) if w.dependent_reads != step_reads => v.push(format!(
                "grid {}: the wait guards {:?} but the grid reads {:?} from the step",
                k.name, w.dependent_reads, step_reads
            )),
            (Some(_), false) => v.push(format!("grid {} waits in a non-PDL chain", k.name)),
            _ => {}
        }
        if k.pdl_attribute != k.wait.is_some() {
            v.push(format!(
                "grid {}: PDL attribute {} but waits {}",
                k.name,
                k.pdl_attribute,
                k.wait.is_some()
            ));
        }
        let expected_edge = match i {
            0 => None,
            _ if k.pdl_attribute => Some(EdgeSync::Programmatic),
            _ => Some(EdgeSync::Full),
        };
        if k.incoming != expected_edge {
            v.push(format!("grid {}: incoming edge {:?}", k.name, k.incoming));
        }
        if !pdl && k.trigger.is_some() {
            v.push(format!("grid {} triggers in a non-PDL chain", k.name));
        }
    }
}
