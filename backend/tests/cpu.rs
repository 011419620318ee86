//! Backend tests that need no GPU: the weight generator, the layout, the
//! CPU reference and the ptxas-log parser. NVRTC compilation runs when NVRTC is installed and
//! says so when it is skipped.

use mkc_backend::ablation::Ablation;
use mkc_backend::kernels;
use mkc_backend::reference::{argmax_margin, rel_l2, Reference};
use mkc_backend::weights::{self, bf2f, f2bf, layout, value, Fill};
use mkc_ir::embedded::resolve_model;
use mkc_ir::Tuning;

/// The default model, which the kernels are built for in most tests.
fn llama1b() -> mkc_ir::Model {
    resolve_model("llama1b").unwrap()
}

#[test]
fn bf16_rounding_is_round_to_nearest_even() {
    assert_eq!(f2bf(1.0), 0x3F80);
    // 1 + 2^-8 is exactly half-way between two bf16 values: ties to even (down).
    assert_eq!(f2bf(1.0 + 2f32.powi(-8)), 0x3F80);
    // 1 + 3 * 2^-8 ties up to the even neighbour.
    assert_eq!(f2bf(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
    assert_eq!(bf2f(f2bf(-2.5)), -2.5);
}

#[test]
fn generated_weights_are_exact_deterministic_and_seeded() {
    let m = resolve_model("tiny").unwrap();
    let specs = layout(&m);
    let qkv = &specs[0];
    let Fill::Matrix { shift } = qkv.fill else {
        panic!("a matrix")
    };
    let a: Vec<u16> = (0..1000).map(|i| value(qkv, 7, i)).collect();
    let b: Vec<u16> = (0..1000).map(|i| value(qkv, 7, i)).collect();
    let c: Vec<u16> = (0..1000).map(|i| value(qkv, 8, i)).collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    for &w in &a {
        // Every value is (byte - 128) * 2^-shift, exactly.
        let k = bf2f(w) * 2f32.powi(shift);
        assert_eq!(k, k.round());
        assert!((-128.0..=127.0).contains(&k));
    }
    let distinct: std::collections::HashSet<u16> = a.iter().copied().collect();
    assert!(distinct.len() > 100, "values spread over the byte range");
}

#[test]
fn layout_covers_the_model_weights() {
    for name in ["tiny", "llama1b", "llama8b"] {
        let m = resolve_model(name).unwrap();
        let bytes: u64 = layout(&m).iter().map(|s| s.len() * 2).sum();
        let embed = if m.geometry.tied_embeddings {
            0
        } else {
            m.geometry.vocab as u64 * m.geometry.hidden as u64 * 2
        };
        assert_eq!(bytes, m.weight_bytes() + embed, "{name}");
    }
}

#[test]
fn reference_is_finite_and_bf16_kv_stays_close_to_f32() {
    let m = resolve_model("tiny").unwrap();
    let w = weights::generate(&m, 3);
    let mut bf = Reference::new(&m, &w, true);
    let mut f = Reference::new(&m, &w, false);
    for pos in 0..6 {
        let tok = (pos * 37 + 5) % m.geometry.vocab;
        let a = bf.step(tok, pos);
        let b = f.step(tok, pos);
        assert_eq!(a.len(), m.geometry.vocab as usize);
        assert!(a.iter().all(|v| v.is_finite()));
        let err = rel_l2(&a, &b);
        assert!(err > 0.0 && err < 1e-2, "pos {pos}: {err}");
    }
    let (i, margin) = argmax_margin(&[0.5, 2.0, 1.5, 2.0]);
    assert_eq!((i, margin), (1, 0.0), "ties go to the smallest index");
}

#[test]
fn ptxas_log_is_parsed_per_kernel() {
    let log = "ptxas info    : 0 bytes gmem\n\
        ptxas info    : Compiling entry function 'k_down' for 'sm_90a'\n\
        ptxas info    : Function properties for k_down\n\
            8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
        ptxas info    : Used 48 registers, used 1 barriers, 16 bytes smem, 400 bytes cmem[0]\n\
        ptxas info    : Compiling entry function 'k_up_gate' for 'sm_90a'\n\
        ptxas info    : Used 40 registers, used 1 barriers, 400 bytes cmem[0]\n";
    let k = kernels::parse_ptxas_log(log, &Tuning::default());
    assert_eq!(k.len(), 2);
    assert_eq!(
        (k[0].name.as_str(), k[0].registers, k[0].static_smem),
        ("k_down", 48, 16)
    );
    assert_eq!(
        (
            k[0].stack_bytes,
            k[0].spill_store_bytes,
            k[0].spill_load_bytes
        ),
        (8, 4, 12)
    );
    assert_eq!((k[1].registers, k[1].static_smem), (40, 0));
}

/// A kernel that calls a `__noinline__` device function keeps its own frame and spills: ptxas
/// prints the callee's properties block after the kernel's (as it did for k_persistent with
/// a poll loop of its own, whose zeros hid 1,204 bytes of spill stores; docs/perf.md).
#[test]
fn ptxas_log_keeps_a_kernels_spills_past_a_callees_block() {
    let log = "ptxas info    : Compiling entry function 'k_persistent' for 'sm_90a'\n\
        ptxas info    : Function properties for k_persistent\n\
        ptxas         .     272 bytes stack frame, 1204 bytes spill stores, 1520 bytes spill loads\n\
        ptxas info    : Used 255 registers, used 2 barriers, 272 bytes cumulative stack size, 896 bytes smem\n\
        ptxas info    : Compile time = 1579.096 ms\n\
        ptxas info    : Function properties for _Z13act_poll_pairPKy\n\
        ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
        ptxas info    : Compiling entry function 'k_read_bw' for 'sm_90a'\n\
        ptxas info    : Function properties for k_read_bw\n\
        ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
        ptxas info    : Used 26 registers, used 0 barriers\n";
    let k = kernels::parse_ptxas_log(log, &Tuning::default());
    assert_eq!(k.len(), 2);
    assert_eq!(
        (
            k[0].name.as_str(),
            k[0].registers,
            k[0].stack_bytes,
            k[0].spill_store_bytes,
            k[0].spill_load_bytes
        ),
        ("k_persistent", 255, 272, 1204, 1520)
    );
    assert_eq!(
        (k[1].name.as_str(), k[1].registers, k[1].stack_bytes),
        ("k_read_bw", 26, 0)
    );
}

/// The co-residency probe's kernels hold exactly the registers their names say (the probe's
/// verdicts are only as good as these counts), twice in a row.
#[test]
fn probe_kernels_hold_the_registers_their_names_say() {
    for _ in 0..2 {
        match kernels::compile_probe("sm_90a") {
            Err(mkc_backend::BackendError::NoNvrtc) => {
                eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
                return;
            }
            Err(e) => panic!("{e}"),
            Ok(c) => {
                let mut held: Vec<(String, u32)> = c
                    .kernels
                    .iter()
                    .filter(|k| k.name.starts_with("k_hold_"))
                    .map(|k| (k.name.clone(), k.registers))
                    .collect();
                held.sort();
                // Each k_hold_<R> and k_hold_s<B>_<R> holds R registers.
                for (name, regs) in &held {
                    let r: u32 = name.rsplit('_').next().unwrap().parse().unwrap();
                    assert_eq!(*regs, r, "{name}: {}", c.log);
                }
                let mut names: Vec<&str> = held.iter().map(|(n, _)| n.as_str()).collect();
                let mut listed = mkc_backend::gpu::OCCUPANCY_KERNELS.to_vec();
                names.sort_unstable();
                listed.sort_unstable();
                assert_eq!(
                    names, listed,
                    "the occupancy probe queries every k_hold kernel"
                );
                for r in mkc_backend::gpu::PROBE_REGISTERS {
                    assert!(listed.contains(&format!("k_hold_{r}").as_str()));
                }
            }
        }
    }
}

/// The per-op grid kernels whose machine code differs between two builds, sorted by name.
fn changed_kernels<'a>(base: &kernels::Compiled, other: &kernels::Compiled) -> Vec<&'a str> {
    let hash = |c: &kernels::Compiled, name: &str| {
        c.kernels
            .iter()
            .find(|k| k.name == name)
            .map(|k| k.code_hash)
    };
    let mut names: Vec<&str> = kernels::ENTRY_POINTS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| hash(base, name) != hash(other, name))
        .collect();
    names.sort();
    names
}

/// L2 warming lives in the O-projection and QKV only: turning it off changes those two kernels'
/// code and no other's (every other kernel keeps the code measured without it), and turning off
/// the O-projection's alone (`warm_o: 0`) changes the O-projection only.
#[test]
fn l2_warming_changes_only_the_o_projection_and_qkv() {
    // The knobs as data (the generated footer checks the build's WARM_DEPTH against them).
    let tuned = |t: mkc_ir::Tuning| {
        let mut m = llama1b();
        m.tuning = t;
        kernels::compile("sm_90a", &m)
    };
    let compiled = (
        kernels::compile("sm_90a", &llama1b()),
        tuned(mkc_ir::Tuning {
            warm_depth: Some(0),
            ..mkc_ir::Tuning::default()
        }),
        tuned(mkc_ir::Tuning {
            warm_o: Some(0),
            ..mkc_ir::Tuning::default()
        }),
    );
    let (on, off, o_off) = match compiled {
        (Err(mkc_backend::BackendError::NoNvrtc), _, _) => {
            eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
            return;
        }
        (on, off, o_off) => (on.unwrap(), off.unwrap(), o_off.unwrap()),
    };
    assert_eq!(changed_kernels(&on, &off), ["k_o_proj", "k_qkv_rope"]);
    assert_eq!(changed_kernels(&on, &o_off), ["k_o_proj"]);
}

/// Each ablation build changes exactly the kernels whose work it removes (so the rest of its
/// chain runs the measured code): attention only the attention kernel, loads and the page math
/// the five streaming operators, and the grid waits every per-op kernel (each one waits).
#[test]
fn ablation_builds_change_only_the_kernels_whose_work_they_remove() {
    let base = match kernels::compile("sm_90a", &llama1b()) {
        Err(mkc_backend::BackendError::NoNvrtc) => {
            eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
            return;
        }
        other => other.unwrap(),
    };
    let streaming = ["k_down", "k_lm_head", "k_o_proj", "k_qkv_rope", "k_up_gate"];
    let mut every: Vec<&str> = kernels::ENTRY_POINTS.iter().map(|(n, _)| *n).collect();
    every.sort();
    for a in Ablation::LADDER {
        if !a.applies_to(false) {
            // The chain build refuses it at compile time rather than computing on a stale ring.
            let refused = kernels::compile_with_defines("sm_90a", &llama1b(), &a.defines());
            assert!(refused.is_err(), "{}", a.label());
            continue;
        }
        let build = kernels::compile_with_defines("sm_90a", &llama1b(), &a.defines()).unwrap();
        let changed = changed_kernels(&base, &build);
        let per_op: Vec<&str> = changed
            .iter()
            .copied()
            .filter(|n| every.contains(n))
            .collect();
        let want: Vec<&str> = if a.waits {
            every.clone()
        } else {
            let mut w: Vec<&str> = Vec::new();
            if a.attention {
                w.push("k_attention");
            }
            if a.loads || a.compute {
                w.extend(streaming);
            }
            w.sort();
            w.dedup();
            w
        };
        assert_eq!(per_op, want, "{}", a.label());
    }
}

/// A scaled RoPE (Llama 3) changes no kernel's machine code: every build reads RoPE's
/// frequencies from the table generated from `Model::rope_freq` (data, not code), so the
/// scaling cannot take a path of its own.
#[test]
fn llama3_rope_changes_no_kernels_machine_code() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/llama3.2-1b.ron"
    ))
    .unwrap();
    let scaled = mkc_ir::Model::parse("llama3.2-1b.ron", &text).unwrap();
    let base = match kernels::compile("sm_90a", &llama1b()) {
        Err(mkc_backend::BackendError::NoNvrtc) => {
            eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
            return;
        }
        other => other.unwrap(),
    };
    let build = kernels::compile("sm_90a", &scaled).unwrap();
    assert!(changed_kernels(&base, &build).is_empty());
}

