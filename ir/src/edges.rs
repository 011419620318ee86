//! Layer edges: how long each operator boundary of one decode step took, from one operator's
//! last task end to the next operator's (the graph's order), with the median over the layers
//! for each kind of edge. A simulated step and a traced one of the same schedule are compared
//! in these terms: they say which boundary of a layer a model gets wrong.

use serde::Serialize;

use crate::graph::{OpKind, TaskGraph};

/// One kind of operator boundary (`down -> qkv_rope`, ...) over the step's layers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerEdge {
    /// The operator that ends first.
    pub from: OpKind,
    /// The operator that ends next.
    pub to: OpKind,
    /// Median ([`crate::stats::median`]) over the step's edges of this kind: the later
    /// operator's last task end minus the earlier one's, µs.
    pub median_us: f64,
    /// Edges of this kind with both ends known (one per layer, one for the LM head).
    pub count: usize,
}

/// The edges of `g`'s step whose tasks ended at `task_end_ns` (indexed by task id; a task not
/// timed is NaN or missing): for each pair of consecutive operators that both have a timed
/// task, the gap between their last ends, grouped by kind pair in order of first appearance.
pub fn layer_edges(g: &TaskGraph, task_end_ns: &[f64]) -> Vec<LayerEdge> {
    let op_end: Vec<Option<f64>> = g
        .ops
        .iter()
        .map(|op| {
            g.tasks_of(op.id)
                .filter_map(|t| task_end_ns.get(t.id.index()).copied())
                .filter(|e| e.is_finite())
                .reduce(f64::max)
        })
        .collect();
    let mut groups: Vec<((OpKind, OpKind), Vec<f64>)> = Vec::new();
    for (pair, ends) in g.ops.windows(2).zip(op_end.windows(2)) {
        let (Some(a), Some(b)) = (ends[0], ends[1]) else {
            continue;
        };
        let key = (pair[0].kind, pair[1].kind);
        let gap_us = (b - a) / 1e3;
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(gap_us),
            None => groups.push((key, vec![gap_us])),
        }
    }
    groups
        .into_iter()
        .map(|((from, to), v)| LayerEdge {
            from,
            to,
            count: v.len(),
            median_us: crate::stats::median(v),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> TaskGraph {
        crate::lower::lower(&crate::embedded::resolve_model("tiny").unwrap())
    }

    /// Task ends that put every operator's last end at 10 µs per operator index (plus 3 µs
    /// for every `down`) give edges of 10 µs, `down`'s in and out 13 and 7, one group per kind
    /// pair in the step's order.
    #[test]
    fn edges_are_the_gaps_between_last_ends() {
        let g = tiny();
        let mut ends = vec![f64::NAN; g.tasks.len()];
        for op in &g.ops {
            let last =
                op.id.index() as f64 * 10e3 + if op.kind == OpKind::Down { 3e3 } else { 0.0 };
            for (i, t) in g.tasks_of(op.id).enumerate() {
                ends[t.id.index()] = last - i as f64; // the first task ends last
            }
        }
        let edges = layer_edges(&g, &ends);
        let find = |a, b| edges.iter().find(|e| e.from == a && e.to == b).unwrap();
        assert_eq!(find(OpKind::UpGate, OpKind::Down).median_us, 13.0);
        assert_eq!(find(OpKind::Down, OpKind::QkvRope).median_us, 7.0);
        assert_eq!(find(OpKind::QkvRope, OpKind::Attention).median_us, 10.0);
        let layers = g.ops.iter().filter(|o| o.kind == OpKind::Down).count();
        assert_eq!(find(OpKind::UpGate, OpKind::Down).count, layers);
        assert_eq!(find(OpKind::Down, OpKind::QkvRope).count, layers - 1);
        assert_eq!(edges[0].from, g.ops[0].kind);
        assert_eq!(
            edges.iter().map(|e| e.count).sum::<usize>(),
            g.ops.len() - 1
        );
    }

    /// An operator with no timed task breaks both edges it is on; nothing is invented.
    #[test]
    fn an_untimed_operator_has_no_edges() {
        let g = tiny();
        let mut ends: Vec<f64> = (0..g.tasks.len()).map(|i| i as f64).collect();
        let gap = g.ops.iter().find(|o| o.kind == OpKind::Attention).unwrap();
        for t in g.tasks_of(gap.id) {
            ends[t.id.index()] = f64::NAN;
        }
        let edges = layer_edges(&g, &ends);
        let counted: usize = edges.iter().map(|e| e.count).sum();
        assert_eq!(counted, g.ops.len() - 1 - 2);
        assert!(layer_edges(&g, &[]).is_empty());
    }
}
