//! Helpers shared by the integration tests: random valid models for property tests.

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

/// A strategy for random *valid* Llama-shaped models with random tilings and shard counts.
pub fn arb_model() -> impl Strategy<Value = Model> {
    (
        (
            prop::sample::select(vec![8u32, 16, 32]),
            1u32..=4,
            prop::sample::select(vec![1u32, 2, 4]),
            1u32..=3,
            1u32..=3,
            1u32..=4,
        ),
        prop::collection::vec(any::<usize>(), 9),
    )
        .prop_map(
            |((head_dim, kv_heads, group, layers, inter_mult, vocab_tiles), idx)| {
                let heads = kv_heads * group;
                let hidden = heads * head_dim;
                let intermediate = hidden * inter_mult;
                let t = pick(&divisors(head_dim), idx[0]);
                let lm_tile = pick(&[8, 16, 32], idx[1]);
                let vocab = lm_tile * vocab_tiles * 3;
                let split = pick(&divisors(group), idx[2]);
                let hp = group / split;
                let qkv_rows = (heads + 2 * kv_heads) * head_dim;
                let shard = |rows: u32, tile: u32, i: usize| pick(&divisors(rows / tile), i);
                let vtp = VtpShards {
                    qkv_attention: shard(qkv_rows, t, idx[3]),
                    attention_o_proj: shard(heads * head_dim, hp * head_dim, idx[4]),
                    o_proj_up_gate: shard(hidden, t, idx[5]),
                    up_gate_down: shard(intermediate, t, idx[6]),
                    down_qkv: shard(hidden, t, idx[7]),
                    down_lm_head: shard(hidden, t, idx[8]),
                };
                Model {
                    name: "random".into(),
                    geometry: Geometry {
                        hidden,
                        intermediate,
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
                        matvec_tile_rows: t,
                        lm_head_tile_rows: lm_tile,
                        attention_split: split,
                        vtp_shards: vtp,
                        kernel: KernelResources::default(),
                    },
                    tuning: Default::default(),
                }
            },
        )
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
