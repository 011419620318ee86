//! Tests of the operator kernels themselves, on the GPU: each operator's grid alone, as the plan
//! launches it, on fresh random inputs, against the same operator on the CPU
//! (`Runner::check_operators`). Without a GPU they say so and pass: the CPU tests cover the
//! host side.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mkc_backend::gpu::{Gpu, Runner, WeightSource};
use mkc_backend::weights::generate;
use mkc_scheduler::{compile, CompileOptions, Target};

/// The GPU's SM count, or None (printing that `what` is skipped) where there is no GPU.
fn gpu_sms(what: &str) -> Option<u32> {
    match Gpu::open() {
        Ok(g) => Some(g.sms as u32),
        Err(e) => {
            eprintln!("SKIPPED GPU {what}: {e}");
            None
        }
    }
}

#[test]
fn every_operator_kernel_alone_matches_the_cpu_on_fresh_random_inputs() {
    let Some(sms) = gpu_sms("operator tests") else {
        return;
    };
    // Fresh inputs every run; the seed is printed so that a failure can be replayed.
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let weights_seed = (seed % 1000) as u32 + 1;
    eprintln!("operator inputs: seed {seed}, weights seed {weights_seed}");
    // The tuned layout also at 1 and 2 MLP shards: down's K chunk of 8192 and 4096 columns,
    // staged in shared memory and taken block by block. And Llama-3.2-3B: hidden 3072, so QKV,
    // up/gate and the LM head take their rows in blocks from the staged input, and the
    // O-projection (3072 columns) stages its input too. And the tuned layout with split-KV
    // attention in 3 parts: attention writes partial records (each part past its first KV
    // chunk), the O-projection merges random ones as it stages them; and with 3 and 4 parts of
    // a 512-position history (the check's position is then 510: each part within one chunk,
    // as the workload's choice makes them), so that a fault shows whether it is the parts'
    // or their further chunks'. And llama3b's 128-wide heads in 8 one-chunk parts. And two
    // layers of Llama-2-13B as `mkc model` lowers it: 32 KiB pages with 6 consumer warps, pages
    // that hold fewer rows than fit (the O-projection's and the LM head's 2 of 3), 1-pair
    // up/gate pages. And K chunks that are no multiple of 256 columns: two layers of SmolLM-135M
    // (576 columns, the last of 3 lane rounds partial, in registers) and of a hidden size of
    // 3,200 (a staged chunk whose last block ends inside a group). And OpenLLaMA-3B's heads of
    // 100, zero-padded to 104 (`checkpoint_head_dim`: RoPE and the score scale at 100). And
    // two layers of Llama-3-70B as `mkc model` lowers it: 32 KiB pages on three consumer warps,
    // down staging its whole 28,672-float input.
    for name in [
        "llama1b",
        "llama1b_tuned",
        "tuned_1_shard",
        "tuned_2_shards",
        "tuned_kv_split_3",
        "kv_split_3_one_chunk",
        "kv_split_4_one_chunk",
        "llama3b",
        "llama3b_kv_split_8",
        "llama2_13b_two_layers",
        "smollm_135m_two_layers",
        "hidden_3200_two_layers",
        "openllama_3b_two_layers",
        "llama3_70b_two_layers",
    ] {
        let model = match name {
            "llama1b" | "llama3b" => mkc_ir::embedded::resolve_model(name).unwrap(),
            "llama2_13b_two_layers" => {
                let m = chosen(name, |g| {
                    (g.hidden, g.intermediate, g.layers) = (5120, 13824, 2);
                    (g.heads, g.kv_heads, g.head_dim, g.vocab) = (40, 40, 128, 32000);
                });
                assert_eq!(m.lowering.page_bytes, 32768, "{name}: 32 KiB pages");
                m
            }
            "llama3_70b_two_layers" => {
                let m = chosen(name, |g| {
                    (g.hidden, g.intermediate, g.layers) = (8192, 28672, 2);
                    (g.heads, g.kv_heads, g.head_dim, g.vocab) = (64, 8, 128, 128256);
                    g.tied_embeddings = false;
                });
                assert_eq!(
                    (m.lowering.page_bytes, m.tuning.consumer_warps),
                    (32768, Some(3)),
                    "{name}: 32 KiB pages, three warps"
                );
                m
            }
            "smollm_135m_two_layers" => smollm_135m(2),
            "hidden_3200_two_layers" => hidden_3200(2),
            "openllama_3b_two_layers" => {
                let m = chosen(name, |g| {
                    (g.hidden, g.intermediate, g.layers) = (3200, 8640, 2);
                    (g.heads, g.kv_heads, g.head_dim, g.vocab) = (32, 32, 100, 32000);
                });
                assert_eq!(m.geometry.checkpoint_head_dim, Some(100), "{name}: padded");
                m
            }
            "llama3b_kv_split_8" => {
                // 128-wide heads in 8 one-chunk parts: what the workload's choice takes for
                // llama3b at a 1,000-token prompt.
                let mut m = mkc_ir::embedded::resolve_model("llama3b").unwrap();
                m.lowering.attention_kv_split = Some(8);
                m.workload.max_seq_len = 512;
                m
            }
            _ => {
                let mut m = mkc_ir::model::Model::parse(
                    "models/llama1b_tuned.ron",
                    include_str!("../../models/llama1b_tuned.ron"),
                )
                .unwrap();
                match name {
                    "tuned_1_shard" => m.lowering.vtp_shards.up_gate_down = 1,
                    "tuned_2_shards" => m.lowering.vtp_shards.up_gate_down = 2,
                    "tuned_kv_split_3" => m.lowering.attention_kv_split = Some(3),
                    "kv_split_3_one_chunk" | "kv_split_4_one_chunk" => {
                        m.lowering.attention_kv_split =
                            Some(if name.contains('3') { 3 } else { 4 });
                        m.workload.max_seq_len = 512;
                    }
                    _ => {}
                }
                m
            }
        };
        let device = mkc_ir::embedded::resolve_device("h200")
            .unwrap()
            .with_sms(sms);
        let schedule = compile(
            &model,
            &device,
            &CompileOptions {
                target: Target::Graph,
                ..CompileOptions::default()
            },
        )
        .schedule;
        let host = generate(&model, weights_seed);
        let gpu = Gpu::open().unwrap();
        let runner = Runner::new(gpu, &model, WeightSource::Random(weights_seed)).unwrap();
        // The weights as the producers read them (page-major split-K matrices), against the
        // Rust description of a page.
        let wrong = runner.check_weight_store(&host).unwrap();
        assert!(
            wrong.is_empty(),
            "{name}: weights stored unlike their pages: {wrong:?}"
        );
        let checks = runner
            .check_operators(&schedule, &host, seed, Duration::from_secs(10))
            .unwrap();
        assert_eq!(checks.len(), 7);
        let mut failed = Vec::new();
        for c in &checks {
            for o in &c.outputs {
                eprintln!(
                    "{name:<14} {:<14} {:>4} CTAs  {:<26} rel L2 {:.2e}  unwritten {}{}",
                    c.operator,
                    c.ctas,
                    o.buffer,
                    o.rel_l2,
                    o.unwritten,
                    if o.passed() { "" } else { "  FAILED" }
                );
                if !o.worst.is_empty() {
                    eprintln!("    {}", o.worst);
                }
                if !o.passed() {
                    failed.push(format!("{name} {} {}", c.operator, o.buffer));
                }
            }
        }
        assert!(failed.is_empty(), "failed: {failed:?}");
    }
}

