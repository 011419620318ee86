//! An SM assignment: the common output of every persistent policy, turned into streams by one
//! function so that every policy obeys the same stream invariants.

use mkc_ir::model::KernelResources;
use mkc_ir::{SmId, TaskGraph, TaskId};

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::schedule::{Instruction, PersistentPlan};

/// Which SM runs each task, and one global topological order of all tasks.
///
/// Each SM's stream is the global order restricted to that SM, so every stream is a
/// subsequence of one topological order and one resident CTA per SM cannot deadlock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// Every task once, in a topological order.
    pub order: Vec<TaskId>,
    /// SM of each task (indexed by task id).
    pub sm: Vec<SmId>,
}

impl Assignment {
    /// Builds the per-SM instruction streams: each SM's tasks in the global order, with every
    /// stretch of consecutive tasks of one operator (ids in a row) merged into one instruction,
    /// and the instructions numbered in a topological order of their waits and stream order.
    /// Should merging ever close a cycle (it cannot while operators form a DAG), every task
    /// becomes its own instruction in the assignment's order instead.
    pub fn to_plan(
        &self,
        graph: &TaskGraph,
        sms: usize,
        resources: &KernelResources,
    ) -> PersistentPlan {
        let runs = self.runs(graph, sms, true);
        let streams = order_runs(graph, &runs).unwrap_or_else(|| {
            order_runs(graph, &self.runs(graph, sms, false))
                .expect("single tasks in a topological order are a valid order")
        });
        PersistentPlan {
            streams,
            resources: resources.clone(),
            source: mkc_catalogue::ResourceSource::Declared,
        }
    }

    /// Each SM's runs `(first task, count, position of the first task in the order)`; with
    /// `merge`, consecutive tasks of one operator on one SM share a run.
    fn runs(&self, graph: &TaskGraph, sms: usize, merge: bool) -> Vec<Vec<(TaskId, u32, u32)>> {
        let mut runs: Vec<Vec<(TaskId, u32, u32)>> = vec![Vec::new(); sms];
        for (pos, &task) in self.order.iter().enumerate() {
            let stream = &mut runs[self.sm[task.index()].index()];
            if let Some(last) = stream.last_mut() {
                let next = TaskId(last.0 .0 + last.1);
                if merge && next == task && graph.task(last.0).op == graph.task(task).op {
                    last.1 += 1;
                    continue;
                }
            }
            stream.push((task, 1, pos as u32));
        }
        runs
    }

    /// Recovers the assignment a plan encodes (for evaluating a schedule read from a file):
    /// the instructions in `seq` order, each run's tasks in order.
    pub fn from_plan(plan: &PersistentPlan, tasks: usize) -> Assignment {
        let mut by_seq: Vec<(u32, TaskId, u32, SmId)> = Vec::new();
        for (s, stream) in plan.streams.iter().enumerate() {
            for ins in stream {
                by_seq.push((ins.seq, ins.first, ins.count, SmId::from_index(s)));
            }
        }
        by_seq.sort_unstable();
        let mut order = Vec::with_capacity(tasks);
        let mut sm = vec![SmId(0); tasks];
        for (_, first, count, s) in by_seq {
            for t in first.0..first.0 + count {
                order.push(TaskId(t));
                sm[t as usize] = s;
            }
        }
        Assignment { order, sm }
    }
}

/// Numbers the runs in a topological order (Kahn's algorithm over stream order and counter
/// waits, earliest first task first) and returns them as instructions, or None if they form a
/// cycle.
fn order_runs(
    graph: &TaskGraph,
    runs: &[Vec<(TaskId, u32, u32)>],
) -> Option<Vec<Vec<Instruction>>> {
    let mut streams: Vec<Vec<Instruction>> = runs
        .iter()
        .map(|st| {
            st.iter()
                .map(|&(first, count, _)| Instruction::of_run(graph, first, count, u32::MAX))
                .collect()
        })
        .collect();
    let total: usize = streams.iter().map(Vec::len).sum();
    let mut remaining: Vec<u32> = graph.counters.iter().map(|c| c.signals_per_step).collect();
    let mut waiting: Vec<Vec<(u32, u32)>> = vec![Vec::new(); graph.counters.len()];
    // unmet[sm][i]: waited counters not yet complete, plus one for the stream predecessor.
    let mut unmet: Vec<Vec<u32>> = streams
        .iter()
        .enumerate()
        .map(|(sm, st)| {
            st.iter()
                .enumerate()
                .map(|(i, ins)| {
                    for w in &ins.waits {
                        waiting[w.counter.index()].push((sm as u32, i as u32));
                    }
                    ins.waits.len() as u32 + u32::from(i > 0)
                })
                .collect()
        })
        .collect();
    let mut ready: BinaryHeap<Reverse<(u32, u32, u32)>> = BinaryHeap::new();
    for (sm, st) in unmet.iter().enumerate() {
        if st.first() == Some(&0) {
            ready.push(Reverse((runs[sm][0].2, sm as u32, 0)));
        }
    }
    let mut seq = 0u32;
    while let Some(Reverse((_, sm, i))) = ready.pop() {
        let (sm, i) = (sm as usize, i as usize);
        streams[sm][i].seq = seq;
        seq += 1;
        let mut release = |s: usize, j: usize, ready: &mut BinaryHeap<_>| {
            unmet[s][j] -= 1;
            if unmet[s][j] == 0 {
                ready.push(Reverse((runs[s][j].2, s as u32, j as u32)));
            }
        };
        if i + 1 < streams[sm].len() {
            release(sm, i + 1, &mut ready);
        }
        for k in 0..streams[sm][i].signals.len() {
            let sig = streams[sm][i].signals[k];
            let c = sig.counter.index();
            remaining[c] -= sig.count;
            if remaining[c] == 0 {
                for (s, j) in std::mem::take(&mut waiting[c]) {
                    release(s as usize, j as usize, &mut ready);
                }
            }
        }
    }
    (seq as usize == total).then_some(streams)
}
