//! From a step timeline to the figures users read: step time against the bandwidth floor,
//! where the time above the floor goes (per operator window / boundary), SM busy fraction,
//! achieved bandwidth.

use serde::Serialize;

use mkc_ir::device::DeviceProfile;
use mkc_scheduler::Schedule;

use crate::timeline::{independent_bytes, StepTimeline};

/// One operator's window: from the previous operator's end to its own end.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpWindow {
    /// Operator label (`L3.up_gate`).
    pub op: String,
    /// First task's load start, µs.
    pub first_load_us: f64,
    /// Last task's end, µs.
    pub end_us: f64,
    /// Bytes it streams, over the device bandwidth, µs.
    pub floor_us: f64,
    /// Its window (end minus the previous operator's end), µs.
    pub window_us: f64,
}

/// The time above the floor spent at one operator boundary (`from` -> `to`): the `to`
/// operator's window minus its floor.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Boundary {
    /// Producer operator.
    pub from: String,
    /// Consumer operator.
    pub to: String,
    /// Window minus floor, µs (negative when the operator overlapped its predecessor).
    pub bubble_us: f64,
}

/// The figures of one simulated step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepReport {
    /// Predicted step time, µs.
    pub step_us: f64,
    /// Weight and KV bytes over the device bandwidth, µs.
    pub floor_us: f64,
    /// Fraction of SM time spent loading or computing.
    pub sm_busy_fraction: f64,
    /// Achieved bandwidth over the profile's.
    pub bandwidth_fraction: f64,
    /// Per operator.
    pub operators: Vec<OpWindow>,
    /// Per boundary.
    pub boundaries: Vec<Boundary>,
}

/// Summarises a timeline.
pub fn summarize(
    s: &Schedule,
    device: &DeviceProfile,
    t: &StepTimeline,
    kv_len: u32,
) -> StepReport {
    let g = &s.graph;
    let bw = device.read_bandwidth_gbps; // bytes per ns
    let bytes: f64 = g
        .tasks
        .iter()
        .map(|task| independent_bytes(task, kv_len))
        .sum();
    let floor_ns = bytes / bw;
    let mut operators = Vec::with_capacity(g.ops.len());
    let mut boundaries = Vec::new();
    let mut prev_end = 0.0f64;
    for op in &g.ops {
        let spans = op.task_ids().map(|id| &t.spans[id.index()]);
        let (first, last) = spans.fold((f64::INFINITY, 0.0f64), |(f, l), s| {
            (f.min(s.load_start), l.max(s.end))
        });
        let op_floor: f64 = g
            .tasks_of(op.id)
            .map(|task| independent_bytes(task, kv_len))
            .sum::<f64>()
            / bw;
        let window = last - prev_end;
        if op.id.index() > 0 {
            boundaries.push(Boundary {
                from: g.ops[op.id.index() - 1].label(),
                to: op.label(),
                bubble_us: (window - op_floor) / 1e3,
            });
        }
        operators.push(OpWindow {
            op: op.label(),
            first_load_us: first / 1e3,
            end_us: last / 1e3,
            floor_us: op_floor / 1e3,
            window_us: window / 1e3,
        });
        prev_end = last.max(prev_end);
    }
    // Busy: union of [load_start, end] per SM.
    let mut per_sm: Vec<Vec<(f64, f64)>> = vec![Vec::new(); device.sms as usize];
    for sp in &t.spans {
        if let Some(v) = per_sm.get_mut(sp.sm as usize) {
            v.push((sp.load_start, sp.end));
        }
    }
    let mut busy = 0.0;
    for v in &mut per_sm {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut cur: Option<(f64, f64)> = None;
        for &(a, b) in v.iter() {
            cur = match cur {
                Some((s, e)) if a <= e => Some((s, e.max(b))),
                Some((s, e)) => {
                    busy += e - s;
                    Some((a, b))
                }
                None => Some((a, b)),
            };
        }
        if let Some((s, e)) = cur {
            busy += e - s;
        }
    }
    StepReport {
        step_us: t.step_ns / 1e3,
        floor_us: floor_ns / 1e3,
        sm_busy_fraction: busy / (t.step_ns * device.sms as f64),
        bandwidth_fraction: floor_ns / t.step_ns,
        operators,
        boundaries,
    }
}