/// The model `mkc model` writes for the geometry `edit` makes of Llama-3.2-1B's.
fn chosen(name: &str, edit: impl FnOnce(&mut mkc_ir::model::Geometry)) -> mkc_ir::Model {
    let mut g = mkc_ir::embedded::resolve_model("llama1b").unwrap().geometry;
    edit(&mut g);
    mkc_catalogue::choose_lowering(name, &g, &Default::default()).unwrap()
}

/// SmolLM-135M's geometry with `layers` layers: hidden 576, 9 query and 3 KV heads of 64.
fn smollm_135m(layers: u32) -> mkc_ir::Model {
    chosen("smollm-135m", |g| {
        (g.hidden, g.intermediate, g.layers) = (576, 1536, layers);
        (g.heads, g.kv_heads, g.head_dim, g.vocab) = (9, 3, 64, 49152);
    })
}

/// A hidden size of 3,200 (25 heads of 128, 5 KV heads) with `layers` layers: K chunks longer
/// than the registers hold, whose last block ends inside a 256-column group.
fn hidden_3200(layers: u32) -> mkc_ir::Model {
    chosen("hidden-3200", |g| {
        (g.hidden, g.intermediate, g.layers) = (3200, 8704, layers);
        (g.heads, g.kv_heads, g.head_dim, g.vocab) = (25, 5, 128, 32000);
    })
}

