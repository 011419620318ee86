//! Helpers shared by the integration tests: random valid models for property tests, and a
//! scratch directory that the test process removes when it exits.

#![allow(dead_code)]

use mkc_ir::model::{Dtype, Geometry, KernelResources, Lowering, VtpShards, Workload};
use mkc_ir::Model;
use proptest::prelude::*;

/// Divisors of `n`, ascending.
pub fn divisors(n: u32) -> Vec<u32> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// Picks an element of `options` from an arbitrary index.
fn pick(options: &[u32], index: usize) -> u32 {
    options[index % options.len()]
}

/// A strategy for random *valid* Llama-shaped models with random page sizes, tasks and shard
/// counts. Dimensions are powers of two times small factors; the few combinations whose pages
/// would not tile an operator are filtered out by validation itself.
pub fn arb_model() -> impl Strategy<Value = Model> {
    (
        (
            prop::sample::select(vec![8u32, 16, 32]),
            1u32..=4,
            prop::sample::select(vec![1u32, 2, 4]),
            1u32..=3,
            prop::sample::select(vec![1u32, 2, 4]),
            1u32..=4,
        ),
        (
            prop::sample::select(vec![256u32, 512, 1024, 2048, 4096]),
            prop::sample::select(vec![1u32, 2, 4]),
            prop::sample::select(vec![1u32, 2, 4]),
        ),
        prop::collection::vec(any::<usize>(), 10),
    )
        .prop_map(
            |(
                (head_dim, kv_heads, group, layers, inter_mult, vocab_tiles),
                (page_bytes, task_pages, lm_task_pages),
                idx,
            )| {
                let heads = kv_heads * group;
                let hidden = heads * head_dim;
                let intermediate = hidden * inter_mult;
                let vocab = 32 * vocab_tiles * 3;
                let split = pick(&divisors(group), idx[2]);
                let hp = group / split;
                let mut m = Model {
                    name: "random".into(),
                    geometry: Geometry {
                        hidden,
                        intermediate,
                        checkpoint_intermediate: None,
                        checkpoint_head_dim: None,
                        layers,
                        heads,
                        kv_heads,
                        head_dim,
                        vocab,
                        rope_theta: 10000.0,
                        rope_scaling: None,
                        norm_eps: 1e-5,
                        tied_embeddings: true,
                        dtype: Dtype::Bf16,
                    },
                    workload: Workload {
                        prompt_len: 4,
                        generate: 4,
                        max_seq_len: 16,
                    },
                    lowering: Lowering {
                        page_bytes,
                        matvec_task_pages: task_pages,
                        lm_head_task_pages: lm_task_pages,
                        attention_split: split,
                        // Split-KV: a history dealt over up to 4 parts (16 positions at most).
                        attention_kv_split: Some(pick(&[1, 1, 2, 3, 4], idx[9])),
                        attention_in_o_proj: None,
                        vtp_shards: VtpShards {
                            qkv_attention: 1,
                            attention_o_proj: pick(&divisors(heads / hp), idx[4]),
                            o_proj_up_gate: 1,
                            up_gate_down: pick(&divisors(inter_mult * 4), idx[6]),
                            down_qkv: 1,
                            down_lm_head: 1,
                        },
                        kernel: KernelResources::default(),
                    },
                    tuning: Default::default(),
                };
                // The other edges' shard counts: divisors of their tensor's producer tasks.
                let edges = mkc_ir::lower::shard_edges(&m);
                let pick_shards = |field: &str, i: usize| {
                    let e = edges.iter().find(|e| e.field == field).expect("edge");
                    let tasks = (e.rows / e.producer_tile_rows.max(1) as u64).max(1) as u32;
                    pick(&divisors(tasks), i)
                };
                let v = &mut m.lowering.vtp_shards;
                v.qkv_attention = pick_shards("qkv_attention", idx[3]);
                v.o_proj_up_gate = pick_shards("o_proj_up_gate", idx[5]);
                v.down_qkv = pick_shards("down_qkv", idx[7]);
                v.down_lm_head = pick_shards("down_lm_head", idx[8]);
                m
            },
        )
        .prop_filter("pages tile every operator", |m| {
            m.validate("random").is_ok()
        })
}

/// A strategy for random valid models with attention inside the O-projection
/// (`lowering.attention_in_o_proj`): [`arb_model`]'s, with one KV part, the edges it removes or
/// zeroes across at one shard, and a random divisor of a K chunk's pages as its tasks per
/// attention task.
pub fn arb_fused_model() -> impl Strategy<Value = Model> {
    (arb_model(), any::<usize>())
        .prop_map(|(mut m, i)| {
            let l = &mut m.lowering;
            l.attention_kv_split = None;
            l.vtp_shards.attention_o_proj = 1;
            l.vtp_shards.qkv_attention = 1;
            l.attention_in_o_proj = Some(1);
            let pages =
                mkc_ir::work::matvec(&m, mkc_ir::OpKind::OProj).map_or(1, |w| w.chunk_pages());
            m.lowering.attention_in_o_proj = Some(pick(&divisors(pages), i));
            // o_proj_up_gate's shards must hold whole O-projection tasks' rows.
            let edges = mkc_ir::lower::shard_edges(&m);
            let e = edges
                .iter()
                .find(|e| e.field == "o_proj_up_gate")
                .expect("edge");
            let tasks = (e.rows / e.producer_tile_rows.max(1) as u64).max(1) as u32;
            m.lowering.vtp_shards.o_proj_up_gate = pick(&divisors(tasks), i / 7);
            m
        })
        .prop_filter("attention inside the O-projection validates", |m| {
            m.validate("random").is_ok()
        })
}

/// The embedded H200 profile with `sms` SMs.
pub fn device(sms: u32) -> mkc_ir::device::DeviceProfile {
    mkc_ir::embedded::resolve_device("h200")
        .expect("embedded h200 profile parses")
        .with_sms(sms)
}

/// Runs the `mkc` binary on `args` with no stdin, killing it and failing the test after
/// `limit` (a hang is a failure, not a slow test).
pub fn mkc_within(args: &[&str], limit: std::time::Duration) -> std::process::Output {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_mkc"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mkc starts");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            r.read_to_end(&mut b).ok();
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break s;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            panic!("mkc {args:?} ran past {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    std::process::Output {
        status,
        stdout: out.join().expect("drained"),
        stderr: err.join().expect("drained"),
    }
}

/// This test process's scratch directory, created on first use.
static SCRATCH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Removes the scratch directory: registered with `atexit`, so that a test binary leaves
/// nothing behind in the temp directory (forty CI runs once filled a disk with them).
extern "C" fn remove_scratch() {
    if let Some(dir) = SCRATCH.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The path `name` in this test process's scratch directory (`mkc-test-PID` in the temp
/// directory), which the process removes when it exits.
pub fn scratch(name: &str) -> std::path::PathBuf {
    SCRATCH
        .get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("mkc-test-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            // SAFETY: registers a plain function that only removes a directory.
            unsafe { libc::atexit(remove_scratch) };
            dir
        })
        .join(name)
}
