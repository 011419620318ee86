//! Round robin: deal tasks to SMs in turn along the task-id topological order.
//!
//! The anchors' baseline (Hazy's megakernel and MPK deal tasks this way).

use mkc_ir::{SmId, TaskGraph, TaskId};

use crate::assignment::Assignment;

/// Deals task `i` (in id order) to SM `i mod sms`.
pub fn assign(graph: &TaskGraph, sms: usize) -> Assignment {
    let order: Vec<TaskId> = graph.tasks.iter().map(|t| t.id).collect();
    let sm = (0..graph.tasks.len())
        .map(|i| SmId::from_index(i % sms))
        .collect();
    Assignment { order, sm }
}
