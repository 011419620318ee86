//! Chain targets: one grid per operator in operator order, linked by PDL or ordinary edges.
//! Each grid is the launch the backend makes: its CTAs, the tasks each CTA runs, its threads
//! and shared memory, from the operator catalogue.

use mkc_catalogue::{cta_tasks, grid};
use mkc_ir::{KernelId, Model, OpId, OpKind, TaskGraph, TensorId};

use crate::schedule::{ChainPlan, EdgeSync, GridWait, IndependentLoad, Kernel, Trigger};

/// Tensors produced earlier in the step that the grid of `op` reads: what its wait guards.
fn step_reads(graph: &TaskGraph, op: OpId) -> Vec<TensorId> {
    let mut reads: Vec<_> = graph
        .tasks_of(op)
        .flat_map(|t| t.reads.iter().map(|r| r.tensor))
        .filter(|&t| graph.tensors[t.index()].producer.is_some())
        .collect();
    reads.sort_unstable();
    reads.dedup();
    reads
}

/// Builds the chain plan for a GPU of `sms` SMs. With `pdl`, every grid that reads a tensor
/// produced earlier in the step waits (after issuing its independent loads) and is launched
/// with the PDL attribute; every grid with a successor triggers it at `trigger`. Without,
/// grids are linked by ordinary edges and never call `griddepcontrol`.
pub fn plan(graph: &TaskGraph, model: &Model, sms: u32, pdl: bool, trigger: Trigger) -> ChainPlan {
    let count = graph.ops.len();
    let kernels = graph
        .ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let dependent_reads = step_reads(graph, op.id);
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
            let shape = grid(model, op.kind, op.tasks, sms);
            let r = shape.resources;
            Kernel {
                id: KernelId::from_index(i),
                op: op.id,
                name: op.label(),
                entry: shape.entry.to_string(),
                ctas: shape.ctas,
                runs: (0..shape.ctas)
                    .map(|b| {
                        let (first, n) = cta_tasks(op.tasks, shape.ctas, b);
                        [first, n]
                    })
                    .collect(),
                threads: r.threads,
                registers: r.registers,
                static_smem_bytes: r.static_smem,
                dynamic_smem_bytes: r.dynamic_smem,
                prefetch_bytes: mkc_catalogue::prefetch_bytes(model, op.kind),
                resources: r.source,
                incoming,
                pdl_attribute: waits,
                wait,
                trigger: (pdl && i + 1 < count).then_some(trigger),
            }
        })
        .collect();
    ChainPlan { kernels }
}

/// Loads of the grid of `op` that read nothing produced within the step.
fn independent_loads(graph: &TaskGraph, op: OpId) -> Vec<IndependentLoad> {
    let mut loads = Vec::new();
    if graph.tasks_of(op).any(|t| t.cost.weight_bytes > 0) {
        loads.push(IndependentLoad::Weights);
    }
    if graph.op(op).kind == OpKind::Attention {
        loads.push(IndependentLoad::KvHistory);
    }
    loads
}
