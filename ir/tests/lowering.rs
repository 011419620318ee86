//! Lowering of the embedded Llama-3.2-1B: the shapes the anchors describe, tile by tile.

use mkc_ir::embedded::resolve_model;
use mkc_ir::lower::lower;
use mkc_ir::OpKind;

#[test]
fn llama1b_weight_bytes_match_the_anchor_figure() {
    let m = resolve_model("llama1b").unwrap();
    // anchors.md: 2,471,628,800 B (matrices and RMSNorm weights, bf16).
    assert_eq!(m.weight_bytes(), 2_471_628_800);
    assert_eq!(lower(&m).task_weight_bytes(), 2_471_628_800);
}

#[test]
fn llama1b_has_81_operators_in_layer_order() {
    let g = lower(&resolve_model("llama1b").unwrap());
    assert_eq!(g.ops.len(), 81);
    let kinds = [
        OpKind::QkvRope,
        OpKind::Attention,
        OpKind::OProj,
        OpKind::UpGate,
        OpKind::Down,
    ];
    for (i, op) in g.ops[..80].iter().enumerate() {
        assert_eq!(op.kind, kinds[i % 5]);
        assert_eq!(op.layer, Some(i as u32 / 5));
        assert_eq!(op.embed_fused, i == 0);
    }
    assert_eq!(g.ops[80].kind, OpKind::LmHead);
}

#[test]
fn vtp_shards_on_the_mlp_edge_split_down_by_k() {
    let g = lower(&resolve_model("llama1b").unwrap());
    let down = g.ops.iter().find(|o| o.kind == OpKind::Down).unwrap();
    assert_eq!(down.k_split, 4);
    // A K chunk of 2048 columns: 4 rows per 16 KiB page, one page per task.
    assert_eq!(down.tasks, 4 * 2048 / 4);
    let edge = g
        .edges
        .iter()
        .find(|e| e.consumer == down.id && !e.implied())
        .unwrap();
    assert_eq!(edge.shards, 4);
    for (shard, &c) in edge.counters.iter().enumerate() {
        let counter = g.counter(c);
        // 8192 / 4 = 2048 rows per shard = 1024 up/gate tasks of 2 rows (one page of 2 gate
        // and 2 up rows).
        assert_eq!(counter.signals_per_step, 1024);
        assert_eq!(counter.access.rows.start, shard as u32 * 2048);
    }
    for t in g.tasks_of(down.id) {
        // A down task waits for its own K chunk only (one 16 KiB page: 4 x 2048 bf16), and
        // writes its rows of its chunk's partial block.
        assert_eq!(t.waits[..], [edge.counters[t.k_chunk as usize]]);
        assert_eq!(t.cost.weight_bytes, 4 * 2048 * 2);
        let w = t.writes[0];
        assert_eq!(g.tensors[w.tensor.index()].name, "L0.d_part");
        assert_eq!(w.rows.start / 2048, t.k_chunk);
        assert_eq!(w.rows.len(), 4);
    }
}

#[test]
fn whole_tensor_edges_wait_for_every_producer_tile() {
    let g = lower(&resolve_model("llama1b").unwrap());
    let qkv1 = g
        .ops
        .iter()
        .find(|o| o.kind == OpKind::QkvRope && o.layer == Some(1))
        .unwrap();
    let mut share_rows = 0;
    for t in g.tasks_of(qkv1.id) {
        assert_eq!(t.waits.len(), 1);
        // All 2048 split-K down tasks of layer 0 write its partials, which QKV sums with
        // x_mid: it reads both whole.
        assert_eq!(g.counter(t.waits[0]).signals_per_step, 2048);
        let names: Vec<&str> = t
            .reads
            .iter()
            .map(|r| g.tensors[r.tensor.index()].name.as_str())
            .collect();
        assert_eq!(names, ["L0.x_mid", "L0.d_part"]);
        // Each task stores its share of the summed stream x_in (whole float4 groups).
        for w in t
            .writes
            .iter()
            .filter(|w| g.tensors[w.tensor.index()].name == "L1.x_in")
        {
            assert_eq!(w.rows.start % 4, 0);
            share_rows += w.rows.len();
        }
    }
    assert_eq!(share_rows, 2048, "the shares cover x_in once");
    let attention = g.ops.iter().find(|o| o.kind == OpKind::Attention).unwrap();
    assert_eq!(attention.tasks, 8, "one task per KV head");
    for t in g.tasks_of(attention.id) {
        assert_eq!(t.cost.kv_bytes_per_token, 2 * 64 * 2);
    }
}

