//! A CPU reference interpreter of persistent schedules: one thread per SM, real atomic
//! counters, monotonic targets across steps, a watchdog instead of a hang.
//!
//! It exercises the same protocol a GPU megakernel follows (spin until
//! `counter >= target_per_step * step`, run, signal), so a schedule that deadlocks or runs a
//! task before its inputs exist fails here first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mkc_ir::{CounterId, TaskId};

use crate::schedule::Schedule;

/// Why a CPU execution failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecError {
    /// Not a persistent schedule.
    NotPersistent,
    /// The watchdog fired: an SM waited too long on a counter.
    Stalled {
        /// Decode step (1-based).
        step: u32,
        /// The SM that stalled.
        sm: usize,
        /// The task it was about to run.
        task: TaskId,
        /// The counter it waited on.
        counter: CounterId,
        /// The counter's value when the watchdog fired.
        value: u64,
        /// The value it waited for.
        target: u64,
    },
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::NotPersistent => write!(f, "only persistent schedules can be executed"),
            ExecError::Stalled {
                step,
                sm,
                task,
                counter,
                value,
                target,
            } => write!(
                f,
                "watchdog: step {step}, sm{sm} stalled before {task} waiting for {counter} \
                 to reach {target} (it is at {value})"
            ),
        }
    }
}

impl std::error::Error for ExecError {}

/// What an execution observed.
#[derive(Debug, Clone)]
pub struct ExecTrace {
    /// `start_stamp[step][task]`: a global sequence number taken once the task's waits passed.
    pub start_stamp: Vec<Vec<u64>>,
    /// `end_stamp[step][task]`: a global sequence number taken just before signalling.
    pub end_stamp: Vec<Vec<u64>>,
    /// Final counter values.
    pub counters: Vec<u64>,
}

/// Runs `steps` decode steps of a persistent schedule on one thread per SM. Steps are
/// separated by a barrier (the kernel launch boundary); counters are never reset.
pub fn run_on_threads(
    schedule: &Schedule,
    steps: u32,
    watchdog: Duration,
) -> Result<ExecTrace, ExecError> {
    let plan = schedule.persistent().ok_or(ExecError::NotPersistent)?;
    let g = &schedule.graph;
    let n = g.tasks.len();
    let counters: Vec<AtomicU64> = g.counters.iter().map(|_| AtomicU64::new(0)).collect();
    let clock = AtomicU64::new(0);
    let starts: Vec<AtomicU64> = (0..n * steps as usize).map(|_| AtomicU64::new(0)).collect();
    let ends: Vec<AtomicU64> = (0..n * steps as usize).map(|_| AtomicU64::new(0)).collect();
    let arrived = AtomicU64::new(0);
    let abort = AtomicBool::new(false);
    let sms = plan.streams.len() as u64;

    let results: Vec<Result<(), ExecError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .streams
            .iter()
            .enumerate()
            .map(|(sm, stream)| {
                let (counters, clock, starts, ends, arrived, abort) =
                    (&counters, &clock, &starts, &ends, &arrived, &abort);
                scope.spawn(move || -> Result<(), ExecError> {
                    for step in 1..=steps {
                        let base = (step as usize - 1) * n;
                        for ins in stream {
                            for w in &ins.waits {
                                let target = w.target_per_step as u64 * step as u64;
                                let c = &counters[w.counter.index()];
                                let deadline = Instant::now() + watchdog;
                                while c.load(Ordering::Acquire) < target {
                                    if abort.load(Ordering::Relaxed) {
                                        return Ok(());
                                    }
                                    if Instant::now() > deadline {
                                        abort.store(true, Ordering::Relaxed);
                                        return Err(ExecError::Stalled {
                                            step,
                                            sm,
                                            task: ins.first,
                                            counter: w.counter,
                                            value: c.load(Ordering::Acquire),
                                            target,
                                        });
                                    }
                                    std::thread::yield_now();
                                }
                            }
                            for task in ins.tasks() {
                                let i = base + task.index();
                                starts[i].store(
                                    clock.fetch_add(1, Ordering::SeqCst) + 1,
                                    Ordering::Relaxed,
                                );
                                ends[i].store(
                                    clock.fetch_add(1, Ordering::SeqCst) + 1,
                                    Ordering::Relaxed,
                                );
                            }
                            for s in &ins.signals {
                                counters[s.counter.index()]
                                    .fetch_add(s.count as u64, Ordering::Release);
                            }
                        }
                        // Kernel boundary between steps: every SM finishes step `step`.
                        arrived.fetch_add(1, Ordering::AcqRel);
                        while arrived.load(Ordering::Acquire) < sms * step as u64 {
                            if abort.load(Ordering::Relaxed) {
                                return Ok(());
                            }
                            std::thread::yield_now();
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("executor thread panicked"))
            .collect()
    });
    if let Some(err) = results.into_iter().find_map(Result::err) {
        return Err(err);
    }
    let split = |v: Vec<AtomicU64>| -> Vec<Vec<u64>> {
        let flat: Vec<u64> = v.into_iter().map(AtomicU64::into_inner).collect();
        flat.chunks(n.max(1)).map(<[u64]>::to_vec).collect()
    };
    Ok(ExecTrace {
        start_stamp: split(starts),
        end_stamp: split(ends),
        counters: counters.into_iter().map(AtomicU64::into_inner).collect(),
    })
}

impl ExecTrace {
    /// Reads that happened before their writer finished: (step, reader, writer). Checks every
    /// row each task reads of a tensor produced in the step, not only the counters it waits on.
    pub fn dependency_violations(&self, schedule: &Schedule) -> Vec<(u32, TaskId, TaskId)> {
        let g = &schedule.graph;
        let mut writers: Vec<Vec<(TaskId, mkc_ir::Rows)>> = vec![Vec::new(); g.tensors.len()];
        for t in &g.tasks {
            for w in &t.writes {
                writers[w.tensor.index()].push((t.id, w.rows));
            }
        }
        let mut out = Vec::new();
        for (s, (starts, ends)) in self.start_stamp.iter().zip(&self.end_stamp).enumerate() {
            for t in &g.tasks {
                for r in &t.reads {
                    for &(w, rows) in &writers[r.tensor.index()] {
                        if rows.overlaps(r.rows)
                            && (starts[t.id.index()] == 0
                                || ends[w.index()] >= starts[t.id.index()])
                        {
                            out.push((s as u32 + 1, t.id, w));
                        }
                    }
                }
            }
        }
        out
    }
}