#[test]
fn kernels_compile_with_nvrtc_when_installed() {
    match kernels::compile("sm_90a", &llama1b()) {
        Err(mkc_backend::BackendError::NoNvrtc) => {
            eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
        }
        Err(e) => panic!("{e}"),
        Ok(c) => {
            let traced =
                kernels::compile_traced("sm_90a", &llama1b()).expect("the traced build compiles");
            assert!(!traced.cubin.is_empty() && traced.cubin != c.cubin);
            assert!(!c.cubin.is_empty());
            // Code hashes: known for every kernel, distinct, reproducible, and moved by the
            // traced build's marks in every operator that has marks.
            let again = kernels::compile("sm_90a", &llama1b()).expect("compiles twice");
            let hash = |k: &[kernels::KernelInfo], name: &str| {
                k.iter().find(|k| k.name == name).map(|k| k.code_hash)
            };
            for (name, _) in kernels::ENTRY_POINTS {
                let h = hash(&c.kernels, name).unwrap();
                assert_ne!(h, 0, "{name}");
                assert_eq!(Some(h), hash(&again.kernels, name), "{name}");
                assert_ne!(Some(h), hash(&traced.kernels, name), "{name}");
                let same = c.kernels.iter().filter(|k| k.code_hash == h).count();
                assert_eq!(same, 1, "{name} shares its hash");
            }
            for (name, _) in kernels::ENTRY_POINTS {
                let k = c
                    .kernels
                    .iter()
                    .find(|k| k.name == *name)
                    .unwrap_or_else(|| panic!("{name} missing"));
                assert!(
                    k.registers > 0 && k.registers <= 255,
                    "{name}: {}",
                    k.registers
                );
                assert_eq!(k.spill_store_bytes, 0, "{name} spills");
            }
        }
    }
}

