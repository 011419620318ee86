//! Chain targets: grids in operator order (one operator each, or a fused pair), linked by PDL
//! or ordinary edges.

use mkc_ir::{KernelId, Model, OpId, OpKind, TaskGraph, TensorId};

use crate::schedule::{ChainPlan, EdgeSync, GridWait, Grids, IndependentLoad, Kernel, Trigger};

/// Whether an operator of kind `first` and the operator after it, of kind `second`, share a
/// grid under `grids`. [`Grids::Fused`]: a split-K matvec whose partial sums the next operator
/// adds up and RMS-normalises in full, so that no tile of the second can start before every
/// tile of the first has ended anyway. [`Grids::Folded`]: attention and the O-projection, whose
/// CTAs recompute the attention their K chunk reads.
pub fn fusable(first: OpKind, second: OpKind, grids: Grids) -> bool {
    match grids {
        Grids::PerOp => false,
        Grids::Fused => matches!(
            (first, second),
            (OpKind::OProj, OpKind::UpGate)
                | (OpKind::Down, OpKind::QkvRope)
                | (OpKind::Down, OpKind::LmHead)
        ),
        Grids::Folded => (first, second) == (OpKind::Attention, OpKind::OProj),
    }
}

/// The operators of each grid, in launch order: every operator once, in operator order.
fn grid_ops(graph: &TaskGraph, grids: Grids) -> Vec<(OpId, Option<OpId>)> {
    let ops = &graph.ops;
    let mut out = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        let pair = i + 1 < ops.len() && fusable(ops[i].kind, ops[i + 1].kind, grids);
        out.push((ops[i].id, pair.then(|| ops[i + 1].id)));
        i += if pair { 2 } else { 1 };
    }
    out
}

/// Tensors produced earlier in the step that a grid running `ops` reads, except those its own
/// first operator produces (the fused grid's barrier orders those): what its wait guards.
fn step_reads(graph: &TaskGraph, first: OpId, then: Option<OpId>) -> Vec<TensorId> {
    let mut reads: Vec<_> = std::iter::once(first)
        .chain(then)
        .flat_map(|op| graph.tasks_of(op))
        .flat_map(|t| t.reads.iter().map(|r| r.tensor))
        .filter(|&t| {
            let producer = graph.tensors[t.index()].producer;
            producer.is_some() && (then.is_none() || producer != Some(first))
        })
        .collect();
    reads.sort_unstable();
    reads.dedup();
    reads
}

/// Builds the chain plan. With `pdl`, every grid that reads a tensor produced earlier in the
/// step waits (after issuing its independent loads) and is launched with the PDL attribute;
/// every grid with a successor triggers it at `trigger`. Without, grids are linked by ordinary
/// edges and never call `griddepcontrol`. `grids` says which operators share a grid.
pub fn plan(
    graph: &TaskGraph,
    model: &Model,
    pdl: bool,
    trigger: Trigger,
    grids: Grids,
) -> ChainPlan {
    let res = &model.lowering.kernel;
    let groups = grid_ops(graph, grids);
    let count = groups.len();
    let kernels = groups
        .iter()
        .enumerate()
        .map(|(i, &(first, then))| {
            let op = graph.op(first);
            let dependent_reads = step_reads(graph, first, then);
            let waits = pdl && !dependent_reads.is_empty();
            let wait = waits.then(|| GridWait {
                early_loads: independent_loads(graph, first, then),
                dependent_reads,
            });
            let name = match then {
                Some(t) => format!("{}+{}", op.label(), graph.op(t).label()),
                None => op.label(),
            };
            let incoming = (i > 0).then_some(if waits {
                EdgeSync::Programmatic
            } else {
                EdgeSync::Full
            });
            Kernel {
                id: KernelId::from_index(i),
                op: op.id,
                then,
                name,
                ctas: op.tasks,
                threads: res.threads,
                registers: res.registers,
                dynamic_smem_bytes: res.dynamic_smem_bytes,
                incoming,
                pdl_attribute: waits,
                wait,
                trigger: (pdl && i + 1 < count).then_some(trigger),
            }
        })
        .collect();
    ChainPlan { kernels }
}

/// Loads of the grid running `first` (and `then`) that read nothing produced within the step:
/// a fused grid streams both operators' weights before its wait.
fn independent_loads(graph: &TaskGraph, first: OpId, then: Option<OpId>) -> Vec<IndependentLoad> {
    let ops: Vec<OpId> = std::iter::once(first).chain(then).collect();
    let mut loads = Vec::new();
    if ops
        .iter()
        .any(|&op| graph.tasks_of(op).any(|t| t.cost.weight_bytes > 0))
    {
        loads.push(IndependentLoad::Weights);
    }
    if ops.iter().any(|&op| graph.op(op).kind == OpKind::Attention) {
        loads.push(IndependentLoad::KvHistory);
    }
    loads
}