/// Split-KV: each (KV head, query group) becomes `attention_kv_split` tasks, one per part of
/// the history, whose KV reads tile it; each writes its heads' records of its part, and each
/// O-projection task reads every part's records of the heads its K chunk covers, waiting on
/// the shard that holds them.
#[test]
fn split_kv_attention_deals_the_history_and_the_o_projection_reads_every_part() {
    let mut m = resolve_model("llama1b").unwrap();
    m.lowering.attention_split = 4;
    m.lowering.attention_kv_split = Some(4);
    m.lowering.vtp_shards.attention_o_proj = 4;
    m.validate("split").unwrap();
    let g = lower(&m);
    let (hd, heads) = (m.geometry.head_dim, m.geometry.heads);
    let record = mkc_ir::work::attention_part_record(hd);
    let attention = g.ops.iter().find(|o| o.kind == OpKind::Attention).unwrap();
    assert_eq!(
        attention.tasks,
        8 * 4 * 4,
        "KV heads x query groups x parts"
    );
    let attn = &g.tensors[g.task(attention.first_task).writes[0].tensor.index()];
    assert_eq!(attn.rows as u64, heads as u64 * 4 * record as u64);
    let mut written = vec![0u32; attn.rows as usize];
    for (i, t) in g.tasks_of(attention.id).enumerate() {
        assert_eq!((t.cost.kv_part, t.cost.kv_parts), (i as u32 % 4, 4));
        for w in &t.writes {
            for r in w.rows.start..w.rows.end {
                written[r as usize] += 1;
            }
        }
    }
    assert!(
        written.iter().all(|&n| n == 1),
        "the records tile the tensor once"
    );
    // The parts of one group read the whole history once between them.
    let group: Vec<_> = g.tasks_of(attention.id).take(4).collect();
    for len in [1, 33, 160, 1056] {
        let total: u32 = group.iter().map(|t| t.cost.kv_positions(len)).sum();
        assert_eq!(total, len);
    }
    let o_proj = g.ops.iter().find(|o| o.kind == OpKind::OProj).unwrap();
    for t in g.tasks_of(o_proj.id) {
        let r = t.reads[0];
        assert_eq!(r.tensor, attn.id);
        // K chunk c covers heads [8c, 8c + 8): every part's record of each.
        let (h0, h1) = (t.k_chunk * 8, t.k_chunk * 8 + 8);
        assert_eq!(
            r.rows.start as u64,
            mkc_ir::work::attention_part_row(h0, 0, 4, hd)
        );
        assert_eq!(
            r.rows.end as u64,
            mkc_ir::work::attention_part_row(h1, 0, 4, hd)
        );
        assert_eq!(t.waits.len(), 1, "one shard: its heads' records");
    }
    // A shard count that would split a head group's records is refused, naming the field.
    m.lowering.vtp_shards.attention_o_proj = 64;
    let err = m.validate("split").unwrap_err().to_string();
    assert!(err.contains("vtp_shards.attention_o_proj"), "{err}");
}

