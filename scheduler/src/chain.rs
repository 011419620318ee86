//! Chain targets: one grid per operator, in operator order, linked by PDL or ordinary edges.

use mkc_ir::{KernelId, Model, OpKind, TaskGraph};

use crate::schedule::{ChainPlan, EdgeSync, GridWait, IndependentLoad, Kernel, Trigger};

/// Builds the chain plan. With `pdl`, every grid that reads a tensor produced earlier in the
/// step waits (after issuing its independent loads) and is launched with the PDL attribute;
/// every grid with a successor triggers it at `trigger`. Without, grids are linked by ordinary
/// edges and never call `griddepcontrol`.
pub fn plan(graph: &TaskGraph, model: &Model, pdl: bool, trigger: Trigger) -> ChainPlan {
    let res = &model.lowering.kernel;
    let count = graph.ops.len();
    let kernels = graph
        .ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let mut dependent_reads: Vec<_> = graph
                .tasks_of(op.id)
                .flat_map(|t| t.reads.iter().map(|r| r.tensor))
                .filter(|&t| graph.tensors[t.index()].producer.is_some())
                .collect();
            dependent_reads.sort_unstable();
            dependent_reads.dedup();
            let waits = pdl && !dependent_reads.is_empty();
            let wait = waits.then(|| GridWait {
                early_loads: independent_loads(graph, op.id),
                dependent_reads,
            });
            let incoming = (i > 0).then_some(if waits {
                EdgeSync::Programmatic
            } else {
                EdgeSync::Full
            });
            Kernel {
                id: KernelId::from_index(i),
                op: op.id,
                name: op.label(),
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

/// Loads of operator `op` that read nothing produced within the step.
fn independent_loads(graph: &TaskGraph, op: mkc_ir::OpId) -> Vec<IndependentLoad> {
    let mut loads = Vec::new();
    if graph.tasks_of(op).any(|t| t.cost.weight_bytes > 0) {
        loads.push(IndependentLoad::Weights);
    }
    if graph.op(op).kind == OpKind::Attention {
        loads.push(IndependentLoad::KvHistory);
    }
    loads
}
