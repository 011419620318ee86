//! A persistent plan as the persistent kernel reads it: every SM's instructions in the
//! generated encoding (`abi::KInstr`, `abi::KCounterRef`), concatenated, with each SM's range.
//! The kernel derives nothing: each instruction names its operator (`OP_*`), layer, task run
//! within the operator and the counter references of its waits and signals, as the plan has
//! them.

use mkc_ir::Model;
use mkc_scheduler::{Schedule, Target};

use crate::abi::{op_id, KCounterRef, KInstr};
use crate::error::BackendError;

/// The encoded plan.
#[derive(Clone, Debug, Default)]
pub struct EncodedPlan {
    /// Every instruction, SM 0's first.
    pub instrs: Vec<KInstr>,
    /// The counter references the instructions' `wait0`/`signal0` ranges index.
    pub refs: Vec<KCounterRef>,
    /// SM `s` runs `instrs[stream_start[s] .. stream_start[s + 1]]`.
    pub stream_start: Vec<i32>,
    /// Counters the kernel's counter buffer holds.
    pub counters: usize,
}

fn refuse(what: String) -> BackendError {
    BackendError::Unsupported(format!("the persistent plan cannot be launched: {what}"))
}

fn int(v: usize, what: &str) -> Result<i32, BackendError> {
    i32::try_from(v).map_err(|_| refuse(format!("{what} {v} exceeds the encoding's 32 bits")))
}

/// Encodes `schedule`'s persistent plan for `model` on a GPU of `sms` SMs.
pub fn encode(schedule: &Schedule, model: &Model, sms: u32) -> Result<EncodedPlan, BackendError> {
    let plan = match (schedule.target, schedule.persistent()) {
        (Target::Persistent, Some(p)) => p,
        _ => {
            return Err(refuse(format!(
                "the schedule's target is {}",
                schedule.target.name()
            )))
        }
    };
    if plan.streams.len() != sms as usize {
        return Err(refuse(format!(
            "it has {} streams and this GPU {sms} SMs. Fix: compile it with --sms {sms}",
            plan.streams.len()
        )));
    }
    let g = &schedule.graph;
    if g.ops.len() as u32 != model.lowering.ops_per_layer() * model.geometry.layers + 1 {
        return Err(refuse("its graph is not of this model".into()));
    }
    let last_layer = model.geometry.layers.saturating_sub(1);
    let mut out = EncodedPlan {
        counters: g.counters.len(),
        ..EncodedPlan::default()
    };
    out.stream_start.push(0);
    for stream in &plan.streams {
        for ins in stream {
            let op = g.op_of(ins.first);
            let refs = ins.waits.len() + ins.signals.len();
            if refs > mkc_catalogue::PERSISTENT_MAX_REFS as usize {
                return Err(refuse(format!(
                    "an instruction of {} waits on or signals {refs} counters, more than the \
                     kernel stages ({}). Fix: lower lowering.vtp_shards",
                    op.kind.name(),
                    mkc_catalogue::PERSISTENT_MAX_REFS
                )));
            }
            let wait0 = int(out.refs.len(), "a counter reference")?;
            for w in &ins.waits {
                out.refs.push(KCounterRef {
                    counter: int(w.counter.index(), "counter")?,
                    amount: int(w.target_per_step as usize, "a wait's signals per step")?,
                });
            }
            let signal0 = int(out.refs.len(), "a counter reference")?;
            for s in &ins.signals {
                out.refs.push(KCounterRef {
                    counter: int(s.counter.index(), "counter")?,
                    amount: int(s.count as usize, "a signal's count")?,
                });
            }
            out.instrs.push(KInstr {
                op: op_id(op.kind),
                layer: op.layer.unwrap_or(last_layer) as i32,
                first: int((ins.first.0 - op.first_task.0) as usize, "a task")?,
                count: int(ins.count as usize, "a run")?,
                wait0,
                waits: ins.waits.len() as i32,
                signal0,
                signals: ins.signals.len() as i32,
            });
        }
        out.stream_start
            .push(int(out.instrs.len(), "an instruction")?);
    }
    Ok(out)
}
