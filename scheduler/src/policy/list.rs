//! Readiness-aware list scheduling with critical-path priority, over instruction-sized units.
//!
//! The unit is a run of an operator's tasks, divided as a chain grid divides them over its
//! CTAs (one run per SM for an operator with more tasks than SMs), so that each placed unit is
//! one instruction. Simulates the cost model forward: the earliest-free SM takes, among the
//! units whose counters are complete by then, the one with the longest path to the end of the
//! step (ties: lowest id). If none is ready it takes the unit that becomes ready first. Hazy's
//! DAG-aware scheduler ignored readiness times and lost to round robin; this one does not.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use mkc_ir::{SmId, TaskGraph};

use crate::assignment::Assignment;
use crate::cost::CostModel;
use crate::schedule::Instruction;

/// Times as integer picoseconds, so heap order is total and deterministic.
fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round() as u64
}

/// One schedulable unit: a run of consecutive tasks of one operator, as the instruction it
/// becomes (its tasks' waits once each, their signals counted), and its cost.
struct Unit {
    ins: Instruction,
    ns: f64,
}

/// Every operator's runs (`policy::op_runs`), in topological order.
fn units(graph: &TaskGraph, cost: &CostModel, sms: usize) -> Vec<Unit> {
    graph
        .ops
        .iter()
        .flat_map(|op| super::op_runs(op, sms))
        .map(|(first, count)| Unit {
            ins: Instruction::of_run(graph, first, count, 0),
            ns: cost.run_ns(first, count),
        })
        .collect()
}

/// Longest path (cost plus signal latencies) from the start of each unit to the step's end.
fn bottom_levels(graph: &TaskGraph, units: &[Unit], cost: &CostModel) -> Vec<f64> {
    let mut level = vec![0.0f64; units.len()];
    let mut counter_level = vec![0.0f64; graph.counters.len()];
    for (u, unit) in units.iter().enumerate().rev() {
        let after = unit
            .ins
            .signals
            .iter()
            .map(|s| counter_level[s.counter.index()])
            .fold(0.0, f64::max);
        level[u] = unit.ns + after;
        for w in &unit.ins.waits {
            let cl = &mut counter_level[w.counter.index()];
            *cl = cl.max(cost.signal_ns + level[u]);
        }
    }
    level
}

/// Assigns every task to an SM by list scheduling of its operator's runs.
pub fn assign(graph: &TaskGraph, cost: &CostModel, sms: usize) -> Assignment {
    let units = units(graph, cost, sms);
    let n = units.len();
    let level: Vec<u64> = bottom_levels(graph, &units, cost)
        .into_iter()
        .map(ps)
        .collect();
    let mut waiters: Vec<Vec<u32>> = vec![Vec::new(); graph.counters.len()];
    for (u, unit) in units.iter().enumerate() {
        for w in &unit.ins.waits {
            waiters[w.counter.index()].push(u as u32);
        }
    }
    let mut remaining: Vec<u32> = graph.counters.iter().map(|c| c.signals_per_step).collect();
    let mut counter_done = vec![0u64; graph.counters.len()];
    let mut unmet: Vec<usize> = units.iter().map(|u| u.ins.waits.len()).collect();
    let mut ready_at = vec![0u64; n];
    let signal = ps(cost.signal_ns);

    // Units whose counters are all complete, keyed by the time they become ready.
    let mut pending: BinaryHeap<Reverse<(u64, u32)>> = (0..n)
        .filter(|&u| unmet[u] == 0)
        .map(|u| Reverse((0, u as u32)))
        .collect();
    // Units ready by the current SM's free time, by priority (longest path, then lowest id).
    let mut available: BinaryHeap<(u64, Reverse<u32>)> = BinaryHeap::new();
    let mut free_sms: BinaryHeap<Reverse<(u64, SmId)>> = (0..sms)
        .map(|s| Reverse((0, SmId::from_index(s))))
        .collect();

    let mut order = Vec::with_capacity(graph.tasks.len());
    let mut sm_of = vec![SmId(0); graph.tasks.len()];
    let mut placed = 0;
    while placed < n {
        let Reverse((free, sm)) = free_sms.pop().expect("at least one SM");
        while let Some(&Reverse((r, u))) = pending.peek() {
            if r > free {
                break;
            }
            pending.pop();
            available.push((level[u as usize], Reverse(u)));
        }
        if available.is_empty() {
            // Nothing is ready yet: admit every unit that becomes ready first.
            let Some(&Reverse((r, _))) = pending.peek() else {
                unreachable!("a task graph with unmet waits has a counter cycle");
            };
            while let Some(&Reverse((r2, u))) = pending.peek() {
                if r2 > r {
                    break;
                }
                pending.pop();
                available.push((level[u as usize], Reverse(u)));
            }
        }
        let (_, Reverse(u)) = available.pop().expect("a ready unit");
        let unit = &units[u as usize];
        let start = free.max(ready_at[u as usize]);
        let end = start + ps(unit.ns);
        placed += 1;
        for t in unit.ins.tasks() {
            order.push(t);
            sm_of[t.index()] = sm;
        }
        free_sms.push(Reverse((end, sm)));
        for sig in &unit.ins.signals {
            let ci = sig.counter.index();
            counter_done[ci] = counter_done[ci].max(end);
            remaining[ci] -= sig.count;
            if remaining[ci] == 0 {
                for &w in &waiters[ci] {
                    let wi = w as usize;
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
