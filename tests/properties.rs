//! Property tests: every schedule invariant, over random valid geometries, tilings, shard
//! counts, SM counts, targets and policies; and proof that the checker catches violations.

mod common;

use common::{arb_fused_model, arb_model, device};
use mkc_ir::lower::lower;
use mkc_scheduler::check::{check, check_graph};
use mkc_scheduler::{compile, CompileOptions, Plan, Policy, Schedule, Target, Trigger};
use proptest::prelude::*;

fn options(target: Target, policy: Policy) -> CompileOptions {
    CompileOptions {
        target,
        policy,
        trigger: Trigger::Early,
        ..CompileOptions::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every valid model lowers to a graph that passes the checker, and the figures the
    /// checker does not see directly hold too.
    #[test]
    fn lowered_graphs_are_valid(model in arb_model()) {
        prop_assert!(model.validate("random").is_ok(), "{:?}", model.validate("random"));
        let g = lower(&model);
        let v = check_graph(&g);
        prop_assert!(v.is_empty(), "{v}");
        prop_assert_eq!(g.task_weight_bytes(), model.weight_bytes());
        prop_assert_eq!(g.tasks.len() as u64, mkc_ir::lower::task_count(&model));
        prop_assert_eq!(g.ops.len() as u32, 5 * model.geometry.layers + 1);
        // Every counter receives at least one signal and guards a reader.
        let waiters = g.waiters();
        for c in &g.counters {
            prop_assert!(c.signals_per_step > 0);
            prop_assert!(!waiters[c.id.index()].is_empty());
        }
    }

    /// Persistent schedules of every heuristic policy pass the checker on any SM count.
    #[test]
    fn persistent_schedules_are_valid(
        model in arb_model(),
        sms in 1u32..40,
        policy in prop::sample::select(vec![Policy::RoundRobin, Policy::List]),
    ) {
        let c = compile(&model, &device(sms), &options(Target::Persistent, policy));
        let v = check(&c.schedule);
        prop_assert!(v.is_empty(), "{v}");
        let Plan::Persistent(p) = &c.schedule.plan else { panic!("not persistent") };
        let scheduled: u64 = p.streams.iter().flatten().map(|i| i.count as u64).sum();
        prop_assert_eq!(scheduled, c.schedule.graph.tasks.len() as u64);
        // Instructions are runs: never more than one per operator per SM.
        let runs: usize = p.streams.iter().map(Vec::len).sum();
        let most: usize = c.schedule.graph.ops.iter().map(|o| (o.tasks as usize).min(sms as usize)).sum();
        prop_assert!(runs <= most, "{runs} instructions, more than {most}");
        // The cost-model makespan never beats the lower bound.
        for e in &c.summary.estimates {
            prop_assert!(e.gap >= -1e-9, "{} beats the bound by {}", e.policy, e.gap);
        }
        // What `compile -o` writes reads back as itself: its graph is its model's lowering.
        let json = serde_json::to_string(&c.schedule).unwrap();
        prop_assert_eq!(&Schedule::parse("p.json", &json).unwrap(), &c.schedule);
    }

    /// Chain targets: the checker's rules (every operator once, in order, launching its
    /// kernel; its CTAs running every task once in the kernels' runs; waits guarding exactly the
    /// reads from earlier grids), and the grid and edge counts, on any SM count.
    #[test]
    fn chain_schedules_are_valid(model in arb_model(), pdl in any::<bool>(), sms in 1u32..200) {
        let target = if pdl { Target::Pdl } else { Target::Graph };
        let c = compile(&model, &device(sms), &options(target, Policy::RoundRobin));
        let v = check(&c.schedule);
        prop_assert!(v.is_empty(), "{v}");
        let Plan::Chain(plan) = &c.schedule.plan else { panic!("not a chain") };
        let layers = model.geometry.layers as usize;
        prop_assert_eq!(plan.kernels.len(), 5 * layers + 1);
        for k in &plan.kernels {
            let op = c.schedule.graph.op(k.op);
            prop_assert!(k.ctas >= 1 && k.ctas <= op.tasks);
            if op.kind != mkc_ir::OpKind::Attention {
                prop_assert!(k.ctas <= sms, "{}: {} CTAs on {sms} SMs", k.name, k.ctas);
            }
        }
        let edges = &c.summary.edges;
        prop_assert_eq!(edges.programmatic + edges.full, 5 * layers as u32);
        prop_assert_eq!(edges.programmatic == 0, !pdl);
        let json = serde_json::to_string(&c.schedule).unwrap();
        prop_assert_eq!(&Schedule::parse("c.json", &json).unwrap(), &c.schedule);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Attention inside the O-projection: every valid model lowers to a graph that passes the
    /// checker (additions into one vector after the QKV tasks that zero it, its reader after
    /// every addition), with four operators a layer, and its persistent schedules of every
    /// heuristic policy pass on any SM count.
    #[test]
    fn fused_attention_graphs_and_schedules_are_valid(
        model in arb_fused_model(),
        sms in 1u32..40,
        policy in prop::sample::select(vec![Policy::RoundRobin, Policy::List]),
    ) {
        let g = lower(&model);
        let v = check_graph(&g);
        prop_assert!(v.is_empty(), "{v}");
        prop_assert_eq!(g.task_weight_bytes(), model.weight_bytes());
        prop_assert_eq!(g.tasks.len() as u64, mkc_ir::lower::task_count(&model));
        prop_assert_eq!(g.ops.len() as u32, 4 * model.geometry.layers + 1);
        let c = compile(&model, &device(sms), &options(Target::Persistent, policy));
        let v = check(&c.schedule);
        prop_assert!(v.is_empty(), "{v}");
        let json = serde_json::to_string(&c.schedule).unwrap();
        prop_assert_eq!(&Schedule::parse("f.json", &json).unwrap(), &c.schedule);
    }

    /// An O-projection task that adds into the vector without waiting for QKV, which zeroes
    /// it, is caught as an addition before its zeroing writer.
    #[test]
    fn checker_catches_an_addition_before_its_zeroing(model in arb_fused_model(), pick in any::<usize>()) {
        let mut g = lower(&model);
        let adding: Vec<usize> = (0..g.tasks.len()).filter(|&i| !g.tasks[i].accumulates.is_empty()).collect();
        let t = adding[pick % adding.len()];
        g.tasks[t].waits.clear();
        // Its reads of q, k and v stay guarded (as if another edge ordered them): only the
        // addition is unguarded.
        g.tasks[t].reads.clear();
        let v = check_graph(&g).to_string();
        prop_assert!(v.contains("adds into"), "{v}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// The ILP policy's schedules pass the checker too.
    #[test]
    fn ilp_schedules_are_valid(model in arb_model(), sms in 1u32..20) {
        let c = compile(&model, &device(sms), &options(Target::Persistent, Policy::Ilp));
        let v = check(&c.schedule);
        prop_assert!(v.is_empty(), "{v}");
        let r = c.ilp.expect("ilp report");
        prop_assert_eq!(r.ops, c.schedule.graph.ops.len());
    }

    /// A schedule with one wait removed is caught.
    #[test]
    fn checker_catches_a_missing_wait(model in arb_model(), pick in any::<usize>()) {
        let mut c = compile(&model, &device(8), &options(Target::Persistent, Policy::List));
        let g = &mut c.schedule.graph;
        let waiting: Vec<usize> = (0..g.tasks.len()).filter(|&i| !g.tasks[i].waits.is_empty()).collect();
        let t = waiting[pick % waiting.len()];
        g.tasks[t].waits.pop();
        prop_assert!(!check(&c.schedule).is_empty());
    }

    /// A stream not in topological order, a wrong counter target, a run that spills into the
    /// next operator or one that loses its last task is caught.
    #[test]
    fn checker_catches_bad_streams(model in arb_model(), fault in 0u32..4) {
        let mut c = compile(&model, &device(1), &options(Target::Persistent, Policy::RoundRobin));
        let Plan::Persistent(p) = &mut c.schedule.plan else { panic!("not persistent") };
        let stream = &mut p.streams[0];
        match fault {
            0 => {
                let ins = stream.iter_mut().find(|i| !i.waits.is_empty()).expect("a waiting instruction");
                ins.waits[0].target_per_step += 1;
            }
            1 => stream.reverse(),
            2 => stream[0].count += 1,
            _ => {
                let ins = stream.iter_mut().find(|i| i.count > 1).expect("a run of two tasks or more");
                ins.count -= 1;
            }
        }
        prop_assert!(!check(&c.schedule).is_empty());
    }
}

/// A PDL grid stripped of its wait (but keeping its dependent reads) is caught, and so is a
/// non-waiting grid that keeps the PDL attribute.
#[test]
fn checker_catches_bad_pdl_grids() {
    let model = mkc_ir::embedded::resolve_model("tiny").unwrap();
    let base = compile(
        &model,
        &device(8),
        &options(Target::Pdl, Policy::RoundRobin),
    );
    assert!(check(&base.schedule).is_empty());

    let mut no_wait = base.schedule.clone();
    let Plan::Chain(c) = &mut no_wait.plan else {
        panic!()
    };
    c.kernels[3].wait = None;
    assert!(!check(&no_wait).is_empty());

    let mut attr_only = base.schedule.clone();
    let Plan::Chain(c) = &mut attr_only.plan else {
        panic!()
    };
    c.kernels[0].pdl_attribute = true;
    assert!(!check(&attr_only).is_empty());
}

/// Chain grids whose CTAs would not run the kernels' task runs, or that launch another
/// operator's kernel, are caught.
#[test]
fn checker_catches_bad_task_runs() {
    let model = mkc_ir::embedded::resolve_model("tiny").unwrap();
    let base = compile(
        &model,
        &device(8),
        &options(Target::Pdl, Policy::RoundRobin),
    );
    assert!(check(&base.schedule).is_empty());
    let i = {
        let Plan::Chain(c) = &base.schedule.plan else {
            panic!()
        };
        c.kernels
            .iter()
            .position(|k| k.runs.len() >= 2)
            .expect("a grid of two CTAs")
    };
    let mutate = |f: &dyn Fn(&mut mkc_scheduler::schedule::Kernel)| {
        let mut s = base.schedule.clone();
        let Plan::Chain(c) = &mut s.plan else {
            panic!()
        };
        f(&mut c.kernels[i]);
        s
    };
    // A task run twice, a task dropped, an uneven split, a CTA without its run.
    assert!(!check(&mutate(&|k| k.runs[1][0] -= 1)).is_empty());
    assert!(!check(&mutate(&|k| k.runs[1][1] -= 1)).is_empty());
    assert!(!check(&mutate(&|k| {
        k.runs[0][1] += 1;
        k.runs[1][0] += 1;
        k.runs[1][1] -= 1;
    }))
    .is_empty());
    assert!(!check(&mutate(&|k| k.ctas += 1)).is_empty());
    assert!(!check(&mutate(&|k| k.entry = "k_attention".into())).is_empty());
}

/// Counters whose shards overlap or leave a gap are caught.
#[test]
fn checker_catches_bad_shards() {
    let model = mkc_ir::embedded::resolve_model("tiny").unwrap();
    let mut g = lower(&model);
    let c = g
        .counters
        .iter()
        .position(|c| c.shard == 1)
        .expect("a sharded edge");
    g.counters[c].access.rows.start += 1;
    assert!(!check_graph(&g).is_empty());
}

/// Every model file shipped in `models/` parses, validates and compiles to verified schedules.
#[test]
fn every_shipped_model_file_compiles_to_a_verified_schedule() {
    let mut seen = 0;
    for entry in std::fs::read_dir("models").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "ron") {
            continue;
        }
        let model = mkc_ir::Model::load(&path).unwrap_or_else(|e| panic!("{e}"));
        for target in [Target::Persistent, Target::Pdl] {
            let c = compile(&model, &device(132), &options(target, Policy::RoundRobin));
            let v = check(&c.schedule);
            assert!(v.is_empty(), "{}: {v}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 5, "models/ holds the shipped model files");
}