#[test]
fn the_gpu_runner_refuses_cleanly_without_a_device() {
    match mkc_backend::gpu::Gpu::open() {
        Ok(g) => eprintln!(
            "GPU present ({}): the no-device path is not exercised here",
            g.name
        ),
        Err(e) => {
            eprintln!("SKIPPED GPU tests: {e}");
            assert!(matches!(e, mkc_backend::BackendError::NoDevice(_)), "{e}");
        }
    }
}

#[test]
fn compiled_resources_replace_the_declared_ones_in_chain_schedules() {
    let m = resolve_model("tiny").unwrap();
    let dev = mkc_ir::embedded::resolve_device("h200").unwrap();
    let opts = mkc_scheduler::CompileOptions {
        target: mkc_scheduler::Target::Pdl,
        ..Default::default()
    };
    let mut s = mkc_scheduler::compile(&m, &dev, &opts).schedule;
    let declared = s.chain().unwrap().clone();
    let infos: Vec<kernels::KernelInfo> = kernels::ENTRY_POINTS
        .iter()
        .enumerate()
        .map(|(i, (name, kind))| kernels::KernelInfo {
            name: name.to_string(),
            threads: kernels::threads(&m.tuning, *kind),
            registers: 40 + i as u32,
            static_smem: 16,
            ..kernels::KernelInfo::default()
        })
        .collect();
    let n = kernels::apply_to_schedule(&mut s, &infos);
    let plan = s.chain().unwrap();
    assert_eq!(n, plan.kernels.len());
    for (k, d) in plan.kernels.iter().zip(&declared.kernels) {
        let i = kernels::ENTRY_POINTS
            .iter()
            .position(|(n, _)| *n == k.entry)
            .unwrap();
        assert_eq!(k.registers, 40 + i as u32);
        assert_eq!(k.static_smem_bytes, 16);
        assert_eq!(k.resources, mkc_catalogue::ResourceSource::Compiled);
        assert_eq!(d.resources, mkc_catalogue::ResourceSource::Declared);
        // The launch itself is the plan's: compiled figures change no launch argument.
        assert_eq!(
            (k.ctas, k.threads, k.dynamic_smem_bytes, &k.runs),
            (d.ctas, d.threads, d.dynamic_smem_bytes, &d.runs)
        );
    }
    assert!(mkc_scheduler::check::check(&s).is_empty());
}

/// The catalogue's declared registers are the compiled kernels' for the default build, so that
/// a plan made without NVRTC (marked declared) admits CTAs as the compiled one does.
#[test]
fn declared_registers_are_the_compiled_ones() {
    let m = llama1b();
    let compiled = match kernels::compile("sm_90a", &m) {
        Err(mkc_backend::BackendError::NoNvrtc) => {
            eprintln!("SKIPPED: no NVRTC library found");
            return;
        }
        other => other.unwrap(),
    };
    for &(name, kind) in kernels::ENTRY_POINTS {
        let info = compiled.kernels.iter().find(|k| k.name == name).unwrap();
        let declared = mkc_catalogue::declared_resources(&m, kind);
        assert_eq!(
            (declared.registers, declared.threads, declared.static_smem),
            (info.registers, info.threads, info.static_smem),
            "{name}: update mkc_catalogue::launch::declared_registers"
        );
    }
}

