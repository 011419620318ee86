//! Chrome / Perfetto trace of a step: one track per SM, one slice per task (its load phase
//! and its dependent phase), and flow arrows from the last signaller of each waited counter
//! to the waiting task. Opens in ui.perfetto.dev.

use serde_json::{json, Value};

use mkc_scheduler::Schedule;

use crate::timeline::StepTimeline;

/// The trace as a JSON value (`{"traceEvents": [...]}`; times in µs).
pub fn chrome_trace(s: &Schedule, t: &StepTimeline) -> Value {
    let g = &s.graph;
    let mut events = Vec::with_capacity(g.tasks.len() * 2);
    for sm in 0..s.device.sms {
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": sm,
            "args": {"name": format!("SM {sm}")}}),
        );
    }
    for (task, span) in g.tasks.iter().zip(&t.spans) {
        let op = g.op(task.op).label();
        events.push(
            json!({"ph": "X", "name": format!("{op} load"), "cat": "load", "pid": 0,
            "tid": span.sm, "ts": span.load_start / 1e3,
            "dur": ((span.start - span.load_start).max(0.0)) / 1e3,
            "args": {"task": task.id.0, "tile": task.tile}}),
        );
        events.push(
            json!({"ph": "X", "name": op, "cat": "compute", "pid": 0, "tid": span.sm,
            "ts": span.start / 1e3, "dur": (span.end - span.start) / 1e3,
            "args": {"task": task.id.0, "tile": task.tile, "waits": task.waits.len()}}),
        );
    }
    // Flow arrows: for each wait, from the counter's last signaller to the waiter.
    let signalers = g.signalers();
    let mut flow_id = 0u64;
    for task in &g.tasks {
        for c in &task.waits {
            let Some(&last) = signalers[c.index()]
                .iter()
                .max_by(|a, b| t.spans[a.index()].end.total_cmp(&t.spans[b.index()].end))
            else {
                continue;
            };
            let (from, to) = (&t.spans[last.index()], &t.spans[task.id.index()]);
            events.push(
                json!({"ph": "s", "id": flow_id, "name": "wait", "cat": "wait",
                "pid": 0, "tid": from.sm, "ts": from.end / 1e3}),
            );
            events.push(json!({"ph": "f", "bp": "e", "id": flow_id, "name": "wait",
                "cat": "wait", "pid": 0, "tid": to.sm, "ts": to.start / 1e3}));
            flow_id += 1;
        }
    }
    json!({"traceEvents": events, "displayTimeUnit": "ns"})
}