/// A persistent plan whose last wait can never complete (its target raised past what its
/// counter receives; the checker would refuse such a file, the backend's API is handed it
/// directly) is stopped by the kernel's own watchdog, and the host's error names the SM, the
/// instruction and the counter.
#[test]
fn a_persistent_wait_that_never_completes_is_stopped_by_the_device_watchdog() {
    let Some(sms) = gpu_sms("watchdog test") else {
        return;
    };
    let model = mkc_ir::embedded::resolve_model("llama1b").unwrap();
    let device = mkc_ir::embedded::resolve_device("h200")
        .unwrap()
        .with_sms(sms);
    let mut schedule = compile(
        &model,
        &device,
        &CompileOptions {
            target: Target::Persistent,
            ..CompileOptions::default()
        },
    )
    .schedule;
    let mkc_scheduler::Plan::Persistent(plan) = &mut schedule.plan else {
        panic!("a persistent plan")
    };
    // The last waiting instruction of the step: nothing else waits on it, so it is the only
    // wait that stalls and the record names it.
    let (sm, ins) = plan
        .streams
        .iter_mut()
        .enumerate()
        .flat_map(|(sm, st)| st.iter_mut().map(move |i| (sm, i)))
        .filter(|(_, i)| !i.waits.is_empty())
        .max_by_key(|(_, i)| i.seq)
        .expect("a waiting instruction");
    ins.waits[0].target_per_step += 1;
    let counter = ins.waits[0].counter.0;
    let runner = Runner::new(Gpu::open().unwrap(), &model, WeightSource::Random(1)).unwrap();
    let graph = runner.capture(&schedule).unwrap();
    let opts = mkc_backend::gpu::RunOptions {
        capture_layers: Vec::new(),
        capture_logits: Vec::new(),
        watchdog: Duration::from_secs(20),
    };
    let err = runner
        .run(&graph, &[1, 2, 3], 2, &opts)
        .expect_err("the stalled wait must stop the run")
        .to_string();
    eprintln!("{err}");
    assert!(err.contains("stalled"), "{err}");
    assert!(err.contains(&format!("SM {sm} ")), "{err}");
    assert!(err.contains(&format!("counter {counter} ")), "{err}");
}

