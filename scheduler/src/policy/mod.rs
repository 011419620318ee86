//! Persistent-target policies: each turns a task graph into an [`Assignment`].

pub mod ilp;
pub mod list;
pub mod round_robin;

/// Operator `op`'s tasks cut into `min(tasks, sms)` contiguous runs `(first task, count)`,
/// divided as a chain grid divides them over its CTAs: the unit the heuristic policies deal.
pub(crate) fn op_runs(
    op: &mkc_ir::graph::Operator,
    sms: usize,
) -> impl Iterator<Item = (mkc_ir::TaskId, u32)> + '_ {
    let parts = (op.tasks as usize).min(sms).max(1) as u32;
    (0..parts).map(move |part| {
        let (first, count) = mkc_catalogue::cta_tasks(op.tasks, parts, part);
        (mkc_ir::TaskId(op.first_task.0 + first), count)
    })
}
