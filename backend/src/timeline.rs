//! The measured timeline of one traced decode step (`mkc run|bench --timeline`): every traced
//! unit of work (a chain grid's CTA, a persistent instruction) placed on one clock, written as
//! a Perfetto trace in the format of `mkc simulate --trace` (one track per SM, a `load` slice
//! up to the dependency release and the dependent slice after it), and summed into where each
//! SM's time went.
//!
//! The kernels stamp `clock64()` (one SM's cycle counter: fine, but its origin differs per SM)
//! at each phase mark and `%globaltimer` (one clock for the whole GPU, but coarse) at entry and
//! exit. Per SM, a least-squares line through every (cycles, ns) pair of its records maps the
//! fine marks onto the common clock: the slope is the SM's real clock rate over the step, the
//! offset averages the timer's coarse ticks.

use std::collections::HashMap;

use mkc_ir::{OpKind, Operator, TaskGraph};
use serde::Serialize;
use serde_json::{json, Value};

use crate::abi::{Mark, TRACE_SLOTS};

/// One traced unit of work as the kernel recorded it.
#[derive(Clone, Debug)]
pub struct TracedWork {
    /// Its operator's label (`L3.up_gate`, ...).
    pub label: String,
    /// Its operator's kind.
    pub kind: OpKind,
    /// The tasks it ran, [first, end) within its operator.
    pub tasks: (u32, u32),
    /// The kernel's record (slots [`Mark::slot`]; 0 where a mark was not recorded).
    pub record: [u64; TRACE_SLOTS],
}

/// A traced unit on the step's clock, ns after the step's first entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// SM it ran on.
    pub sm: u32,
    /// Its operator's label.
    pub label: String,
    /// Its operator's kind.
    pub kind: OpKind,
    /// Tasks [first, end).
    pub tasks: (u32, u32),
    /// Entry.
    pub entry: f64,
    /// Exit.
    pub exit: f64,
    /// Independent loads issued.
    pub issued: Option<f64>,
    /// Dependency wait released.
    pub released: Option<f64>,
    /// Input vector staged.
    pub prepared: Option<f64>,
    /// First weights landed.
    pub landed: Option<f64>,
    /// Work computed.
    pub computed: Option<f64>,
    /// The body's two finer marks ([`Mark::Sub1`], [`Mark::Sub2`]: for attention, its scores
    /// and its first head's softmax done), so that a persistent trace shows attention's phases.
    pub sub: [Option<f64>; 2],
    /// A persistent instruction's end barrier passed ([`Mark::Ended`]): from here to `exit`
    /// is its signals' release.
    pub ended: Option<f64>,
}

/// The least time an SM's records must span for its own clock rate to be fitted, ns.
const FIT_MIN_SPAN_NS: f64 = 50_000.0;