/// Every layer's values after a step (`Runner::layer_values`: QKV's outputs, the O-projection's
/// and down's partials summed, x_mid, h decoded from fragments where stored so) are the CPU
/// reference's, for every target, for attention inside the O-projection (its one added
/// block) and for the persistent producer warming L2: what a failing check reports as the first value off the reference.
#[test]
fn every_layers_values_match_the_cpu_on_every_target() {
    let Some(sms) = gpu_sms("layer values") else {
        return;
    };
    let seed = fresh_seed();
    eprintln!("layer values: weights seed {seed}");
    let tuned = mkc_ir::Model::parse(
        "models/llama1b_tuned.ron",
        include_str!("../../models/llama1b_tuned.ron"),
    )
    .unwrap();
    let fused = mkc_ir::Model::parse(
        "models/llama1b_fused.ron",
        include_str!("../../models/llama1b_fused.ron"),
    )
    .unwrap();
    // The producer warming L2 ahead of its ring (its sink moves the work region).
    let mut fused_warm = fused.clone();
    fused_warm.tuning.persistent_warm_pages = Some(8);
    let device = mkc_ir::embedded::resolve_device("h200")
        .unwrap()
        .with_sms(sms);
    let prompt: Vec<u32> = (0..40u64)
        .map(|i| ((i * 7919 + seed as u64) % 32000) as u32)
        .collect();
    for (model, target) in [
        (&tuned, Target::Graph),
        (&tuned, Target::Pdl),
        (&tuned, Target::Persistent),
        (&fused, Target::Persistent),
        (&fused_warm, Target::Persistent),
    ] {
        let schedule = compile(
            model,
            &device,
            &CompileOptions {
                target,
                ..CompileOptions::default()
            },
        )
        .schedule;
        let host = generate(model, seed);
        let runner = Runner::new(Gpu::open().unwrap(), model, WeightSource::Random(seed)).unwrap();
        let graph = runner.capture(&schedule).unwrap();
        let at = prompt.len() as u32 - 1;
        let out = runner
            .run(
                &graph,
                &prompt,
                1,
                &mkc_backend::gpu::RunOptions {
                    capture_logits: vec![at],
                    capture_layers: vec![at],
                    watchdog: Duration::from_secs(20),
                },
            )
            .unwrap();
        let mut r = mkc_backend::reference::Reference::new(model, &host, true);
        for (p, &t) in prompt.iter().enumerate() {
            r.step(t, p as u32);
        }
        let got = &out.layers[0].1;
        assert_eq!(got.len(), model.geometry.layers as usize);
        let label = format!(
            "{} {} {}",
            model.name,
            target.name(),
            model.tuning.describe().join(",")
        );
        if let Some(wrong) = mkc_backend::reference::first_wrong_value(got, r.last_layers(), 1e-2) {
            panic!("{label}: {wrong}");
        }
        let worst = got
            .iter()
            .zip(r.last_layers())
            .flat_map(|(g, w)| {
                g.parts()
                    .into_iter()
                    .zip(w.parts())
                    .map(|((_, a), (_, b))| mkc_backend::reference::rel_l2(a, b))
            })
            .fold(0.0, f64::max);
        eprintln!("{label}: worst layer value rel L2 {worst:.2e}");
    }
}

/// A fresh, odd input seed for a probe test (printed by each test, to replay a failure).
fn fresh_seed() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.subsec_nanos())
        | 1
}

