//! Which embedded device profile a GPU's driver name selects (`mkc run` and `bench` compile
//! and predict with it).

use mkc_ir::embedded::device_for_gpu;

fn profile(gpu: &str) -> Option<String> {
    device_for_gpu(gpu).map(|d| d.name)
}

#[test]
fn driver_names_select_their_profiles() {
    assert_eq!(profile("NVIDIA H100 80GB HBM3").as_deref(), Some("h100"));
    assert_eq!(profile("NVIDIA H100 NVL").as_deref(), Some("h100"));
    assert_eq!(profile("NVIDIA H200").as_deref(), Some("h200"));
    assert_eq!(profile("NVIDIA A100-SXM4-80GB").as_deref(), Some("a100"));
    assert_eq!(profile("NVIDIA B200").as_deref(), Some("b200"));
}

#[test]
fn a_gpu_without_a_profile_selects_none() {
    assert_eq!(profile("NVIDIA GeForce RTX 4090"), None);
    // A profile's name must be a whole word of the driver's name.
    assert_eq!(profile("NVIDIA H1000"), None);
    assert_eq!(profile(""), None);
}

/// `Latencies::terms_mut` (what `mkc simulate --sensitivity` halves) names every latency field
/// a profile serialises, each once, and hands out the field itself.
#[test]
fn latency_terms_are_every_field_of_the_profile() {
    let mut l = mkc_ir::embedded::resolve_device("h100").unwrap().latencies;
    assert!(l.chain_load_latency_ns.is_some(), "h100 sets every field");
    let text = ron::to_string(&l).unwrap();
    let fields: Vec<String> = text
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .filter_map(|kv| kv.split(':').next())
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect();
    let mut names: Vec<String> = l.terms_mut().iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(names.len(), fields.len(), "{names:?} against {fields:?}");
    names.sort();
    let mut sorted = fields.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    for (name, v) in l.terms_mut() {
        *v = if name == "release_ns" { 7.0 } else { *v };
    }
    assert_eq!(l.release_ns, 7.0);
    // Absent, the chain's own load latency is no term of its own.
    l.chain_load_latency_ns = None;
    assert!(l
        .terms_mut()
        .iter()
        .all(|(n, _)| *n != "chain_load_latency_ns"));
}

/// An L2 hit's latency beside the copies in flight runs on the line from the one-copy probe to
/// the full queue's: each end exactly, rising between, the full queue's past it (never beyond
/// the probe's furthest case) and the one-copy figure for no copies (a hold at 0 still has the
/// copy that ends the window); with no one-copy probe, the full queue's whatever the copies.
#[test]
fn the_load_latency_rises_with_the_copies_in_flight() {
    use mkc_ir::device::FULL_QUEUE_COPIES;
    let mut l = mkc_ir::embedded::resolve_device("h100").unwrap().latencies;
    let one = l.load_latency_held_ns.expect("h100 probed one copy");
    let full = l.load_latency_ns;
    assert!(one < full);
    assert_eq!(l.load_latency_beside(1), one);
    assert_eq!(l.load_latency_beside(0), one);
    assert_eq!(l.load_latency_beside(FULL_QUEUE_COPIES), full);
    assert_eq!(l.load_latency_beside(16), full);
    let line: Vec<f64> = (1..=FULL_QUEUE_COPIES)
        .map(|c| l.load_latency_beside(c))
        .collect();
    assert!(line.windows(2).all(|w| w[0] < w[1]), "{line:?}");
    // The H100 probe's cases between the ends (perf.md) lie within 10% of the line.
    for (copies, probed) in [(2, 683.0), (3, 1003.0), (4, 1319.0), (6, 1726.0)] {
        let on_line = l.load_latency_beside(copies);
        assert!(
            (on_line / probed - 1.0).abs() < 0.10,
            "{copies} copies: {on_line} against {probed}"
        );
    }
    l.load_latency_held_ns = None;
    assert!((0..=16).all(|c| l.load_latency_beside(c) == full));
}
