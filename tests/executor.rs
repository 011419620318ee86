//! The CPU executor test: persistent schedules run on one thread per SM with real atomic
//! counters, over several steps without resetting them, and complete in dependency order.

mod common;

use std::time::Duration;

use common::device;
use mkc_scheduler::exec::{run_on_threads, ExecError};
use mkc_scheduler::{compile, CompileOptions, Plan, Policy, Target};

const STEPS: u32 = 3;

fn persistent(policy: Policy, sms: u32) -> mkc_scheduler::Schedule {
    let model = mkc_ir::embedded::resolve_model("tiny").unwrap();
    let opts = CompileOptions {
        target: Target::Persistent,
        policy,
        ..CompileOptions::default()
    };
    compile(&model, &device(sms), &opts).schedule
}

#[test]
fn every_policy_completes_in_dependency_order() {
    for policy in [Policy::RoundRobin, Policy::List, Policy::Ilp] {
        for sms in [1, 3, 16] {
            let s = persistent(policy, sms);
            let trace = run_on_threads(&s, STEPS, Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("{policy:?} on {sms} SMs: {e}"));
            let bad = trace.dependency_violations(&s);
            assert!(
                bad.is_empty(),
                "{policy:?}/{sms}: reads before writes: {bad:?}"
            );
            for (c, value) in s.graph.counters.iter().zip(&trace.counters) {
                assert_eq!(*value, c.signals_per_step as u64 * STEPS as u64, "{}", c.id);
            }
            for step in &trace.start_stamp {
                assert!(step.iter().all(|&s| s > 0), "a task did not run");
            }
        }
    }
}

#[test]
fn a_stream_out_of_topological_order_stalls_and_the_watchdog_reports_it() {
    let mut s = persistent(Policy::RoundRobin, 1);
    let Plan::Persistent(p) = &mut s.plan else {
        panic!()
    };
    p.streams[0].reverse();
    let err = run_on_threads(&s, 1, Duration::from_millis(200)).unwrap_err();
    assert!(
        matches!(err, ExecError::Stalled { step: 1, sm: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("watchdog"));
}
