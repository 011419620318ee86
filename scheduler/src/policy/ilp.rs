//! Integer-programming assignment, decomposed per operator (good_lp with the microlp solver).
//!
//! Operators are placed in topological order. For each one, the SMs are grouped by the time
//! they become free for it (the cost-model timing of everything placed so far), its tasks are
//! grouped into cost classes, and a small MILP chooses how many tasks of each class each SM
//! group takes so that the operator's makespan is minimal:
//!
//! ```text
//! min C  s.t.  sum_g n[c,g] = N_c,   n[c,g] <= |g| * y[c,g],   C >= start_g + sum_c cost_c * y[c,g]
//! ```
//!
//! (`y[c,g]` is the most tasks of class `c` one SM of group `g` runs). Counting tasks instead of
//! assigning each one removes the 132-fold SM symmetry and keeps every program at a few hundred
//! variables, so microlp proves optimality well inside the time limit. A failed or invalid
//! solve falls back to greedy water filling for that operator, and the report says so.
//!
//! microlp (pure Rust) was chosen over HiGHS and CBC: it builds from crates.io alone, links
//! statically and runs on the bare GPU machine; the count formulation keeps instances small
//! enough that its slower branch and bound does not matter.

use std::time::Instant;

use good_lp::{
    microlp, variable, Expression, ProblemVariables, Solution, SolutionStatus, SolverModel,
    Variable, WithTimeLimit,
};
use mkc_ir::{OpId, SmId, TaskGraph, TaskId};

use crate::assignment::Assignment;
use crate::cost::CostModel;

/// Budgets of the ILP policy.
#[derive(Clone, Debug)]
pub struct IlpOptions {
    /// Wall-clock budget for all operators' solves together, in seconds.
    pub time_limit_s: f64,
    /// SMs whose free times differ by less than this share one group, in nanoseconds.
    pub group_tolerance_ns: f64,
}

impl Default for IlpOptions {
    fn default() -> Self {
        IlpOptions {
            time_limit_s: 20.0,
            group_tolerance_ns: 50.0,
        }
    }
}

/// How the per-operator programs ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IlpReport {
    /// Operators solved.
    pub ops: usize,
    /// Programs proven optimal.
    pub optimal: usize,
    /// Programs stopped by the time limit with an incumbent.
    pub time_limited: usize,
    /// Operators placed by the greedy fallback (solver error or invalid answer).
    pub fallbacks: usize,
    /// Total solver wall time in milliseconds.
    pub solve_ms: f64,
}

/// Assigns every task by per-operator MILPs.
pub fn assign(
    graph: &TaskGraph,
    cost: &CostModel,
    sms: usize,
    options: &IlpOptions,
) -> (Assignment, IlpReport) {
    let n = graph.tasks.len();
    let mut sm_of = vec![SmId(0); n];
    let mut sm_free = vec![0.0f64; sms];
    let mut counter_done = vec![0.0f64; graph.counters.len()];
    let mut report = IlpReport::default();
    let per_op_limit = (options.time_limit_s / graph.ops.len().max(1) as f64).max(0.05);
    let started = Instant::now();
    // The solves may take up to the whole budget: a progress bar with an estimate, drawn only
    // on a terminal.
    let bar = indicatif::ProgressBar::new(graph.ops.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} operator programs solved, {eta} left",
        )
        .expect("a valid template"),
    );

    for op in &graph.ops {
        bar.inc(1);
        let ready: Vec<f64> = op
            .task_ids()
            .map(|t| {
                graph
                    .task(t)
                    .waits
                    .iter()
                    .map(|c| counter_done[c.index()] + cost.signal_ns)
                    .fold(0.0, f64::max)
            })
            .collect();
        let op_ready = ready.iter().cloned().fold(f64::INFINITY, f64::min);
        let problem = OpProblem::new(graph, cost, op.id, &sm_free, op_ready, options);
        report.ops += 1;
        let counts = match problem.solve(per_op_limit) {
            Some((counts, status)) => {
                match status {
                    SolutionStatus::Optimal => report.optimal += 1,
                    _ => report.time_limited += 1,
                }
                counts
            }
            None => {
                report.fallbacks += 1;
                problem.greedy()
            }
        };
        problem.materialize(&counts, &ready, &mut sm_of);
        // Advance the timing state over this operator's tasks (id order = stream order).
        for t in op.task_ids() {
            let task = graph.task(t);
            let sm = sm_of[t.index()].index();
            let start = task
                .waits
                .iter()
                .map(|c| counter_done[c.index()] + cost.signal_ns)
                .fold(sm_free[sm], f64::max);
            let end = start + cost.ns(t);
            sm_free[sm] = end;
            for c in &task.signals {
                counter_done[c.index()] = counter_done[c.index()].max(end);
            }
        }
    }
    bar.finish_and_clear();
    report.solve_ms = started.elapsed().as_secs_f64() * 1e3;
    let order = graph.tasks.iter().map(|t| t.id).collect();
    (Assignment { order, sm: sm_of }, report)
}

/// One operator's count program.
struct OpProblem {
    /// Task ids of each cost class.
    classes: Vec<Vec<TaskId>>,
    /// Cost of a task of each class.
    class_ns: Vec<f64>,
    /// SMs of each group, ascending by start time.
    groups: Vec<Vec<SmId>>,
    /// Start time of each group (the latest free time of its SMs).
    group_start: Vec<f64>,
    /// The fixed cost of an instruction.
    overhead_ns: f64,
}