/// The operators' page loop (`k_page_math`, the code every streaming body inlines) over pages
/// already in shared memory gives the CPU's row sums for every warp count and input placement
/// the probe measures, on fresh random weights, and every case takes time.
#[test]
fn the_page_loop_alone_matches_the_cpu_for_every_probed_warp_count() {
    if gpu_sms("page-math probe").is_none() {
        return;
    }
    let seed = fresh_seed();
    eprintln!("page-math inputs: seed {seed}");
    let model = mkc_ir::embedded::resolve_model("llama1b").unwrap();
    let compiled = mkc_backend::kernels::compile("sm_90a", &model).unwrap();
    let gpu = Gpu::open().unwrap();
    let p = mkc_backend::gpu::probe_page_math(&gpu, &compiled.cubin, &model, seed).unwrap();
    assert_eq!(p.k_groups * 256, model.geometry.hidden);
    assert_eq!(
        p.rows_per_page * p.k_groups * 256 * 2,
        model.lowering.page_bytes
    );
    let (cases, streamed) = (
        mkc_backend::gpu::PAGE_MATH_CASES.len(),
        mkc_backend::gpu::PAGE_MATH_STREAM_CASES.len(),
    );
    // Registers, L2 in span and the tensor cores (llama1b's pages are 2,048 columns).
    assert_eq!(p.rows.len(), 3 * cases + streamed);
    assert_eq!(
        p.rows
            .iter()
            .filter(|r| r.input == mkc_backend::abi::PageInput::TensorCores)
            .count(),
        cases
    );
    for r in &p.rows {
        assert!(r.err < 1e-5, "{r:?}");
        assert!(r.cta_ns > 0.0 && r.cta_cycles > 0.0, "{r:?}");
        // A streaming warp lands pages while the others compute: some bytes, at a rate an SM
        // can take (a few to ~100 GB/s per SM on an H100/H200).
        assert_eq!(r.beside_stream, r.stream_gbps > 0.0, "{r:?}");
        assert!(r.stream_gbps < 500.0, "{r:?}");
    }
    // Hidden 3072: the blocked loop (12 groups from a staged input, 2 rows in a 16 KiB page).
    let model = mkc_ir::embedded::resolve_model("llama3b").unwrap();
    let compiled = mkc_backend::kernels::compile("sm_90a", &model).unwrap();
    let p = mkc_backend::gpu::probe_page_math(&gpu, &compiled.cubin, &model, seed).unwrap();
    assert_eq!((p.k_groups, p.rows_per_page), (12, 2));
    assert_eq!(p.rows.len(), cases + streamed);
    for r in &p.rows {
        assert!(
            r.err < 1e-5 && r.input == mkc_backend::abi::PageInput::Registers,
            "{r:?}"
        );
    }
    // K chunks that are no multiple of 256 columns: SmolLM's 576 (3 lane rounds, the last
    // partial; registers and L2 in span) and 3,200 (staged, its last block inside a group).
    for (model, groups) in [(smollm_135m(2), 3), (hidden_3200(2), 13)] {
        let compiled = mkc_backend::kernels::compile("sm_90a", &model).unwrap();
        let p = mkc_backend::gpu::probe_page_math(&gpu, &compiled.cubin, &model, seed).unwrap();
        assert_eq!((p.k_groups, p.k as u32), (groups, model.geometry.hidden));
        for r in &p.rows {
            assert!(r.err < 1e-5, "{}: {r:?}", model.name);
        }
    }
    // Attention inside the O-projection: the loop in which each lane owns whole rows (128 rows
    // of one head's 64 columns a page), from an input staged in shared memory.
    let model = mkc_ir::Model::parse(
        "models/llama1b_fused.ron",
        include_str!("../../models/llama1b_fused.ron"),
    )
    .unwrap();
    let compiled = mkc_backend::kernels::compile("sm_90a", &model).unwrap();
    let p = mkc_backend::gpu::probe_page_math(&gpu, &compiled.cubin, &model, seed).unwrap();
    assert_eq!((p.k_groups, p.k, p.rows_per_page), (0, 64, 128));
    assert_eq!(p.rows.len(), cases + streamed);
    for r in &p.rows {
        assert!(
            r.err < 1e-5 && r.input == mkc_backend::abi::PageInput::Registers,
            "{r:?}"
        );
    }
}

/// Attention's body alone (`k_attention_alone`, as the chain and the persistent build compile
/// it) gives the CPU's output for every head count and KV length the probe runs, on fresh
/// random inputs, and every case takes time.
#[test]
fn attention_alone_matches_the_cpu_in_both_builds() {
    if gpu_sms("attention probe").is_none() {
        return;
    }
    let seed = fresh_seed();
    eprintln!("attention inputs: seed {seed}");
    let model = mkc_ir::embedded::resolve_model("llama1b").unwrap();
    let chain = mkc_backend::kernels::compile("sm_90a", &model).unwrap();
    let persistent = mkc_backend::kernels::compile_persistent("sm_90a", &model).unwrap();
    let gpu = Gpu::open().unwrap();
    let p = mkc_backend::gpu::probe_attention(&gpu, &chain.cubin, &persistent.cubin, &model, seed)
        .unwrap();
    let heads = mkc_backend::gpu::heads_per_task(&model);
    assert_eq!(heads, vec![1, 2, 4]);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    // Two builds, every head count, every length (all within llama1b's max_seq and its 8 to 32
    // tasks within any H100/H200's SMs).
    assert_eq!(
        p.rows.len(),
        2 * heads.len() * mkc_backend::gpu::ATTENTION_LENGTHS.len()
    );
    for r in &p.rows {
        assert!(r.err < 1e-4, "{r:?}");
        assert!(
            r.cta_ns > 0.0 && r.cta_cycles > 0.0 && r.slowest_ns >= r.cta_ns,
            "{r:?}"
        );
        assert_eq!(r.tasks * r.heads, model.geometry.heads, "{r:?}");
    }
}