/// Places every record on the common clock; `nominal_ghz` is the SM clock used where an SM's
/// records are too short to fit its own. Records never written (no entry) are left out.
pub fn spans(work: &[TracedWork], nominal_ghz: f64) -> Vec<Span> {
    let written: Vec<&TracedWork> = work
        .iter()
        .filter(|w| {
            let r = &w.record;
            // An SM id beyond any GPU's is not a record the kernel wrote.
            r[Mark::EntryNs.slot()] > 0 && r[Mark::Entry.slot()] > 0 && r[Mark::Sm.slot()] < 1 << 16
        })
        .collect();
    let sm_of = |w: &TracedWork| w.record[Mark::Sm.slot()] as usize;
    // Each SM's (cycles, ns) pairs: every record's entry, and its exit where recorded.
    let mut points: Vec<Vec<(f64, f64)>> =
        vec![Vec::new(); written.iter().map(|w| sm_of(w) + 1).max().unwrap_or(0)];
    for w in &written {
        let r = &w.record;
        let sm = &mut points[sm_of(w)];
        sm.push((r[Mark::Entry.slot()] as f64, r[Mark::EntryNs.slot()] as f64));
        if r[Mark::Exit.slot()] > 0 && r[Mark::ExitNs.slot()] > 0 {
            sm.push((r[Mark::Exit.slot()] as f64, r[Mark::ExitNs.slot()] as f64));
        }
    }
    let fits: Vec<Option<ClockFit>> = points
        .iter()
        .map(|p| (!p.is_empty()).then(|| ClockFit::through(p, nominal_ghz)))
        .collect();
    let fit_of = |w: &TracedWork| fits[sm_of(w)].expect("every written record's SM has points");
    let t0 = written
        .iter()
        .map(|w| fit_of(w).ns(w.record[Mark::Entry.slot()]))
        .fold(f64::INFINITY, f64::min);
    let mut out: Vec<Span> = written
        .iter()
        .map(|w| {
            let r = &w.record;
            let fit = fit_of(w);
            let at = |m: Mark| (r[m.slot()] > 0).then(|| fit.ns(r[m.slot()]) - t0);
            let entry = fit.ns(r[Mark::Entry.slot()]) - t0;
            Span {
                sm: sm_of(w) as u32,
                label: w.label.clone(),
                kind: w.kind,
                tasks: w.tasks,
                entry,
                exit: at(Mark::Exit).unwrap_or(entry).max(entry),
                issued: at(Mark::Issued),
                released: at(Mark::Released),
                prepared: at(Mark::Prepared),
                landed: at(Mark::Landed),
                computed: at(Mark::Computed),
                sub: [at(Mark::Sub1), at(Mark::Sub2)],
                ended: at(Mark::Ended),
            }
        })
        .collect();
    out.sort_by(|a, b| a.sm.cmp(&b.sm).then(a.entry.total_cmp(&b.entry)));
    out
}

/// One SM's map from its cycle counter to the GPU's timer: ns = offset + cycles / ghz.
#[derive(Clone, Copy, Debug)]
struct ClockFit {
    ghz: f64,
    offset: f64,
}

impl ClockFit {
    /// The least-squares line through `points` (cycles, ns), or the nominal rate through
    /// their mean where they span too little time.
    fn through(points: &[(f64, f64)], nominal_ghz: f64) -> ClockFit {
        let span = points.iter().map(|p| p.1).fold(f64::MIN, f64::max)
            - points.iter().map(|p| p.1).fold(f64::MAX, f64::min);
        let Some(line) = crate::line_fit::Line::through(points) else {
            return ClockFit {
                ghz: nominal_ghz,
                offset: 0.0,
            };
        };
        let ns_per_cycle = line
            .slope
            .filter(|&s| span >= FIT_MIN_SPAN_NS && s > 0.0)
            .unwrap_or(1.0 / nominal_ghz);
        ClockFit {
            ghz: 1.0 / ns_per_cycle,
            offset: line.mean_y - line.mean_x * ns_per_cycle,
        }
    }

    fn ns(&self, cycles: u64) -> f64 {
        self.offset + cycles as f64 / self.ghz
    }
}

/// When each task of `g`'s traced step ended, ns, indexed by task id (NaN: not traced): a
/// unit's exit is the end of every task it ran (the input of [`mkc_ir::edges::layer_edges`]).
/// A span's tasks count within its operator (found by its label), so they are offset by the
/// operator's first task; a span whose label names no operator, or tasks past its operator's,
/// times nothing.
pub fn task_ends(spans: &[Span], g: &TaskGraph) -> Vec<f64> {
    let ops: HashMap<String, &Operator> = g.ops.iter().map(|o| (o.label(), o)).collect();
    let mut ends = vec![f64::NAN; g.tasks.len()];
    for s in spans {
        let Some(op) = ops.get(&s.label) else {
            continue;
        };
        let first = (op.first_task.0 + s.tasks.0) as usize;
        let end = (op.first_task.0 + s.tasks.1.min(op.tasks)) as usize;
        for e in ends.iter_mut().take(end).skip(first) {
            *e = e.max(s.exit); // f64::max takes the other side of a NaN
        }
    }
    ends
}

