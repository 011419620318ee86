//! Launch shapes: how many CTAs each operator's grid has, which tasks each CTA runs, and the
//! CTA's resources. The scheduler's chain plan is built from here and the backend launches the
//! plan as written, so what is simulated and verified is what runs.

use serde::{Deserialize, Serialize};

use mkc_ir::{Model, OpKind, Tuning};

use crate::layout::{dynamic_smem, page_range, stream, threads};

/// Where a grid's registers and static shared memory come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceSource {
    /// The catalogue's declared values ([`declared_registers`]): no NVRTC was available.
    #[default]
    Declared,
    /// What ptxas reported for the kernels as built (NVRTC, no GPU needed).
    Compiled,
}

/// A CTA's resources: what the occupancy rule admits by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory, bytes.
    pub static_smem: u32,
    /// Dynamic shared memory, bytes (the launch's `sharedMemBytes`).
    pub dynamic_smem: u32,
    /// Where `registers` and `static_smem` come from.
    pub source: ResourceSource,
}

/// Registers per thread of the kernel for `kind` as declared: what ptxas reported for the
/// default build of this source (a test compares them with NVRTC's when it is present), capped
/// by the register limit a tuning imposes (a smaller attention CTA's). A build with other
/// consumer warps (`tuning.consumer_warps`) compiles to figures of its own, which only the
/// compiled resources give (`--resources compiled`, or `auto` with NVRTC).
pub fn declared_registers(t: &Tuning, kind: OpKind) -> u32 {
    let base = match kind {
        OpKind::QkvRope => 142,
        OpKind::Attention => 58,
        OpKind::OProj => 134,
        OpKind::UpGate => 132,
        OpKind::Down => 130,
        OpKind::LmHead => 130,
    };
    match kind {
        // A smaller attention CTA is built with at most 72 registers (-DATT_MAXNREG).
        OpKind::Attention if t.att_threads.is_some_and(|a| a != crate::ATT_THREADS) => base.min(72),
        _ => base,
    }
}

/// The declared resources of the kernel for `kind` of `model`.
pub fn declared_resources(model: &Model, kind: OpKind) -> Resources {
    Resources {
        threads: threads(&model.tuning, kind),
        registers: declared_registers(&model.tuning, kind),
        static_smem: 0,
        dynamic_smem: dynamic_smem(model, kind),
        source: ResourceSource::Declared,
    }
}

/// One operator's grid as the backend launches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridShape {
    /// The kernel entry point.
    pub entry: &'static str,
    /// CTAs of the grid, among which [`cta_tasks`] divides the operator's tasks.
    pub ctas: u32,
    /// Each CTA's resources (declared; the backend's compiled values replace them).
    pub resources: Resources,
}

/// The grid of operator `kind` with `tasks` tasks on a GPU of `sms` SMs: a streaming kernel
/// has one CTA per SM (never more than it has tasks; `tuning.o_ctas` and `tuning.qkv_ctas`
/// cap the O-projection's and QKV's so that they fit beside attention's CTAs); attention has
/// one CTA per task.
pub fn grid(model: &Model, kind: OpKind, tasks: u32, sms: u32) -> GridShape {
    let ctas = match stream(model, kind) {
        Some(_) => {
            let knob = match kind {
                OpKind::OProj => model.tuning.o_ctas,
                OpKind::QkvRope => model.tuning.qkv_ctas,
                _ => None,
            };
            let full = tasks.min(sms).max(1);
            knob.map_or(full, |c| full.min(c))
        }
        None => tasks.max(1),
    };
    GridShape {
        entry: crate::entry_point(kind),
        ctas,
        resources: declared_resources(model, kind),
    }
}

/// The first task and task count of CTA `b` of a grid of `ctas` over `tasks` tasks: contiguous
/// runs, balanced to within one task (the kernels' `task_range`).
pub fn cta_tasks(tasks: u32, ctas: u32, b: u32) -> (u32, u32) {
    page_range(tasks, b, ctas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every task runs on exactly one CTA, in order, and CTAs differ by at most one task.
        #[test]
        fn cta_tasks_partition_the_tasks(tasks in 1u32..100_000, ctas in 1u32..300) {
            let ctas = ctas.min(tasks);
            let mut next = 0;
            let (mut lo, mut hi) = (u32::MAX, 0);
            for b in 0..ctas {
                let (first, count) = cta_tasks(tasks, ctas, b);
                prop_assert_eq!(first, next);
                next += count;
                lo = lo.min(count);
                hi = hi.max(count);
            }
            prop_assert_eq!(next, tasks);
            prop_assert!(hi - lo <= 1);
        }
    }
}
