//! Round robin: deal each operator's tasks to SMs in turn, in contiguous runs.
//!
//! The anchors' baseline (Hazy's megakernel and MPK deal work to SMs in turn). The dealt unit
//! is a run of an operator's tasks, divided as a chain grid divides them over its CTAs (within
//! one task of equal), so each SM runs one instruction per operator whose tasks outnumber the
//! SMs; an operator with fewer tasks than SMs gets one task per SM, starting at the SM after
//! the one the previous operator ended on. With measured SM speeds (`DeviceProfile::sm_speeds`)
//! an operator's runs are cut in proportion to the speeds of the SMs they are dealt to, so
//! that every SM's share of a stream ends together (docs/perf.md, "SM speeds").

use mkc_ir::{SmId, TaskGraph, TaskId};

use crate::assignment::Assignment;

/// Deals every operator's runs to SMs in turn, in task-id (topological) order; `speeds` (one
/// per SM, or empty: equal) size each run by the speed of the SM it goes to.
pub fn assign(graph: &TaskGraph, sms: usize, speeds: &[f64]) -> Assignment {
    let order: Vec<TaskId> = graph.tasks.iter().map(|t| t.id).collect();
    let mut sm = vec![SmId(0); graph.tasks.len()];
    let mut next = 0usize;
    let speed = |s: usize| speeds.get(s).copied().unwrap_or(1.0);
    for op in &graph.ops {
        let parts = (op.tasks as usize).min(sms).max(1);
        let weights: Vec<f64> = (0..parts).map(|p| speed((next + p) % sms)).collect();
        for (part, first, count) in super::weighted_runs(op, &weights) {
            let to = SmId::from_index((next + part) % sms);
            sm[first.index()..first.index() + count as usize].fill(to);
        }
        next = (next + parts) % sms;
    }
    Assignment { order, sm }
}
