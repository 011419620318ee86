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

/// Operator `op`'s tasks cut into `weights.len()` contiguous parts, part `p` holding a share in
/// proportion to `weights[p]` (within one task: each part ends at its share's rounded prefix),
/// as `(part, first task, count)`; parts of no task are left out. Equal weights cut as
/// [`op_runs`] does over `weights.len()` parts.
pub(crate) fn weighted_runs(
    op: &mkc_ir::graph::Operator,
    weights: &[f64],
) -> Vec<(usize, mkc_ir::TaskId, u32)> {
    let parts = weights.len().max(1);
    let equal = weights.windows(2).all(|w| w[0] == w[1]);
    let total: f64 = weights.iter().sum();
    let mut prefix = 0.0;
    let mut start = 0u32;
    let mut runs = Vec::with_capacity(parts);
    for p in 0..parts {
        prefix += weights.get(p).copied().unwrap_or(1.0);
        let end = if equal {
            let (first, count) = mkc_catalogue::cta_tasks(op.tasks, parts as u32, p as u32);
            first + count
        } else if p + 1 == parts {
            op.tasks
        } else {
            ((op.tasks as f64 * prefix / total).round() as u32).clamp(start, op.tasks)
        };
        if end > start {
            runs.push((p, mkc_ir::TaskId(op.first_task.0 + start), end - start));
        }
        start = end;
    }
    runs
}