/// Point 2 of "one program": for every model file the backend can run and both chain targets,
/// the launch arguments the backend would use are the plan's grids, one for one (CTAs,
/// threads, dynamic shared memory, PDL attribute, wait, trigger), on H200 and a smaller GPU;
/// and a plan the kernels would run differently is refused naming the field.
#[test]
fn launch_arguments_are_the_plan_for_every_model_file() {
    let mut checked = 0;
    for entry in std::fs::read_dir("../models").unwrap() {
        let path = entry.unwrap().path();
        let m = mkc_ir::Model::load(&path).unwrap();
        if kernels::check_model(&m).is_err() || m.lowering.persistent_only() {
            continue;
        }
        for sms in [132, 78] {
            let dev = mkc_ir::embedded::resolve_device("h200")
                .unwrap()
                .with_sms(sms);
            for target in [mkc_scheduler::Target::Pdl, mkc_scheduler::Target::Graph] {
                let opts = mkc_scheduler::CompileOptions {
                    target,
                    ..Default::default()
                };
                let s = mkc_scheduler::compile(&m, &dev, &opts).schedule;
                let shapes = mkc_backend::launch_plan::launch_plan(&s, &m)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let plan = s.chain().unwrap();
                assert_eq!(shapes.len(), plan.kernels.len());
                for (l, k) in shapes.iter().zip(&plan.kernels) {
                    assert_eq!(l.entry, k.entry);
                    assert_eq!(
                        (l.ctas, l.threads, l.dynamic_smem, l.pdl_attribute, l.waits),
                        (
                            k.ctas,
                            k.threads,
                            k.dynamic_smem_bytes,
                            k.pdl_attribute,
                            k.wait.is_some()
                        ),
                        "{} {}",
                        path.display(),
                        k.name
                    );
                    assert_eq!(l.early, k.trigger == Some(mkc_scheduler::Trigger::Early));
                    assert!(k.ctas <= sms || l.kind == mkc_ir::OpKind::Attention);
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "{checked} plans checked");
    // A plan edited so that the kernels would run it differently is refused.
    let m = resolve_model("llama1b").unwrap();
    let dev = mkc_ir::embedded::resolve_device("h200").unwrap();
    let opts = mkc_scheduler::CompileOptions {
        target: mkc_scheduler::Target::Pdl,
        ..Default::default()
    };
    let base = mkc_scheduler::compile(&m, &dev, &opts).schedule;
    type Edit = fn(&mut mkc_scheduler::schedule::Kernel);
    let edits: [(&str, Edit); 4] = [
        ("threads", |k| k.threads += 32),
        ("dynamic_smem_bytes", |k| k.dynamic_smem_bytes -= 128),
        ("runs[0]", |k| k.runs[0][1] += 1),
        ("entry", |k| k.entry = "k_down".into()),
    ];
    for (field, edit) in edits {
        let mut s = base.clone();
        let mkc_scheduler::Plan::Chain(c) = &mut s.plan else {
            panic!()
        };
        edit(&mut c.kernels[0]);
        let e = mkc_backend::launch_plan::launch_plan(&s, &m)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("plan.kernels[0].{field}")), "{e}");
    }
    // Another tuning builds other CTAs: a plan compiled without it is refused for it.
    let mut other = m.clone();
    other.tuning.consumer_warps = Some(4);
    assert!(mkc_backend::launch_plan::launch_plan(&base, &other).is_err());
}

/// Every output row of every streaming operator is covered by exactly one page, each CTA's
/// share of pages differs by at most one, and the shared memory fits an SM.
#[test]
fn streaming_grids_cover_every_row_once_within_shared_memory() {
    let mut split = resolve_model("llama1b").unwrap();
    split.lowering.attention_split = 4;
    split.lowering.vtp_shards.attention_o_proj = 2;
    // Llama-2-13B as `mkc model` lowers it: 32 KiB pages, whose rows do not fill them all.
    let mut g = resolve_model("llama1b").unwrap().geometry;
    (g.hidden, g.intermediate, g.layers) = (5120, 13824, 40);
    (g.heads, g.kv_heads, g.head_dim, g.vocab) = (40, 40, 128, 32000);
    let wide = mkc_catalogue::choose_lowering("13b", &g, &Default::default()).unwrap();
    for (name, m) in [
        ("llama1b", resolve_model("llama1b").unwrap()),
        ("split", split),
        ("13b", wide),
    ] {
        kernels::check_model(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (entry, kind) in kernels::ENTRY_POINTS {
            let Some(s) = kernels::stream(&m, *kind) else {
                continue;
            };
            let w = s.work;
            assert_eq!(
                w.pages() * w.page_out(),
                w.splits * w.out_rows,
                "{name} {entry}"
            );
            // A page's rows fit its slot and tile the operator's rows.
            assert!(
                w.page_rows() * w.k * 2 <= m.lowering.page_bytes
                    && w.out_rows.is_multiple_of(w.page_out()),
                "{name} {entry}"
            );
            let smem = kernels::dynamic_smem(&m, *kind);
            assert!(smem + 1024 <= 233_472, "{name} {entry}: {smem} B");
            let g = mkc_catalogue::grid(&m, *kind, w.tasks(), 132).ctas;
            assert!(g <= w.tasks() && g <= 132, "{name} {entry}: {g} CTAs");
            let shares: Vec<u32> = (0..g)
                .map(|b| kernels::cta_tasks(w.tasks(), g, b).1 * w.task_pages)
                .collect();
            let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
            assert!(hi - lo <= w.task_pages, "{name} {entry}: shares {lo}..{hi}");
            assert_eq!(shares.iter().sum::<u32>(), w.pages(), "{name} {entry}");
        }
    }
}

/// Attention asks for more than half an SM's shared memory, so that two attention CTAs never
/// share an SM (packed two to an SM they measured slower), and stages as many KV positions per
/// chunk as that holds: a multiple of 32, at least 128; the kernel reads the chunk back from
/// its dynamic shared memory, so the division must be exact.
#[test]
fn attention_takes_more_than_half_an_sm_and_fills_it_with_kv_positions() {
    let mut split = resolve_model("llama1b").unwrap();
    split.lowering.attention_split = 4;
    let mut short = resolve_model("llama1b").unwrap();
    short.workload.max_seq_len = 160;
    let mut long = resolve_model("llama1b").unwrap();
    long.workload.max_seq_len = 16384;
    long.lowering.attention_split = 4;
    for (name, m) in [
        ("llama1b", resolve_model("llama1b").unwrap()),
        ("split", split),
        ("short", short),
        ("long", long),
    ] {
        let chunk = kernels::attention_chunk(&m);
        let att = kernels::dynamic_smem(&m, mkc_ir::OpKind::Attention);
        assert!(
            2 * (att + 1024) > 233_472,
            "{name}: two CTAs of {att} B fit an SM"
        );
        assert!(att + 1024 <= 233_472, "{name}: {att} B");
        assert!(chunk >= 128 && chunk.is_multiple_of(32), "{name}: {chunk}");
        let hp = m.heads_per_attention_task();
        let hd = m.geometry.head_dim;
        let vectors = (hp * hd + hp * m.workload.max_seq_len) * 4;
        let per_position = 4 * hd; // an unpadded K row and V row, bf16
        assert_eq!((att - vectors) % per_position, 0, "{name}");
        assert_eq!((att - vectors) / per_position, chunk, "{name}");
        if chunk > 128 {
            // 32 positions fewer would let two CTAs share an SM: the chunk is no larger than
            // the rule needs.
            assert!(2 * (att - 32 * per_position + 1024) <= 233_472, "{name}");
        }
    }
    // The benchmark's longest context (prompt 32 + 128 tokens) is one chunk on both layouts.
    assert!(kernels::attention_chunk(&resolve_model("llama1b").unwrap()) >= 160);
    let tuned =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/llama1b_tuned.ron");
    assert!(kernels::attention_chunk(&mkc_ir::model::Model::load(&tuned).unwrap()) >= 160);
}

/// The code hash reader takes sections named `.text.<kernel>` from an ELF64 image and nothing
/// from bytes that are not one (never panics on truncated input).
#[test]
fn code_hashes_come_from_text_sections_only() {
    // A minimal ELF64: header, then [shstrtab | code], then three section headers.
    let names = b"\0.shstrtab\0.text.k_a\0.data\0";
    let code = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let mut elf = vec![0u8; 64];
    elf[..5].copy_from_slice(b"\x7fELF\x02");
    let names_at = elf.len();
    elf.extend_from_slice(names);
    let code_at = elf.len();
    elf.extend_from_slice(&code);
    let shoff = elf.len();
    let header = |name: u32, offset: usize, size: usize| {
        let mut h = vec![0u8; 64];
        h[0..4].copy_from_slice(&name.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&(offset as u64).to_le_bytes());
        h[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
        h
    };
    elf.extend(header(1, names_at, names.len()));
    elf.extend(header(11, code_at, code.len()));
    elf.extend(header(21, code_at, 4));
    elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
    elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
    elf[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
    elf[0x3E..0x40].copy_from_slice(&0u16.to_le_bytes());
    let fnv = code.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    assert_eq!(kernels::text_hashes(&elf), vec![("k_a".to_string(), fnv)]);
    for cut in [0, 4, 40, shoff + 10, elf.len() - 1] {
        let _ = kernels::text_hashes(&elf[..cut]);
    }
    assert!(kernels::text_hashes(b"not an elf at all").is_empty());
}

/// The checkpoint geometries `mkc model` lowers beyond the embedded models compile, chain and
/// persistent builds alike, where NVRTC is installed: K chunks that are no multiple of 256
/// columns (SmolLM-135M's 576, a hidden size of 3,200 taken block by block), and 32 KiB pages
/// with fewer warps (Llama-2-13B). The GPU tests run their operators against the CPU.
#[test]
fn checkpoint_geometries_compile_in_both_builds() {
    let chosen = |edit: &dyn Fn(&mut mkc_ir::model::Geometry)| {
        let mut g = resolve_model("llama1b").unwrap().geometry;
        edit(&mut g);
        mkc_catalogue::choose_lowering("x", &g, &Default::default()).unwrap()
    };
    let models = [
        chosen(&|g| {
            (g.hidden, g.intermediate, g.heads, g.kv_heads, g.vocab) = (576, 1536, 9, 3, 49152)
        }),
        chosen(&|g| {
            (g.hidden, g.intermediate, g.head_dim) = (3200, 8704, 128);
            (g.heads, g.kv_heads, g.vocab) = (25, 5, 32000);
        }),
        chosen(&|g| {
            (g.hidden, g.intermediate, g.head_dim) = (5120, 13824, 128);
            (g.heads, g.kv_heads, g.vocab) = (40, 40, 32000);
        }),
    ];
    for m in &models {
        kernels::check_model(m).unwrap();
        let chain = match kernels::compile("sm_90a", m) {
            Err(mkc_backend::BackendError::NoNvrtc) => {
                eprintln!("SKIPPED: no NVRTC library found");
                return;
            }
            other => other.unwrap(),
        };
        let persistent = kernels::compile_persistent("sm_90a", m).unwrap();
        for k in chain.kernels.iter().chain(&persistent.kernels) {
            assert!(k.registers > 0 && k.registers <= 255, "{}", k.name);
        }
        for (name, _) in kernels::ENTRY_POINTS {
            assert!(chain.kernels.iter().any(|k| k.name == *name), "{name}");
        }
    }
}

/// Models the kernels cannot stream are refused with the field to change.
#[test]
fn models_the_kernels_cannot_stream_name_the_field() {
    let mut tiny = resolve_model("tiny").unwrap();
    let e = kernels::check_model(&tiny).unwrap_err().to_string();
    assert!(
        e.contains("lowering.page_bytes") && e.contains("16384"),
        "{e}"
    );
    // Rows of 64 columns: a 16 KiB page holds 128, more than a warp's lanes.
    tiny.lowering.page_bytes = 16384;
    let e = kernels::check_model(&tiny).unwrap_err().to_string();
    assert!(
        e.contains("lowering.page_bytes") && e.contains("at least 256 columns"),
        "{e}"
    );
    // A K chunk of 2,050 columns (a quarter of 8,200) is no whole number of 16-byte pieces.
    let mut m = resolve_model("llama1b").unwrap();
    m.geometry.intermediate = 4 * 2050;
    m.validate("llama1b").unwrap();
    let e = kernels::check_model(&m).unwrap_err().to_string();
    assert!(
        e.contains("lowering.vtp_shards.up_gate_down") && e.contains("multiple of 8"),
        "{e}"
    );
    m.geometry.intermediate = 8192;
    // Down's K chunks of 8192 and 4096 columns are longer than the registers hold: staged in
    // shared memory, in the chain's kernel and the persistent one.
    for shards in [1, 2] {
        m.lowering.vtp_shards.up_gate_down = shards;
        kernels::check_model(&m).unwrap();
        let l = mkc_catalogue::persistent_layout(&m).unwrap();
        assert_eq!(l.x_len, m.geometry.intermediate);
        let down = mkc_catalogue::stream(&m, mkc_ir::OpKind::Down).unwrap();
        assert_eq!(down.x_len, m.geometry.intermediate);
    }
}

proptest::proptest! {
    /// The page split of a grid is a partition: consecutive, disjoint, complete.
    #[test]
    fn page_ranges_partition_the_pages(pages in 1u32..100_000, g in 1u32..300) {
        let g = g.min(pages);
        let mut next = 0;
        for b in 0..g {
            let (first, count) = kernels::page_range(pages, b, g);
            proptest::prop_assert_eq!(first, next);
            proptest::prop_assert!(count >= 1);
            next = first + count;
        }
        proptest::prop_assert_eq!(next, pages);
    }

    /// The ring protocol's invariants, for any number of slots and warps: every slot has one
    /// consumer warp; a slot's laps come in page order one at a time (so a parity wait can
    /// never see a phase two laps old); a page's slot was last used by an earlier page of the
    /// same warp (so the producer, which issues in page order, never waits on a consumer that
    /// waits on it); and walking `ring_next` from any first page visits exactly each warp's
    /// own pages, in order (the consumers' loop), no warp owning more than one slot above
    /// another.
    #[test]
    fn ring_slots_have_one_in_order_consumer(
        page0 in 0u32..500, count in 0u32..1_000, slots in 1u32..=kernels::MAX_SLOTS,
        warps in 1u32..=kernels::CONSUMER_WARPS,
    ) {
        let mut owner = vec![None; slots as usize];
        let mut last: Vec<Option<(u32, u32)>> = vec![None; slots as usize];
        let mut walked: Vec<Vec<u32>> = vec![Vec::new(); warps as usize];
        for i in 0..page0 + count {
            let (slot, lap) = kernels::ring_slot(i, slots);
            let warp = kernels::ring_owner(i, slots, warps);
            let s = slot as usize;
            proptest::prop_assert!(slot < slots && warp < warps);
            proptest::prop_assert_eq!(*owner[s].get_or_insert(warp), warp);
            match last[s] {
                None => proptest::prop_assert_eq!(lap, 0),
                Some((prev_page, prev_lap)) => {
                    proptest::prop_assert_eq!(lap, prev_lap + 1);
                    proptest::prop_assert!(
                        prev_page < i && kernels::ring_owner(prev_page, slots, warps) == warp
                    );
                }
            }
            last[s] = Some((i, lap));
            if i >= page0 {
                walked[warp as usize].push(i);
            }
        }
        let owned: Vec<u32> = (0..warps).map(|w| (0..slots).filter(|j| j % warps == w).count() as u32).collect();
        proptest::prop_assert!(owned.iter().max().unwrap() - owned.iter().min().unwrap() <= 1);
        for warp in 0..warps {
            let mut mine = Vec::new();
            let mut next = kernels::ring_next(page0, slots, warps, warp);
            while let Some(p) = next.filter(|&p| p < page0 + count) {
                mine.push(p);
                next = kernels::ring_next(p + 1, slots, warps, warp);
            }
            proptest::prop_assert_eq!(&mine, &walked[warp as usize], "warp {}", warp);
        }
    }

    /// Warming L2 uses only ring slots that none of the CTA's own pages use, inside the ring,
    /// each slot's laps in order, and at most `depth` slots.
    #[test]
    fn warming_never_touches_a_slot_the_consumers_read(
        count in 1u32..12, slots in 1u32..=kernels::MAX_SLOTS, depth in 1u32..8, pages in 1u32..64,
    ) {
        let own: Vec<u32> = (0..count).map(|i| kernels::ring_slot(i, slots).0).collect();
        let mut used = std::collections::BTreeMap::new();
        for n in 0..pages {
            match kernels::warm_slot(count, slots, depth, n) {
                None => {
                    proptest::prop_assert!(count >= slots);
                    return Ok(());
                }
                Some((slot, lap)) => {
                    proptest::prop_assert!(slot < slots);
                    proptest::prop_assert!(!own.contains(&slot), "slot {} is a consumer's", slot);
                    let prev = used.insert(slot, lap);
                    proptest::prop_assert_eq!(lap, prev.map_or(0, |p| p + 1));
                }
            }
        }
        proptest::prop_assert!(used.len() as u32 <= depth);
    }
}

/// The profile latencies read off the latency probe come from their own cases, whatever their
/// order or labels: `load_latency_ns` from the chase beside 8 bulk copies on the other SMs,
/// `release_held_ns` from the release after a store beside 1 (never from an own-SM case); a
/// probe without those cases gives neither.
#[test]
fn the_latency_probe_names_the_profile_terms_it_measures() {
    use mkc_backend::gpu::{LatencyProbe, LoadedLatency, ReleaseCost, StreamKind};
    let case = |stream, own_sm, ns: f64| LoadedLatency {
        case: "any label",
        stream,
        own_sm,
        ns,
        release: ReleaseCost {
            after_store_ns: ns + 1.0,
            alone_ns: ns + 2.0,
        },
        stream_gbps: 0.0,
        placed_as_intended: true,
    };
    let idle = ReleaseCost {
        after_store_ns: 0.0,
        alone_ns: 0.0,
    };
    let probe = LatencyProbe {
        idle_ns: 190.0,
        idle_release: idle,
        loaded: vec![
            case(StreamKind::Bulk(8), true, 2600.0),
            case(StreamKind::Bulk(1), true, 500.0),
            case(StreamKind::Bulk(1), false, 426.0),
            case(StreamKind::Loads(8), false, 217.0),
            case(StreamKind::Bulk(8), false, 2211.0),
        ],
    };
    let terms: Vec<(&str, f64)> = probe
        .profile_terms()
        .iter()
        .map(|t| (t.field, t.ns))
        .collect();
    assert_eq!(
        terms,
        vec![
            ("load_latency_ns", 2211.0),
            ("release_held_ns", 427.0),
            ("load_latency_held_ns", 426.0)
        ]
    );
    let without = LatencyProbe {
        loaded: vec![case(StreamKind::Bulk(4), false, 1319.0)],
        ..probe
    };
    assert!(without.profile_terms().is_empty());
}

/// The latency probe's chase visits every line exactly once per lap, from line 0 back to it,
/// through first words only, in an order that is not sequential (so no prefetcher follows it).
#[test]
fn the_latency_chase_is_one_random_cycle_through_every_line() {
    for (lines, words) in [(512usize, 32usize), (7, 4), (2, 1)] {
        let next = mkc_backend::gpu::chase_cycle(lines, words);
        assert_eq!(next.len(), lines * words);
        let mut seen = vec![false; lines];
        let mut at = 0usize;
        let mut sequential = 0;
        for _ in 0..lines {
            assert_eq!(at % words, 0, "links land on first words");
            assert!(!seen[at / words], "line {} visited twice", at / words);
            seen[at / words] = true;
            let to = next[at] as usize;
            if to == at + words {
                sequential += 1;
            }
            at = to;
        }
        assert_eq!(at, 0, "the cycle closes after {lines} links");
        assert!(seen.iter().all(|&s| s));
        if lines >= 64 {
            assert!(sequential < lines / 8, "{sequential} sequential links");
        }
    }
}

/// A probed pair counts as admitted on >= 90% of the SMs, refused on <= 10%, undecided between.
#[test]
fn a_probed_pair_is_judged_by_most_sms() {
    let side = |r| mkc_backend::gpu::ProbeSide {
        name: format!("k_hold_{r}"),
        threads: 288,
        registers: r,
    };
    let pair = |admitted| mkc_backend::gpu::PairProbe {
        resident: side(112),
        visitor: side(88),
        admitted,
        visitors: 132,
    };
    assert_eq!(pair(132).admitted_beside(), Some(true));
    assert_eq!(pair(119).admitted_beside(), Some(true));
    assert_eq!(pair(118).admitted_beside(), None);
    assert_eq!(pair(66).admitted_beside(), None);
    assert_eq!(pair(14).admitted_beside(), None);
    assert_eq!(pair(13).admitted_beside(), Some(false));
    assert_eq!(pair(0).admitted_beside(), Some(false));
}

/// The persistent plan's encoding is the plan: every instruction of every model the kernels
/// run, under each heuristic policy, names its operator's kernel id, layer and task run, and
/// its waits and signals as the plan has them; a plan for another SM count is refused.
#[test]
fn persistent_plans_encode_as_the_scheduler_wrote_them() {
    use mkc_backend::abi::op_id;
    use mkc_backend::persistent_plan::encode;
    for name in [
        "llama1b",
        "models/llama1b_tuned.ron",
        "models/llama3.2-1b.ron",
        "models/llama1b_fused.ron",
    ] {
        let model = if name.ends_with(".ron") {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(name);
            mkc_ir::model::Model::load(&path).unwrap()
        } else {
            llama1b()
        };
        for policy in [
            mkc_scheduler::Policy::RoundRobin,
            mkc_scheduler::Policy::List,
        ] {
            let device = mkc_ir::embedded::resolve_device("h200").unwrap();
            let opts = mkc_scheduler::CompileOptions {
                target: mkc_scheduler::Target::Persistent,
                policy,
                ..mkc_scheduler::CompileOptions::default()
            };
            let s = mkc_scheduler::compile(&model, &device, &opts).schedule;
            let plan = s.persistent().unwrap();
            let e = encode(&s, &model, device.sms).unwrap();
            assert_eq!(e.stream_start.len(), plan.streams.len() + 1);
            assert_eq!(e.counters, s.graph.counters.len());
            for (sm, stream) in plan.streams.iter().enumerate() {
                let range = e.stream_start[sm] as usize..e.stream_start[sm + 1] as usize;
                assert_eq!(range.len(), stream.len());
                for (ins, k) in stream.iter().zip(&e.instrs[range]) {
                    let op = s.graph.op_of(ins.first);
                    assert_eq!(k.op, op_id(op.kind));
                    assert_eq!(mkc_catalogue::ENTRY_POINTS[k.op as usize].1, op.kind);
                    assert_eq!(
                        k.layer as u32,
                        op.layer.unwrap_or(model.geometry.layers - 1)
                    );
                    assert_eq!(k.first as u32 + op.first_task.0, ins.first.0);
                    assert_eq!(k.count as u32, ins.count);
                    // The (counter, amount) pairs of a range of the encoded references.
                    let refs = |at: i32, n: i32| -> Vec<(i32, i32)> {
                        e.refs[at as usize..(at + n) as usize]
                            .iter()
                            .map(|r| (r.counter, r.amount))
                            .collect()
                    };
                    let waits = ins
                        .waits
                        .iter()
                        .map(|w| (w.counter.0 as i32, w.target_per_step as i32));
                    assert_eq!(refs(k.wait0, k.waits), waits.collect::<Vec<_>>());
                    let signals = ins
                        .signals
                        .iter()
                        .map(|x| (x.counter.0 as i32, x.count as i32));
                    assert_eq!(refs(k.signal0, k.signals), signals.collect::<Vec<_>>());
                    // The kernel stages waits and signals as one range of at most its maximum.
                    assert_eq!(k.signal0, k.wait0 + k.waits);
                    assert!((k.waits + k.signals) as u32 <= mkc_catalogue::PERSISTENT_MAX_REFS);
                }
            }
            let err = encode(&s, &model, device.sms + 1).unwrap_err().to_string();
            assert!(err.contains("--sms"), "{err}");
            // A plan lowered from another model (attention inside the O-projection or not:
            // four operators a layer or five) is refused, not launched.
            let mut other = model.clone();
            other.lowering.attention_in_o_proj = match model.lowering.attention_in_o_proj {
                Some(_) => None,
                None => Some(4),
            };
            let err = encode(&s, &other, device.sms).unwrap_err().to_string();
            assert!(err.contains("not of this model"), "{err}");
        }
    }
}

/// Every edge at 1, 2, 4 and 8 VTP shards encodes with each instruction's references within
/// the kernel's staging, and a plan whose instructions need more (a consumer of a residual
/// edge waits on each of its shards) is refused with the field to lower, never launched with
/// references cut off.
#[test]
fn persistent_references_fit_the_kernels_staging_or_are_refused() {
    use mkc_backend::persistent_plan::encode;
    let device = mkc_ir::embedded::resolve_device("h200").unwrap();
    let opts = mkc_scheduler::CompileOptions {
        target: mkc_scheduler::Target::Persistent,
        ..mkc_scheduler::CompileOptions::default()
    };
    let most_refs = |model: &mkc_ir::model::Model| {
        let s = mkc_scheduler::compile(model, &device, &opts).schedule;
        let most = s.persistent().unwrap().streams.iter().flatten();
        let most = most.map(|i| i.waits.len() + i.signals.len()).max().unwrap();
        (most, encode(&s, model, device.sms))
    };
    let with = |edge: usize, shards: u32| {
        let mut model = llama1b();
        let v = &mut model.lowering.vtp_shards;
        *[
            &mut v.qkv_attention,
            &mut v.attention_o_proj,
            &mut v.o_proj_up_gate,
            &mut v.up_gate_down,
            &mut v.down_qkv,
            &mut v.down_lm_head,
        ][edge] = shards;
        model
    };
    for edge in 0..6 {
        for shards in [1, 2, 4, 8] {
            let (most, encoded) = most_refs(&with(edge, shards));
            assert!(most <= mkc_catalogue::PERSISTENT_MAX_REFS as usize);
            encoded.unwrap_or_else(|e| panic!("edge {edge} at {shards} shards: {e}"));
        }
    }
    let (most, encoded) = most_refs(&with(2, 64));
    assert!(most > mkc_catalogue::PERSISTENT_MAX_REFS as usize, "{most}");
    let err = encoded.unwrap_err().to_string();
    assert!(err.contains("lowering.vtp_shards"), "{err}");
}

/// The persistent build holds `k_persistent` and none of the chain's operator kernels (the
/// chain launches the default build's), built with `tuning.persistent_warps` consumer warps
/// whatever the chain's `consumer_warps`; that knob changes no chain kernel's machine code.
/// Its CTA is resident one per SM.
#[test]
fn the_persistent_build_holds_its_kernel_alone_at_its_own_warps() {
    let mut eight = llama1b();
    eight.tuning.persistent_warps = Some(8);
    let (base, base_eight, persistent) = match (
        kernels::compile("sm_90a", &llama1b()),
        kernels::compile("sm_90a", &eight),
        kernels::compile_persistent("sm_90a", &llama1b()),
    ) {
        (Err(mkc_backend::BackendError::NoNvrtc), ..) => {
            eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
            return;
        }
        (a, b, c) => (a.unwrap(), b.unwrap(), c.unwrap()),
    };
    assert!(changed_kernels(&base, &base_eight).is_empty());
    assert!(base.kernels.iter().any(|k| k.name == "k_qkv_rope"));
    let k = persistent
        .kernels
        .iter()
        .find(|k| k.name == mkc_catalogue::PERSISTENT_ENTRY)
        .expect("k_persistent is built");
    assert!(base
        .kernels
        .iter()
        .all(|k| k.name != mkc_catalogue::PERSISTENT_ENTRY));
    assert!(persistent
        .kernels
        .iter()
        .all(|k| kernels::kind_of(&k.name).is_none()));
    assert_eq!(
        k.threads,
        mkc_catalogue::PERSISTENT_WARPS * 32 + 32,
        "its consumers and the producer"
    );
    let mut chain_four = llama1b().tuning;
    chain_four.consumer_warps = Some(4);
    assert_eq!(mkc_catalogue::persistent_threads(&chain_four), k.threads);
    let rules = mkc_simulator::occupancy::ArchRules::for_device(
        &mkc_ir::embedded::resolve_device("h200").unwrap(),
    );
    let occ = mkc_simulator::occupancy::occupancy(
        &rules,
        &mkc_simulator::occupancy::CtaResources {
            threads: k.threads,
            registers: k.registers,
            static_smem: k.static_smem,
            dynamic_smem: mkc_catalogue::persistent_dynamic_smem(&llama1b()),
        },
        None,
    )
    .unwrap();
    assert_eq!(occ.blocks_per_sm, 1);
}

/// The traced persistent build (`--timeline`) compiles, still fits one CTA per SM under its
/// launch bounds, and moves k_persistent's machine code (its marks are compiled in only there).
#[test]
fn the_traced_persistent_build_records_instructions() {
    let (plain, traced) = match (
        kernels::compile_persistent("sm_90a", &llama1b()),
        kernels::compile_persistent_with("sm_90a", &llama1b(), &[("MKC_TRACE", 1)]),
    ) {
        (Err(mkc_backend::BackendError::NoNvrtc), _) => {
            eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
            return;
        }
        (a, b) => (a.unwrap(), b.unwrap()),
    };
    let find = |c: &kernels::Compiled| {
        c.kernels
            .iter()
            .find(|k| k.name == mkc_catalogue::PERSISTENT_ENTRY)
            .cloned()
            .expect("k_persistent is built")
    };
    let (p, t) = (find(&plain), find(&traced));
    assert_ne!(p.code_hash, t.code_hash);
    assert_eq!(t.threads, mkc_catalogue::PERSISTENT_WARPS * 32 + 32);
    assert!(
        t.registers * t.threads <= 65_536,
        "{} registers",
        t.registers
    );
}

/// Every rung of `bench --ablate` builds k_persistent (each removes code from a different
/// place of its bodies), one CTA per SM under its launch bounds, with attention an instruction
/// of its own and inside the O-projection (`models/llama1b_fused.ron`).
#[test]
fn every_persistent_ablation_build_compiles() {
    let fused_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/llama1b_fused.ron");
    let fused = mkc_ir::Model::load(&fused_path).unwrap();
    let builds = mkc_backend::ablation::Ablation::LADDER
        .iter()
        .flat_map(|rung| [(rung, llama1b()), (rung, fused.clone())]);
    for (rung, model) in builds {
        let compiled = match kernels::compile_persistent_with("sm_90a", &model, &rung.defines()) {
            Err(mkc_backend::BackendError::NoNvrtc) => {
                eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
                return;
            }
            c => c.unwrap_or_else(|e| panic!("{} {}: {e}", model.name, rung.label())),
        };
        let k = compiled
            .kernels
            .iter()
            .find(|k| k.name == mkc_catalogue::PERSISTENT_ENTRY)
            .expect("k_persistent is built");
        let threads = mkc_catalogue::persistent_threads(&model.tuning);
        assert_eq!(k.threads, threads, "{} {}", model.name, rung.label());
    }
}

/// k_persistent's machine code hash in a persistent build.
fn k_persistent_hash(c: &kernels::Compiled) -> u64 {
    c.kernels
        .iter()
        .find(|k| k.name == "k_persistent")
        .map(|k| k.code_hash)
        .expect("k_persistent built")
}

/// The persistent producer's limits (between instructions and outside that window) are
/// k_persistent's alone: each changes no chain kernel of the persistent build, a limit of at
/// least the ring's slots compiles to the unlimited producer (the same machine code whatever
/// the value), and a smaller one to another.
#[test]
fn producer_limits_change_only_k_persistent() {
    type Knob = fn(&mut Tuning, u32);
    let knobs: [(&str, Knob); 2] = [
        ("persistent_boundary_inflight", |t, v| {
            t.persistent_boundary_inflight = Some(v)
        }),
        ("persistent_stream_inflight", |t, v| {
            t.persistent_stream_inflight = Some(v)
        }),
    ];
    let persistent = k_persistent_hash;
    for (name, set) in knobs {
        let build = |inflight: u32| {
            let mut m = llama1b();
            m.tuning.persistent_slots = Some(10);
            set(&mut m.tuning, inflight);
            kernels::compile_persistent("sm_90a", &m)
        };
        let limited = match build(2) {
            Err(mkc_backend::BackendError::NoNvrtc) => {
                eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
                return;
            }
            other => other.unwrap(),
        };
        let (at_slots, above) = (build(10).unwrap(), build(16).unwrap());
        assert!(changed_kernels(&limited, &above).is_empty(), "{name}");
        assert_ne!(persistent(&limited), persistent(&above), "{name}");
        assert_eq!(persistent(&at_slots), persistent(&above), "{name}");
    }
    // With the stream capped, a hold of at least the ring's slots is no hold either.
    let capped = |held: u32| {
        let mut m = llama1b();
        m.tuning.persistent_slots = Some(10);
        m.tuning.persistent_stream_inflight = Some(2);
        m.tuning.persistent_boundary_inflight = Some(held);
        kernels::compile_persistent("sm_90a", &m).unwrap()
    };
    assert_eq!(persistent(&capped(10)), persistent(&capped(16)));
    assert_ne!(persistent(&capped(1)), persistent(&capped(16)));
}

/// The persistent producer's L2 warming is k_persistent's alone and off by default: 0 pages
/// builds the machine code of a tuning that leaves the knob unset, and any other depth
/// changes k_persistent only (the sink it lands in moves the work region, not the ring).
#[test]
fn warm_pages_change_only_k_persistent() {
    let build = |warm: Option<u32>| {
        let mut m = llama1b();
        m.tuning.persistent_warm_pages = warm;
        kernels::compile_persistent("sm_90a", &m)
    };
    let unset = match build(None) {
        Err(mkc_backend::BackendError::NoNvrtc) => {
            eprintln!("SKIPPED: no NVRTC library found (set LD_LIBRARY_PATH to an NVRTC 13 lib directory)");
            return;
        }
        other => other.unwrap(),
    };
    let hash = k_persistent_hash;
    assert_eq!(hash(&build(Some(0)).unwrap()), hash(&unset));
    let warm = build(Some(8)).unwrap();
    assert!(changed_kernels(&unset, &warm).is_empty());
    assert_ne!(hash(&warm), hash(&unset));
    let slots = |warm: Option<u32>| {
        let mut m = llama1b();
        m.tuning.persistent_warm_pages = warm;
        mkc_catalogue::persistent_layout(&m).unwrap().slots
    };
    assert_eq!(slots(Some(8)), slots(None));
}
