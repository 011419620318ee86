//! Schedule files read back: what `mkc compile -o` writes parses to the same schedule, and a
//! corrupted file is refused by field before anything indexes into it.

use mkc_ir::embedded::{resolve_device, resolve_model};
use mkc_scheduler::{check, compile, CompileOptions, Schedule, Target};
use serde_json::Value;

fn compiled(target: Target) -> Schedule {
    let opts = CompileOptions {
        target,
        ..CompileOptions::default()
    };
    compile(
        &resolve_model("tiny").unwrap(),
        &resolve_device("h200").unwrap(),
        &opts,
    )
    .schedule
}

/// The error for `v` (a schedule as JSON), which must name `field`.
fn refused(v: &Value, field: &str) {
    let err = Schedule::parse("s.json", &v.to_string())
        .unwrap_err()
        .to_string();
    assert!(err.contains(field), "`{field}` not in: {err}");
}

#[test]
fn written_schedules_read_back_unchanged() {
    for target in [Target::Persistent, Target::Pdl, Target::Graph] {
        let s = compiled(target);
        let json = serde_json::to_string(&s).unwrap();
        let ron = ron::to_string(&s).unwrap();
        assert_eq!(Schedule::parse("s.json", &json).unwrap(), s);
        assert_eq!(Schedule::parse("s.ron", &ron).unwrap(), s);
    }
}

#[test]
fn corrupted_schedules_are_refused_by_field() {
    let s = compiled(Target::Persistent);
    let base: Value = serde_json::to_value(&s).unwrap();
    let mut v = base.clone();
    v["plan"]["persistent"]["streams"][0][0]["first"] = 1_000_000.into();
    refused(&v, "plan.streams[0][0]");
    // A run reaching past the last task, or an empty one.
    let mut v = base.clone();
    v["plan"]["persistent"]["streams"][0][0]["count"] = u32::MAX.into();
    refused(&v, "plan.streams[0][0]");
    let mut v = base.clone();
    v["plan"]["persistent"]["streams"][0][0]["count"] = 0.into();
    refused(&v, "plan.streams[0][0]");
    let mut v = base.clone();
    v["plan"]["persistent"]["streams"][0][0]["signals"][0]["counter"] = 4242.into();
    refused(&v, "plan.streams[0][0]");
    let mut v = base.clone();
    v["graph"]["tasks"][3]["reads"][0]["tensor"] = 9999.into();
    refused(&v, "graph.tasks[3].reads[0]");
    let mut v = base.clone();
    v["graph"]["tasks"][3]["reads"][0]["rows"]["end"] = 1_000_000.into();
    refused(&v, "graph.tasks[3].reads[0]");
    let mut v = base.clone();
    v["graph"]["counters"][0]["edge"] = 4242.into();
    refused(&v, "graph.counters[0]");
    let mut v = base.clone();
    v["target"] = "pdl".into();
    refused(&v, "plan");
    let mut v = base.clone();
    v["device"]["sms"] = 0.into();
    refused(&v, "sms");
    let text = serde_json::to_string(&s).unwrap();
    let err = Schedule::parse("s.json", &text[..text.len() / 2])
        .unwrap_err()
        .to_string();
    assert!(err.contains("s.json:1:"), "{err}");
}

/// A task's cost edited in a sound file (the fuzzer's find: one matvec task given 32 GiB of KV
/// per token made the simulator's page-by-page loader allocate until the machine ran out of
/// memory) is refused: with the model, as a graph that is not its lowering; without it (files
/// written before the model was embedded), by the pages a simulation would load.
#[test]
fn a_task_cost_that_is_not_the_models_is_refused_before_anything_times_it() {
    let s = compiled(Target::Persistent);
    let base: Value = serde_json::to_value(&s).unwrap();
    let mut v = base.clone();
    v["graph"]["tasks"][3]["cost"]["kv_bytes_per_token"] = (1u64 << 35).into();
    refused(&v, "field `graph`");
    let mut v = base.clone();
    v["graph"]["tasks"][3]["cost"]["weight_bytes"] = 1.into();
    refused(&v, "not the lowering of the schedule's model");
    // Without the model: a schedule as compiled still reads back; the inflated one does not.
    let mut v = base.clone();
    v.as_object_mut().unwrap().remove("model");
    assert!(Schedule::parse("s.json", &v.to_string()).is_ok());
    v["graph"]["tasks"][3]["cost"]["kv_bytes_per_token"] = (1u64 << 35).into();
    refused(&v, "graph.tasks");
    v["graph"]["tasks"][3]["cost"]["kv_bytes_per_token"] = u64::MAX.into();
    refused(&v, "graph.tasks");
}

#[test]
fn a_sound_but_wrong_schedule_gets_violations_not_a_panic() {
    let s = compiled(Target::Persistent);
    let mut v: Value = serde_json::to_value(&s).unwrap();
    // The last instruction of SM 0 moved to the front of its stream: out of global order.
    let stream = v["plan"]["persistent"]["streams"][0]
        .as_array_mut()
        .unwrap();
    let last = stream.pop().unwrap();
    stream.insert(0, last);
    let s = Schedule::parse("s.json", &v.to_string()).expect("structurally sound");
    assert!(!check::check(&s).is_empty());
}
