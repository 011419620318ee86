//! An SM assignment: the common output of every persistent policy, turned into streams by one
//! function so that every policy obeys the same stream invariants.

use mkc_ir::model::KernelResources;
use mkc_ir::{SmId, TaskGraph, TaskId};

use crate::schedule::{Instruction, PersistentPlan, Wait};

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
    /// Builds the per-SM instruction streams.
    pub fn to_plan(
        &self,
        graph: &TaskGraph,
        sms: usize,
        resources: &KernelResources,
    ) -> PersistentPlan {
        let mut lens = vec![0usize; sms];
        for s in &self.sm {
            lens[s.index()] += 1;
        }
        let mut streams: Vec<Vec<Instruction>> =
            lens.iter().map(|&n| Vec::with_capacity(n)).collect();
        for (seq, &task) in self.order.iter().enumerate() {
            let t = graph.task(task);
            streams[self.sm[task.index()].index()].push(Instruction {
                task,
                seq: seq as u32,
                waits: t
                    .waits
                    .iter()
                    .map(|&c| Wait {
                        counter: c,
                        target_per_step: graph.counter(c).signals_per_step,
                    })
                    .collect(),
                signals: t.signals.clone(),
            });
        }
        PersistentPlan {
            streams,
            resources: resources.clone(),
        }
    }

    /// Recovers the assignment a plan encodes (for evaluating a schedule read from a file).
    pub fn from_plan(plan: &PersistentPlan, tasks: usize) -> Assignment {
        let mut by_seq: Vec<(u32, TaskId)> = Vec::with_capacity(tasks);
        let mut sm = vec![SmId(0); tasks];
        for (s, stream) in plan.streams.iter().enumerate() {
            for ins in stream {
                by_seq.push((ins.seq, ins.task));
                sm[ins.task.index()] = SmId::from_index(s);
            }
        }
        by_seq.sort_unstable();
        Assignment {
            order: by_seq.into_iter().map(|(_, t)| t).collect(),
            sm,
        }
    }
}