/// The spans as a Chrome / Perfetto trace (`{"traceEvents": [...]}`, times in µs): the format
/// of `mkc simulate --trace`, so that a simulated and a measured timeline open side by side.
pub fn chrome_trace(spans: &[Span], what: &str) -> Value {
    let mut events = Vec::with_capacity(spans.len() * 2 + 140);
    events.push(json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": what}}));
    let mut sms: Vec<u32> = spans.iter().map(|s| s.sm).collect();
    sms.sort_unstable();
    sms.dedup();
    for sm in sms {
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": sm,
            "args": {"name": format!("SM {sm}")}}),
        );
    }
    for s in spans {
        let start = s.released.unwrap_or(s.entry).clamp(s.entry, s.exit);
        let rel = |t: Option<f64>| t.map(|t| (t - s.entry) / 1e3);
        let args = json!({"tasks": format!("{}..{}", s.tasks.0, s.tasks.1),
            "issued_us": rel(s.issued), "released_us": rel(s.released),
            "prepared_us": rel(s.prepared), "landed_us": rel(s.landed),
            "computed_us": rel(s.computed), "sub1_us": rel(s.sub[0]), "sub2_us": rel(s.sub[1]),
            "ended_us": rel(s.ended)});
        if start > s.entry {
            events.push(
                json!({"ph": "X", "name": format!("{} load", s.label), "cat": "load",
                "pid": 0, "tid": s.sm, "ts": s.entry / 1e3, "dur": (start - s.entry) / 1e3,
                "args": args}),
            );
        }
        events.push(
            json!({"ph": "X", "name": s.label, "cat": "compute", "pid": 0,
            "tid": s.sm, "ts": start / 1e3, "dur": (s.exit - start) / 1e3, "args": args}),
        );
    }
    json!({"traceEvents": events, "displayTimeUnit": "ns"})
}

/// Where the traced step's time went, per operator kind and in all: mean µs per SM spent in
/// each phase, summed over the SM's units of work, and between them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Breakdown {
    /// The step: first entry to last exit, µs.
    pub step_us: f64,
    /// SMs that ran work.
    pub sms: usize,
    /// Per operator kind, then `between` (gaps between an SM's units and after its last).
    pub rows: Vec<BreakdownRow>,
}

/// One kind's phases, µs per SM (the kind's units on an SM summed, averaged over SMs).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct BreakdownRow {
    /// Operator kind, or `between`.
    pub kind: String,
    /// Units of work traced.
    pub units: usize,
    /// Entry until the independent loads are issued (setup).
    pub issue_us: f64,
    /// Issued until the dependency wait released (awaiting activations).
    pub await_us: f64,
    /// Released until the input vector is staged (loading activations).
    pub stage_us: f64,
    /// Staged until computed (waiting on weights and the matvec).
    pub compute_us: f64,
    /// Computed until the end barrier (the other warps' last pages, epilogue stores, the
    /// barrier), or until exit where no end barrier was marked (a chain CTA).
    pub finish_us: f64,
    /// End barrier until exit: a persistent instruction's signals' release, which its successors
    /// wait for ([`Mark::Ended`]; 0 where not marked).
    pub release_us: f64,
    /// All of the above.
    pub total_us: f64,
}

