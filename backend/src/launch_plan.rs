//! A chain schedule's launch arguments, read from its plan and never derived: every grid is
//! launched with the plan's CTAs, threads and dynamic shared memory, and its CTAs run the
//! plan's task runs. Before anything launches, each grid is checked against what its kernel
//! was built to run for this model (the catalogue's layout, the kernels' task rule), so a plan
//! the kernels would execute differently is refused with the field that differs. Needs no GPU:
//! the CPU tests check the launch arguments of every model file against the plan.

use mkc_ir::{Model, OpKind};
use mkc_scheduler::schedule::Trigger;
use mkc_scheduler::Schedule;

use crate::error::BackendError;

/// One grid's launch, as the plan has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Operator kind (its kernel).
    pub kind: OpKind,
    /// The kernel entry point.
    pub entry: &'static str,
    /// The layer whose buffers it reads (0 for the LM head).
    pub layer: u32,
    /// Grid size.
    pub ctas: u32,
    /// Block size.
    pub threads: u32,
    /// Dynamic shared memory, bytes.
    pub dynamic_smem: u32,
    /// Launched with the programmatic-serialization attribute.
    pub pdl_attribute: bool,
    /// Calls `griddepcontrol.wait`.
    pub waits: bool,
    /// Triggers its successor right after issuing its loads.
    pub early: bool,
}

/// The launch of every grid of `schedule`'s chain plan for `model`, in order; an error names
/// the first grid and field the kernels would not run as written.
pub fn launch_plan(schedule: &Schedule, model: &Model) -> Result<Vec<LaunchShape>, BackendError> {
    let plan = schedule.chain().ok_or_else(|| {
        BackendError::Unsupported(
            "a launch plan describes the chain targets' grids (graph, pdl); a persistent \
             schedule launches k_persistent, one CTA per SM"
                .into(),
        )
    })?;
    if model.lowering.persistent_only() {
        return Err(BackendError::Unsupported(
            "lowering.attention_in_o_proj: the chain targets' grids have no kernel that computes \
             attention inside the O-projection; run the persistent target, or remove it"
                .into(),
        ));
    }
    let g = &schedule.graph;
    let mut out = Vec::with_capacity(plan.kernels.len());
    for (i, k) in plan.kernels.iter().enumerate() {
        let op = g
            .ops
            .get(k.op.index())
            .ok_or_else(|| refuse(i, "op", format!("operator {} does not exist", k.op)))?;
        let kind = op.kind;
        let entry = mkc_catalogue::entry_point(kind);
        if k.entry != entry {
            return Err(refuse(
                i,
                "entry",
                format!("{}, but {} runs {entry}", k.entry, op.label()),
            ));
        }
        let threads = mkc_catalogue::threads(&model.tuning, kind);
        if k.threads != threads {
            return Err(refuse(
                i,
                "threads",
                format!("{}, but {entry} is built for {threads}", k.threads),
            ));
        }
        let smem = mkc_catalogue::dynamic_smem(model, kind);
        if k.dynamic_smem_bytes != smem {
            return Err(refuse(
                i,
                "dynamic_smem_bytes",
                format!(
                    "{}, but {entry} lays out {smem} for this model",
                    k.dynamic_smem_bytes
                ),
            ));
        }
        // The kernels count tasks from the work geometry: the graph must have as many.
        let tasks = mkc_ir::work::matvec(model, kind).map_or(op.tasks, |w| w.tasks());
        if op.tasks != tasks {
            return Err(refuse(
                i,
                "op",
                format!(
                    "{} has {} tasks, but the kernel runs {tasks} for this model",
                    op.label(),
                    op.tasks
                ),
            ));
        }
        if kind == OpKind::Attention && k.ctas != tasks {
            return Err(refuse(
                i,
                "ctas",
                format!("{}, but attention runs one CTA per task ({tasks})", k.ctas),
            ));
        }
        if k.ctas == 0 || k.ctas > tasks || k.runs.len() != k.ctas as usize {
            return Err(refuse(
                i,
                "ctas",
                format!(
                    "{} CTAs with {} runs over {tasks} tasks",
                    k.ctas,
                    k.runs.len()
                ),
            ));
        }
        for (b, run) in k.runs.iter().enumerate() {
            let (first, count) = mkc_catalogue::cta_tasks(tasks, k.ctas, b as u32);
            if *run != [first, count] {
                return Err(refuse(
                    i,
                    &format!("runs[{b}]"),
                    format!("{run:?}, but the kernel's CTA {b} runs [{first}, {count}]"),
                ));
            }
        }
        out.push(LaunchShape {
            kind,
            entry,
            layer: op.layer.unwrap_or(0),
            ctas: k.ctas,
            threads: k.threads,
            dynamic_smem: k.dynamic_smem_bytes,
            pdl_attribute: k.pdl_attribute,
            waits: k.wait.is_some(),
            early: k.trigger == Some(Trigger::Early),
        });
    }
    Ok(out)
}

fn refuse(grid: usize, field: &str, why: String) -> BackendError {
    BackendError::Unsupported(format!(
        "the plan cannot be launched: plan.kernels[{grid}].{field}: {why}; recompile the schedule \
         for this model and tuning (mkc compile)"
    ))
}