/// Attention inside the O-projection: no attention operator; the O-projection has a K chunk per
/// attention task (its query heads' columns) dealt over `attention_in_o_proj` tasks, each
/// reading those heads' q, k and v and the KV history, and adding its rows into one vector
/// that QKV's tasks zero in shares; up/gate reads that vector whole, waiting on the
/// O-projection's counter. Each K chunk's tasks add into every row once.
#[test]
fn attention_inside_the_o_projection_adds_every_chunk_into_one_zeroed_vector() {
    let mut m = resolve_model("llama1b").unwrap();
    m.lowering.attention_split = 4;
    m.lowering.attention_in_o_proj = Some(4);
    m.validate("fused").unwrap();
    let g = lower(&m);
    let (hidden, hd) = (m.geometry.hidden, m.geometry.head_dim);
    assert!(g.ops.iter().all(|o| o.kind != OpKind::Attention));
    assert_eq!(m.lowering.ops_per_layer(), 4);
    assert_eq!(g.ops.len() as u32, 4 * m.geometry.layers + 1);
    let unfused = resolve_model("llama1b").unwrap();
    assert_eq!(unfused.lowering.ops_per_layer(), 5);
    assert_eq!(
        lower(&unfused).ops.len() as u32,
        5 * unfused.geometry.layers + 1
    );
    assert_eq!(g.task_weight_bytes(), m.weight_bytes());
    let o_proj = g.ops.iter().find(|o| o.kind == OpKind::OProj).unwrap();
    let qkv = g.ops.iter().find(|o| o.kind == OpKind::QkvRope).unwrap();
    assert_eq!((o_proj.tasks, o_proj.k_split), (32 * 4, 32));
    let o_sum = g.task(o_proj.first_task).accumulates[0].tensor;
    assert_eq!(g.tensors[o_sum.index()].rows, hidden);
    assert_eq!(g.tensors[o_sum.index()].producer, Some(o_proj.id));
    let mut added = vec![0u32; hidden as usize];
    for t in g.tasks_of(o_proj.id) {
        assert!(t.writes.is_empty(), "an O-projection task stores nothing");
        assert_eq!(t.accumulates.len(), 1);
        for r in t.accumulates[0].rows.start..t.accumulates[0].rows.end {
            added[r as usize] += 1;
        }
        // Its query head's q, then its KV head's k and v.
        let (q, k) = (t.reads[0].rows, t.reads[1].rows);
        assert_eq!((q.start, q.len()), (t.k_chunk * hd, hd));
        assert_eq!(k.start, m.q_dim() + t.k_chunk / 4 * hd);
        assert_eq!(t.cost.kv_bytes_per_token, 2 * hd as u64 * 2);
        assert_eq!(t.waits.len(), 1, "all of QKV: one shard");
    }
    assert!(
        added.iter().all(|&n| n == 32),
        "each chunk adds into every row once"
    );
    let mut zeroed = vec![0u32; hidden as usize];
    for t in g.tasks_of(qkv.id) {
        for w in t.writes.iter().filter(|w| w.tensor == o_sum) {
            for r in w.rows.start..w.rows.end {
                zeroed[r as usize] += 1;
            }
        }
    }
    assert!(
        zeroed.iter().all(|&n| n == 1),
        "QKV's shares zero the vector once"
    );
    let up_gate = g.ops.iter().find(|o| o.kind == OpKind::UpGate).unwrap();
    let first = g.task(up_gate.first_task);
    assert!(first
        .reads
        .iter()
        .any(|r| r.tensor == o_sum && r.rows.len() == hidden));
    // Options it cannot combine with are refused, naming the field.
    let mut split = m.clone();
    split.lowering.attention_kv_split = Some(2);
    let err = split.validate("fused").unwrap_err().to_string();
    assert!(
        err.contains("attention_in_o_proj") && err.contains("attention_kv_split"),
        "{err}"
    );
    let mut uneven = m.clone();
    uneven.lowering.attention_in_o_proj = Some(3);
    let err = uneven.validate("fused").unwrap_err().to_string();
    assert!(
        err.contains("attention_in_o_proj") && err.contains("16 pages"),
        "{err}"
    );
}

/// RoPE frequencies follow Hugging Face's Llama 3 scaling (values from its formula in f64):
/// pairs of short wavelength kept, long ones divided by the factor, those between interpolated.
#[test]
fn llama3_rope_scaling_matches_the_reference_formula() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/llama3.2-1b.ron"
    ))
    .unwrap();
    let scaled = mkc_ir::Model::parse("llama3.2-1b.ron", &text).unwrap();
    let plain = mkc_ir::embedded::resolve_model("llama1b").unwrap();
    for (pair, hf_plain, hf_scaled) in [
        (0u32, 1.0f64, 1.0f64),
        (8, 0.03760603093086393, 0.03760603093086393),
        (16, 0.001414213562373095, 0.00042955679655936815),
        (20, 0.0002742481756762073, 8.570255489881478e-06),
        (24, 5.318295896944988e-05, 1.6619674677953088e-06),
        (31, 3.013858152139171e-06, 9.41830672543491e-08),
    ] {
        let close = |a: f32, b: f64| ((a as f64 - b) / b).abs() < 2e-5;
        assert!(
            close(plain.rope_freq(pair), hf_plain),
            "plain pair {pair}: {}",
            plain.rope_freq(pair)
        );
        assert!(
            close(scaled.rope_freq(pair), hf_scaled),
            "scaled pair {pair}: {}",
            scaled.rope_freq(pair)
        );
    }
    // A scaling that cannot be right is refused by field.
    let bad = text.replace("high_freq_factor: 4.0", "high_freq_factor: 0.5");
    let err = mkc_ir::Model::parse("bad.ron", &bad)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("geometry.rope_scaling.high_freq_factor"),
        "{err}"
    );
}
