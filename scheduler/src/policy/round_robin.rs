//! Round robin: deal each operator's tasks to SMs in turn, in contiguous runs.
//!
//! The anchors' baseline (Hazy's megakernel and MPK deal work to SMs in turn). The dealt unit
//! is a run of an operator's tasks, divided as a chain grid divides them over its CTAs (within
//! one task of equal), so each SM runs one instruction per operator whose tasks outnumber the
//! SMs; an operator with fewer tasks than SMs gets one task per SM, starting at the SM after
//! the one the previous operator ended on.

use mkc_ir::{SmId, TaskGraph, TaskId};

use crate::assignment::Assignment;

/// Deals every operator's runs to SMs in turn, in task-id (topological) order.
pub fn assign(graph: &TaskGraph, sms: usize) -> Assignment {
    let order: Vec<TaskId> = graph.tasks.iter().map(|t| t.id).collect();
    let mut sm = vec![SmId(0); graph.tasks.len()];
    let mut next = 0usize;
    for op in &graph.ops {
        let mut parts = 0;
        for (part, (first, count)) in super::op_runs(op, sms).enumerate() {
            let to = SmId::from_index((next + part) % sms);
            sm[first.index()..first.index() + count as usize].fill(to);
            parts += 1;
        }
        next = (next + parts) % sms;
    }
    Assignment { order, sm }
}
