//! Readiness-aware list scheduling with critical-path priority.
//!
//! Simulates the cost model forward: the earliest-free SM takes, among the tasks whose
//! counters are complete by then, the one with the longest path to the end of the step
//! (ties: lowest id). If none is ready it takes the task that becomes ready first. Hazy's
//! DAG-aware scheduler ignored readiness times and lost to round robin; this one does not.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use mkc_ir::{SmId, TaskGraph, TaskId};

use crate::assignment::Assignment;
use crate::cost::CostModel;

/// Times as integer picoseconds, so heap order is total and deterministic.
fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round() as u64
}

/// Longest path (cost plus signal latencies) from the start of each task to the step's end.
pub fn bottom_levels(graph: &TaskGraph, cost: &CostModel) -> Vec<f64> {
    let mut task_level = vec![0.0f64; graph.tasks.len()];
    let mut counter_level = vec![0.0f64; graph.counters.len()];
    for t in graph.tasks.iter().rev() {
        let after = t
            .signals
            .iter()
            .map(|c| counter_level[c.index()])
            .fold(0.0, f64::max);
        let level = cost.ns(t.id) + after;
        task_level[t.id.index()] = level;
        for c in &t.waits {
            let cl = &mut counter_level[c.index()];
            *cl = cl.max(cost.signal_ns + level);
        }
    }
    task_level
}

/// Assigns every task to an SM by list scheduling.
pub fn assign(graph: &TaskGraph, cost: &CostModel, sms: usize) -> Assignment {
    let n = graph.tasks.len();
    let level: Vec<u64> = bottom_levels(graph, cost).into_iter().map(ps).collect();
    let waiters = graph.waiters();
    let mut remaining: Vec<u32> = graph.counters.iter().map(|c| c.signals_per_step).collect();
    let mut counter_done = vec![0u64; graph.counters.len()];
    let mut unmet: Vec<usize> = graph.tasks.iter().map(|t| t.waits.len()).collect();
    let mut ready_at = vec![0u64; n];
    let signal = ps(cost.signal_ns);

    // Tasks whose counters are all complete, keyed by the time they become ready.
    let mut pending: BinaryHeap<Reverse<(u64, TaskId)>> = graph
        .tasks
        .iter()
        .filter(|t| t.waits.is_empty())
        .map(|t| Reverse((0, t.id)))
        .collect();
    // Tasks ready by the current SM's free time, by priority (longest path, then lowest id).
    let mut available: BinaryHeap<(u64, Reverse<TaskId>)> = BinaryHeap::new();
    let mut free_sms: BinaryHeap<Reverse<(u64, SmId)>> = (0..sms)
        .map(|s| Reverse((0, SmId::from_index(s))))
        .collect();

    let mut order = Vec::with_capacity(n);
    let mut sm_of = vec![SmId(0); n];
    while order.len() < n {
        let Reverse((free, sm)) = free_sms.pop().expect("at least one SM");
        while let Some(&Reverse((r, t))) = pending.peek() {
            if r > free {
                break;
            }
            pending.pop();
            available.push((level[t.index()], Reverse(t)));
        }
        if available.is_empty() {
            // Nothing is ready yet: admit every task that becomes ready first.
            let Some(&Reverse((r, _))) = pending.peek() else {
                unreachable!("a task graph with unmet waits has a counter cycle");
            };
            while let Some(&Reverse((r2, t))) = pending.peek() {
                if r2 > r {
                    break;
                }
                pending.pop();
                available.push((level[t.index()], Reverse(t)));
            }
        }
        let (_, Reverse(task)) = available.pop().expect("a ready task");
        let start = free.max(ready_at[task.index()]);
        let end = start + ps(cost.ns(task));
        order.push(task);
        sm_of[task.index()] = sm;
        free_sms.push(Reverse((end, sm)));
        for c in &graph.task(task).signals {
            let ci = c.index();
            counter_done[ci] = counter_done[ci].max(end);
            remaining[ci] -= 1;
            if remaining[ci] == 0 {
                for &w in &waiters[ci] {
                    let wi = w.index();
                    ready_at[wi] = ready_at[wi].max(counter_done[ci] + signal);
                    unmet[wi] -= 1;
                    if unmet[wi] == 0 {
                        pending.push(Reverse((ready_at[wi], w)));
                    }
                }
            }
        }
    }
    Assignment { order, sm: sm_of }
}