/// Sums `spans` into a [`Breakdown`].
pub fn breakdown(spans: &[Span]) -> Breakdown {
    let step = spans.iter().map(|s| s.exit).fold(0.0, f64::max);
    let mut sms: Vec<u32> = spans.iter().map(|s| s.sm).collect();
    sms.sort_unstable();
    sms.dedup();
    let n_sms = sms.len().max(1) as f64;
    let mut kinds: Vec<OpKind> = Vec::new();
    for s in spans {
        if !kinds.contains(&s.kind) {
            kinds.push(s.kind);
        }
    }
    let mut rows = Vec::new();
    for kind in kinds {
        let mut row = BreakdownRow {
            kind: kind.name().to_string(),
            ..BreakdownRow::default()
        };
        for s in spans.iter().filter(|s| s.kind == kind) {
            // Each phase ends at its mark, or at the next recorded one.
            let mut at = s.entry;
            let mut phase = |mark: Option<f64>| {
                let Some(t) = mark else { return 0.0 };
                let t = t.clamp(at, s.exit);
                let d = t - at;
                at = t;
                d / 1e3
            };
            row.issue_us += phase(s.issued);
            row.await_us += phase(s.released);
            row.stage_us += phase(s.prepared);
            row.compute_us += phase(s.computed);
            row.finish_us += phase(s.ended.or(Some(s.exit)));
            row.release_us += phase(Some(s.exit));
            row.units += 1;
        }
        for v in [
            &mut row.issue_us,
            &mut row.await_us,
            &mut row.stage_us,
            &mut row.compute_us,
            &mut row.finish_us,
            &mut row.release_us,
        ] {
            *v /= n_sms;
        }
        row.total_us = row.issue_us
            + row.await_us
            + row.stage_us
            + row.compute_us
            + row.finish_us
            + row.release_us;
        rows.push(row);
    }
    // Between units: an SM's idle time before its first, between two, and after its last.
    let mut between = 0.0;
    for &sm in &sms {
        let mut at = 0.0;
        for s in spans.iter().filter(|s| s.sm == sm) {
            between += (s.entry - at).max(0.0);
            at = s.exit.max(at);
        }
        between += (step - at).max(0.0);
    }
    let between = between / n_sms / 1e3;
    rows.push(BreakdownRow {
        kind: "between".into(),
        total_us: between,
        ..BreakdownRow::default()
    });
    Breakdown {
        step_us: step / 1e3,
        sms: sms.len(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record on `sm` whose cycle counter starts at `origin`, running at `ghz`, entering at
    /// `entry` ns and exiting at `exit` ns, with its timer ticking every `tick` ns.
    fn record(
        sm: u64,
        origin: u64,
        ghz: f64,
        tick: u64,
        entry: u64,
        marks: &[(Mark, u64)],
        exit: u64,
    ) -> [u64; TRACE_SLOTS] {
        let cyc = |ns: u64| origin + (ns as f64 * ghz) as u64;
        let mut r = [0u64; TRACE_SLOTS];
        r[Mark::Sm.slot()] = sm;
        r[Mark::Entry.slot()] = cyc(entry);
        r[Mark::EntryNs.slot()] = entry / tick * tick;
        r[Mark::Exit.slot()] = cyc(exit);
        r[Mark::ExitNs.slot()] = exit / tick * tick;
        for &(m, t) in marks {
            r[m.slot()] = cyc(t);
        }
        r
    }

    fn work(label: &str, kind: OpKind, record: [u64; TRACE_SLOTS]) -> TracedWork {
        TracedWork {
            label: label.into(),
            kind,
            tasks: (0, 1),
            record,
        }
    }

    /// Two SMs whose cycle counters start far apart and whose timer ticks each µs: the fitted
    /// marks land within a tick of where they were taken, on one clock.
    #[test]
    fn marks_from_different_sms_land_on_one_clock() {
        let mut w = Vec::new();
        for sm in 0..2u64 {
            let origin = 1_000_000_007 * (sm + 1);
            for i in 0..20u64 {
                let e = 1_000_000 + i * 10_000 + sm * 333;
                let marks = [(Mark::Released, e + 2_500), (Mark::Computed, e + 8_250)];
                w.push(work(
                    "L0.down",
                    OpKind::Down,
                    record(sm, origin, 1.755, 1000, e, &marks, e + 9_000),
                ));
            }
        }
        // Neither a record never written nor one with an impossible SM id is placed.
        w.push(work("L0.down", OpKind::Down, [0; TRACE_SLOTS]));
        let mut garbage = record(0, 1, 1.98, 1, 5_000, &[], 6_000);
        garbage[Mark::Sm.slot()] = u64::MAX;
        w.push(work("L0.down", OpKind::Down, garbage));
        let s = spans(&w, 1.98);
        assert_eq!(s.len(), 40);
        let first1 = s.iter().find(|s| s.sm == 1).unwrap();
        // SM 1 entered 333 ns after SM 0 (the step's origin), its release 2,500 ns after that.
        assert!((first1.entry - 333.0).abs() < 600.0, "{first1:?}");
        assert!((first1.released.unwrap() - first1.entry - 2_500.0).abs() < 5.0);
        let last0 = s.iter().rfind(|s| s.sm == 0).unwrap();
        assert!(
            (last0.computed.unwrap() - (190_000.0 + 8_250.0)).abs() < 600.0,
            "{last0:?}"
        );
    }

    /// The breakdown's phases add up to the work, and the gaps to the rest of each SM's step.
    #[test]
    fn breakdown_accounts_for_the_whole_step() {
        let mut w = Vec::new();
        for sm in 0..4u64 {
            let mut t = 1_000 + sm * 100;
            for (i, kind) in [OpKind::UpGate, OpKind::Down].into_iter().enumerate() {
                // Down marks its end barrier 0.1 µs after computing: 0.2 µs of release follow.
                let mut marks = vec![
                    (Mark::Issued, t + 200),
                    (Mark::Released, t + 1_200),
                    (Mark::Prepared, t + 1_700),
                    (Mark::Computed, t + 7_700),
                ];
                if kind == OpKind::Down {
                    marks.push((Mark::Ended, t + 7_800));
                }
                w.push(work(
                    &format!("L0.{i}"),
                    kind,
                    record(sm, 77 * sm, 1.98, 1, t, &marks, t + 8_000),
                ));
                t += 8_000 + 500;
            }
        }
        let b = breakdown(&spans(&w, 1.98));
        assert_eq!(b.sms, 4);
        let total: f64 = b.rows.iter().map(|r| r.total_us).sum();
        assert!((total - b.step_us).abs() < 0.01, "{b:?}");
        let up = &b.rows[0];
        assert_eq!((up.kind.as_str(), up.units), ("up_gate", 4));
        assert!(
            (up.await_us - 1.0).abs() < 0.01 && (up.compute_us - 6.0).abs() < 0.01,
            "{up:?}"
        );
        // Without an end barrier the finish runs to the exit; with one, the release follows it.
        assert!(up.finish_us > 0.29 && up.release_us == 0.0, "{up:?}");
        let down = &b.rows[1];
        assert!(
            (down.finish_us - 0.1).abs() < 0.01 && (down.release_us - 0.2).abs() < 0.01,
            "{down:?}"
        );
        // Per SM: 0.5 µs between its two units, and the others' late start or early end.
        let between = &b.rows[2];
        assert!((between.total_us - (0.5 + 0.3)).abs() < 0.01, "{between:?}");
    }

    proptest::proptest! {
        /// Whatever an SM's cycle counter starts at and runs at (the rate
        /// is fitted, not assumed), and however coarsely the timer ticks (up to 1 µs), every fitted mark of an SM
        /// whose records span the fit's least time (20 units or more: over 50 µs) lands
        /// within two ticks of the time it was taken, on the clock of the step's first entry.
        #[test]
        fn fitted_marks_land_within_a_tick(
            origins in proptest::collection::vec(0u64..1 << 40, 1..5),
            ghz in 1.0f64..2.1,
            tick in 1u64..1000,
            units in 20u64..40,
            length in 2_000u64..20_000,
        ) {
            let mut w = Vec::new();
            let mut truth = Vec::new();
            for (sm, &origin) in origins.iter().enumerate() {
                for i in 0..units {
                    let e = 100_000 + i * (length + 700) + sm as u64 * 97;
                    let rel = e + length / 3;
                    let marks = [(Mark::Released, rel)];
                    let r = record(sm as u64, origin, ghz, tick, e, &marks, e + length);
                    w.push(work("L0.down", OpKind::Down, r));
                    truth.push((sm as u32, e, rel));
                }
            }
            let s = spans(&w, 1.98);
            proptest::prop_assert_eq!(s.len(), truth.len());
            let t0 = 100_000.0;
            for (sm, e, rel) in truth {
                let span = s
                    .iter()
                    .find(|x| x.sm == sm && (x.entry - (e as f64 - t0)).abs() < 2.0 * tick as f64 + 2.0)
                    .expect("every unit is placed near its entry");
                let got = span.released.unwrap();
                proptest::prop_assert!(
                    (got - (rel as f64 - t0)).abs() <= 2.0 * tick as f64 + 2.0,
                    "released at {} ns, placed at {got}", rel as f64 - t0
                );
            }
        }
    }

    #[test]
    fn the_trace_has_a_load_and_a_dependent_slice_per_unit() {
        let marks = [(Mark::Released, 3_000)];
        let w = vec![work(
            "L1.qkv_rope",
            OpKind::QkvRope,
            record(5, 9, 1.98, 1, 1_000, &marks, 4_000),
        )];
        let t = chrome_trace(&spans(&w, 1.98), "measured");
        let slices: Vec<&Value> = t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .collect();
        assert_eq!(slices.len(), 2);
        assert_eq!(slices[0]["name"], "L1.qkv_rope load");
        assert_eq!(slices[0]["tid"], 5);
        assert!((slices[0]["dur"].as_f64().unwrap() - 2.0).abs() < 1e-3);
        assert!((slices[1]["ts"].as_f64().unwrap() - 2.0).abs() < 1e-3);
    }

    /// A unit's exit ends every task it ran, counted from its operator's first task (the
    /// units' task runs are within their operator); a task two units ran ends with the later;
    /// a task no unit ran, a run past its operator's tasks, or a label that names no operator
    /// times nothing (NaN).
    #[test]
    fn task_ends_take_each_units_exit() {
        let g = mkc_ir::lower::lower(&mkc_ir::embedded::resolve_model("tiny").unwrap());
        let down = g.ops.iter().find(|o| o.kind == OpKind::Down).unwrap();
        assert!(
            down.first_task.0 > 0 && down.tasks >= 3,
            "a down with tasks after others"
        );
        let span = |label: &str, tasks: (u32, u32), exit: f64| Span {
            sm: 0,
            label: label.into(),
            kind: OpKind::Down,
            tasks,
            entry: 0.0,
            exit,
            issued: None,
            released: None,
            prepared: None,
            landed: None,
            computed: None,
            sub: [None, None],
            ended: None,
        };
        let l = down.label();
        let last = down.tasks;
        let ends = task_ends(
            &[
                span(&l, (0, 2), 5.0),
                span(&l, (1, 3), 9.0),
                span(&l, (last - 1, last + 4), 1.0),
                span("no such operator", (0, 1), 7.0),
            ],
            &g,
        );
        let at = |i: u32| ends[(down.first_task.0 + i) as usize];
        assert_eq!([at(0), at(1), at(2)], [5.0, 9.0, 9.0]);
        assert_eq!(at(last - 1), 1.0);
        let timed: Vec<usize> = (0..ends.len()).filter(|&i| !ends[i].is_nan()).collect();
        let first = down.first_task.0 as usize;
        assert_eq!(
            timed,
            [first, first + 1, first + 2, first + last as usize - 1]
        );
    }
}