impl OpProblem {
    fn new(
        graph: &TaskGraph,
        cost: &CostModel,
        op: OpId,
        sm_free: &[f64],
        op_ready: f64,
        options: &IlpOptions,
    ) -> OpProblem {
        let mut classes: Vec<Vec<TaskId>> = Vec::new();
        let mut class_ns: Vec<f64> = Vec::new();
        for t in graph.op(op).task_ids() {
            let ns = cost.ns(t);
            match class_ns.iter().position(|&c| (c - ns).abs() < 0.5) {
                Some(i) => classes[i].push(t),
                None => {
                    class_ns.push(ns);
                    classes.push(vec![t]);
                }
            }
        }
        let mut sms: Vec<(f64, SmId)> = sm_free
            .iter()
            .enumerate()
            .map(|(s, &f)| (f.max(op_ready), SmId::from_index(s)))
            .collect();
        sms.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut groups: Vec<Vec<SmId>> = Vec::new();
        let mut group_start: Vec<f64> = Vec::new();
        let mut group_first = f64::NEG_INFINITY;
        for (start, sm) in sms {
            if start - group_first > options.group_tolerance_ns || groups.is_empty() {
                groups.push(Vec::new());
                group_start.push(start);
                group_first = start;
            }
            groups.last_mut().expect("a group").push(sm);
            *group_start.last_mut().expect("a group") = start;
        }
        OpProblem {
            classes,
            class_ns,
            groups,
            group_start,
            overhead_ns: cost.overhead_ns,
        }
    }

    /// Solves the MILP; `None` when the solver fails or its answer does not add up.
    fn solve(&self, time_limit_s: f64) -> Option<(Vec<Vec<u32>>, SolutionStatus)> {
        let mut vars = ProblemVariables::new();
        let makespan = vars.add(variable().min(0.0));
        let mut n: Vec<Vec<Variable>> = Vec::new();
        let mut y: Vec<Vec<Variable>> = Vec::new();
        for class in &self.classes {
            let total = class.len() as f64;
            n.push(
                (0..self.groups.len())
                    .map(|_| vars.add(variable().integer().min(0.0).max(total)))
                    .collect(),
            );
            y.push(
                (0..self.groups.len())
                    .map(|_| vars.add(variable().integer().min(0.0).max(total)))
                    .collect(),
            );
        }
        let mut model = vars
            .minimise(makespan)
            .using(microlp)
            .with_time_limit(time_limit_s);
        for (c, class) in self.classes.iter().enumerate() {
            let sum: Expression = n[c].iter().copied().sum();
            model.add_constraint(sum.eq(class.len() as f64));
            for (g, group) in self.groups.iter().enumerate() {
                model.add_constraint(Expression::from(n[c][g]).leq(group.len() as f64 * y[c][g]));
            }
        }
        for (g, &start) in self.group_start.iter().enumerate() {
            // Each SM of the group runs the operator as one instruction: one overhead.
            let mut load = Expression::from(start + self.overhead_ns);
            for (c, &ns) in self.class_ns.iter().enumerate() {
                load.add_mul(ns, y[c][g]);
            }
            model.add_constraint(load.leq(makespan));
        }
        let solution = model.solve().ok()?;
        let status = solution.status();
        let counts: Vec<Vec<u32>> = n
            .iter()
            .map(|row| {
                row.iter()
                    .map(|&v| solution.value(v).round().max(0.0) as u32)
                    .collect()
            })
            .collect();
        let valid = counts
            .iter()
            .zip(&self.classes)
            .all(|(row, class)| row.iter().sum::<u32>() as usize == class.len());
        valid.then_some((counts, status))
    }

    /// Water filling: each task to the group whose SMs would finish it earliest.
    fn greedy(&self) -> Vec<Vec<u32>> {
        let mut finish: Vec<Vec<f64>> = self
            .groups
            .iter()
            .zip(&self.group_start)
            .map(|(g, &s)| vec![s; g.len()])
            .collect();
        let mut counts = vec![vec![0u32; self.groups.len()]; self.classes.len()];
        for (c, class) in self.classes.iter().enumerate() {
            for _ in class {
                let (g, i) = finish
                    .iter()
                    .enumerate()
                    .flat_map(|(g, f)| f.iter().enumerate().map(move |(i, &t)| (t, g, i)))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, g, i)| (g, i))
                    .expect("at least one SM");
                finish[g][i] += self.class_ns[c];
                counts[c][g] += 1;
            }
        }
        counts
    }

    /// Places the counted tasks: earliest-ready tasks to the earliest groups, each SM of a
    /// group taking a contiguous block of them (so that an SM's tasks of one class form one
    /// run, one instruction, where the ready order is the id order).
    fn materialize(&self, counts: &[Vec<u32>], ready: &[f64], sm_of: &mut [SmId]) {
        let first = self
            .classes
            .iter()
            .flatten()
            .map(|t| t.0)
            .min()
            .unwrap_or(0);
        for (c, class) in self.classes.iter().enumerate() {
            let mut tasks = class.clone();
            tasks.sort_by(|a, b| {
                ready[(a.0 - first) as usize]
                    .total_cmp(&ready[(b.0 - first) as usize])
                    .then(a.cmp(b))
            });
            let mut next = tasks.into_iter();
            for (g, group) in self.groups.iter().enumerate() {
                let k = counts[c][g];
                let parts = (group.len() as u32).min(k).max(1);
                for part in 0..parts {
                    let (_, count) = mkc_catalogue::cta_tasks(k, parts, part);
                    for _ in 0..count {
                        let t = next.next().expect("counts add up to the class size");
                        sm_of[t.index()] = group[part as usize];
                    }
                }
            }
        }
    }
}
