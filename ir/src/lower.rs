//! Lowering: a validated [`Model`] becomes the tiled task DAG of one decode step.
//!
//! Per layer, five fused operators (QKV+RoPE, attention, O-proj, up/gate, down), then the LM
//! head with fused argmax; the embedding gather is fused into layer 0's QKV. Every tile records
//! its reads, writes and bytes; edges get one counter per VTP shard, and split-K consumers take
//! one K chunk per shard so they wait only for the shard they read.

use crate::graph::{
    Access, Counter, Edge, OpKind, Operator, Rows, Task, TaskCost, TaskGraph, Tensor,
};
use crate::ids::{CounterId, EdgeId, OpId, TaskId, TensorId};
use crate::model::Model;

/// Lowers a validated model into its task graph.
///
/// # Panics
/// Only on a model that [`Model::validate`] would reject (an internal bug, not user input).
pub fn lower(model: &Model) -> TaskGraph {
    let mut b = Builder::new(model);
    let g = &model.geometry;
    let shards = &model.lowering.vtp_shards;
    let mut x = b.tensor("embed_row".into(), g.hidden, None);
    let mut prev_down: Option<OpId> = None;
    for layer in 0..g.layers {
        let qkv = b.qkv(layer, x);
        if let Some(down) = prev_down {
            b.connect(down, qkv.op, x, shards.down_qkv);
        }
        let attn = b.attention(layer, qkv.out);
        b.connect(qkv.op, attn.op, qkv.out, shards.qkv_attention);
        let o_proj = b.o_proj(layer, attn.out, x);
        b.connect(attn.op, o_proj.op, attn.out, shards.attention_o_proj);
        if let Some(down) = prev_down {
            b.imply(down, o_proj.op, x);
        }
        let up_gate = b.up_gate(layer, o_proj.out);
        b.connect(o_proj.op, up_gate.op, o_proj.out, shards.o_proj_up_gate);
        let down = b.down(layer, up_gate.out, o_proj.out);
        b.connect(up_gate.op, down.op, up_gate.out, shards.up_gate_down);
        b.imply(o_proj.op, down.op, o_proj.out);
        x = down.out;
        prev_down = Some(down.op);
    }
    let lm = b.lm_head(x);
    if let Some(down) = prev_down {
        b.connect(down, lm, x, shards.down_lm_head);
    }
    b.finish()
}

/// Number of tasks the lowering of `model` produces (used to refuse absurd tilings early).
pub fn task_count(model: &Model) -> u64 {
    let (g, l) = (&model.geometry, &model.lowering);
    let t = l.matvec_tile_rows as u64;
    let s = &l.vtp_shards;
    let per_layer = model.qkv_rows() as u64 / t
        + g.kv_heads as u64 * l.attention_split as u64
        + g.hidden as u64 / t * s.attention_o_proj as u64
        + g.intermediate as u64 / t
        + g.hidden as u64 / t * s.up_gate_down as u64;
    g.layers as u64 * per_layer + g.vocab as u64 / l.lm_head_tile_rows as u64
}

/// The shape facts of one shardable edge, shared by validation and lowering.
#[derive(Clone, Debug)]
pub struct ShardEdgeSpec {
    /// Field name under `lowering.vtp_shards`.
    pub field: &'static str,
    /// Configured shard count.
    pub shards: u32,
    /// Name of the tensor the edge carries.
    pub tensor: &'static str,
    /// Rows of that tensor.
    pub rows: u32,
    /// Rows each producer tile writes.
    pub producer_tile_rows: u32,
}

/// Every shardable edge of a layer (and the LM head's input edge) with its shape facts.
pub fn shard_edges(model: &Model) -> Vec<ShardEdgeSpec> {
    let (g, l) = (&model.geometry, &model.lowering);
    let s = &l.vtp_shards;
    let t = l.matvec_tile_rows;
    let attn_tile = model.heads_per_attention_task() * g.head_dim;
    let spec = |field, shards, tensor, rows, producer_tile_rows| ShardEdgeSpec {
        field,
        shards,
        tensor,
        rows,
        producer_tile_rows,
    };
    vec![
        spec("qkv_attention", s.qkv_attention, "qkv", model.qkv_rows(), t),
        spec(
            "attention_o_proj",
            s.attention_o_proj,
            "attn",
            model.q_dim(),
            attn_tile,
        ),
        spec("o_proj_up_gate", s.o_proj_up_gate, "x_mid", g.hidden, t),
        spec("up_gate_down", s.up_gate_down, "h", g.intermediate, t),
        spec("down_qkv", s.down_qkv, "x", g.hidden, t),
        spec("down_lm_head", s.down_lm_head, "x", g.hidden, t),
    ]
}

/// What one tile of an operator is, before it gets an id.
struct TileSpec {
    row_tile: u32,
    k_chunk: u32,
    reads: Vec<Access>,
    writes: Vec<Access>,
    cost: TaskCost,
}

/// What an operator is, before its tiles are built.
struct OpHead<'a> {
    kind: OpKind,
    layer: Option<u32>,
    embed_fused: bool,
    k_split: u32,
    out_name: &'a str,
    out_rows: u32,
}

/// An operator just added and the tensor it writes.
struct Added {
    op: OpId,
    out: TensorId,
}

struct Builder<'m> {
    model: &'m Model,
    /// Bytes per element.
    e: u64,
    g: TaskGraph,
}

fn whole(tensor: TensorId, rows: u32) -> Access {
    Access {
        tensor,
        rows: Rows::new(0, rows),
    }
}

fn part(tensor: TensorId, start: u32, len: u32) -> Access {
    Access {
        tensor,
        rows: Rows::new(start, start + len),
    }
}

impl<'m> Builder<'m> {
    fn new(model: &'m Model) -> Self {
        let w = &model.workload;
        Builder {
            model,
            e: model.geometry.dtype.bytes(),
            g: TaskGraph {
                model: model.name.clone(),
                ops: Vec::new(),
                tensors: Vec::new(),
                tasks: Vec::new(),
                edges: Vec::new(),
                counters: Vec::new(),
                model_weight_bytes: model.weight_bytes(),
                typical_kv_len: w.prompt_len + w.generate / 2,
            },
        }
    }

    fn finish(self) -> TaskGraph {
        self.g
    }

    fn tensor(&mut self, name: String, rows: u32, producer: Option<OpId>) -> TensorId {
        let id = TensorId::from_index(self.g.tensors.len());
        self.g.tensors.push(Tensor {
            id,
            name,
            rows,
            producer,
        });
        id
    }

    fn rows_of(&self, t: TensorId) -> u32 {
        self.g.tensors[t.index()].rows
    }

    /// Adds an operator writing a new tensor `out_name` of `out_rows`; `tiles` builds its
    /// tiles given the output tensor's id.
    fn op(
        &mut self,
        head: OpHead<'_>,
        tiles: impl FnOnce(&Self, TensorId) -> Vec<TileSpec>,
    ) -> Added {
        let OpHead {
            kind,
            layer,
            embed_fused,
            k_split,
            out_name,
            out_rows,
        } = head;
        let op = OpId::from_index(self.g.ops.len());
        let name = match layer {
            Some(l) => format!("L{l}.{out_name}"),
            None => out_name.to_string(),
        };
        let out = self.tensor(name, out_rows, Some(op));
        let specs = tiles(self, out);
        let first_task = TaskId::from_index(self.g.tasks.len());
        for (tile, spec) in specs.into_iter().enumerate() {
            let id = TaskId::from_index(self.g.tasks.len());
            self.g.tasks.push(Task {
                id,
                op,
                tile: tile as u32,
                row_tile: spec.row_tile,
                k_chunk: spec.k_chunk,
                reads: spec.reads,
                writes: spec.writes,
                waits: Vec::new(),
                signals: Vec::new(),
                cost: spec.cost,
            });
        }
        let tasks = self.g.tasks.len() as u32 - first_task.0;
        self.g.ops.push(Operator {
            id: op,
            kind,
            layer,
            embed_fused,
            first_task,
            tasks,
            k_split,
        });
        Added { op, out }
    }

    /// RMSNorm + QKV + RoPE + KV append, reading the residual stream `x`.
    fn qkv(&mut self, layer: u32, x: TensorId) -> Added {
        let (m, e) = (self.model, self.e);
        let g = &m.geometry;
        let t = m.lowering.matvec_tile_rows;
        let hidden = g.hidden as u64;
        let q_dim = m.q_dim();
        self.op(
            OpHead {
                kind: OpKind::QkvRope,
                layer: Some(layer),
                embed_fused: layer == 0,
                k_split: 1,
                out_name: "qkv",
                out_rows: m.qkv_rows(),
            },
            |_, out| {
                (0..m.qkv_rows() / t)
                    .map(|i| {
                        let is_kv = i * t >= q_dim;
                        let norm = if i == 0 { hidden * e } else { 0 };
                        TileSpec {
                            row_tile: i,
                            k_chunk: 0,
                            reads: vec![whole(x, g.hidden)],
                            writes: vec![part(out, i * t, t)],
                            cost: TaskCost {
                                weight_bytes: t as u64 * hidden * e + norm,
                                activation_read_bytes: hidden * e,
                                write_bytes: t as u64 * e * if is_kv { 2 } else { 1 },
                                flops: 2 * t as u64 * hidden,
                                ..TaskCost::default()
                            },
                        }
                    })
                    .collect()
            },
        )
    }

    /// Decode attention: one task per (KV head, query-head group).
    fn attention(&mut self, layer: u32, qkv: TensorId) -> Added {
        let (m, e) = (self.model, self.e);
        let g = &m.geometry;
        let hd = g.head_dim;
        let hp = m.heads_per_attention_task();
        let (q_dim, kv_dim) = (m.q_dim(), m.kv_dim());
        let split = m.lowering.attention_split;
        self.op(
            OpHead {
                kind: OpKind::Attention,
                layer: Some(layer),
                embed_fused: false,
                k_split: 1,
                out_name: "attn",
                out_rows: q_dim,
            },
            |_, out| {
                let mut tiles = Vec::new();
                for kv_head in 0..g.kv_heads {
                    for s in 0..split {
                        let q_head = kv_head * hp * split + s * hp;
                        tiles.push(TileSpec {
                            row_tile: kv_head * split + s,
                            k_chunk: 0,
                            reads: vec![
                                part(qkv, q_head * hd, hp * hd),
                                part(qkv, q_dim + kv_head * hd, hd),
                                part(qkv, q_dim + kv_dim + kv_head * hd, hd),
                            ],
                            writes: vec![part(out, q_head * hd, hp * hd)],
                            cost: TaskCost {
                                activation_read_bytes: (hp as u64 + 2) * hd as u64 * e,
                                write_bytes: hp as u64 * hd as u64 * e,
                                kv_bytes_per_token: 2 * hd as u64 * e,
                                flops_per_token: 4 * hp as u64 * hd as u64,
                                ..TaskCost::default()
                            },
                        });
                    }
                }
                tiles
            },
        )
    }

    /// A split-K matvec with residual add: `k_split` chunks (major) x row tiles (minor).
    /// Chunk 0 also reads the residual rows.
    #[allow(clippy::too_many_arguments)]
    fn split_k_matvec(
        &mut self,
        kind: OpKind,
        layer: u32,
        out_name: &str,
        input: TensorId,
        residual: TensorId,
        k_split: u32,
    ) -> Added {
        let (m, e) = (self.model, self.e);
        let t = m.lowering.matvec_tile_rows;
        let hidden = m.geometry.hidden;
        let k_rows = self.rows_of(input);
        let chunk = k_rows / k_split;
        self.op(
            OpHead {
                kind,
                layer: Some(layer),
                embed_fused: false,
                k_split,
                out_name,
                out_rows: hidden,
            },
            |_, out| {
                let mut tiles = Vec::new();
                for c in 0..k_split {
                    for r in 0..hidden / t {
                        let mut reads = vec![part(input, c * chunk, chunk)];
                        if c == 0 {
                            reads.push(part(residual, r * t, t));
                        }
                        let residual_bytes = if c == 0 { t as u64 * e } else { 0 };
                        tiles.push(TileSpec {
                            row_tile: r,
                            k_chunk: c,
                            reads,
                            writes: vec![part(out, r * t, t)],
                            cost: TaskCost {
                                weight_bytes: t as u64 * chunk as u64 * e,
                                activation_read_bytes: chunk as u64 * e + residual_bytes,
                                write_bytes: t as u64 * e,
                                flops: 2 * t as u64 * chunk as u64,
                                ..TaskCost::default()
                            },
                        });
                    }
                }
                tiles
            },
        )
    }

    fn o_proj(&mut self, layer: u32, attn: TensorId, residual: TensorId) -> Added {
        let k = self.model.lowering.vtp_shards.attention_o_proj;
        self.split_k_matvec(OpKind::OProj, layer, "x_mid", attn, residual, k)
    }

    fn down(&mut self, layer: u32, h: TensorId, residual: TensorId) -> Added {
        let k = self.model.lowering.vtp_shards.up_gate_down;
        let name = format!("x_out{layer}");
        let added = self.split_k_matvec(OpKind::Down, layer, &name, h, residual, k);
        // The down output is the next layer's residual input: name it as such.
        self.g.tensors[added.out.index()].name = format!("L{}.x", layer + 1);
        added
    }

    /// RMSNorm + up/gate + SiLU: each tile streams `t` rows of both matrices.
    fn up_gate(&mut self, layer: u32, x_mid: TensorId) -> Added {
        let (m, e) = (self.model, self.e);
        let t = m.lowering.matvec_tile_rows;
        let (hidden, inter) = (m.geometry.hidden, m.geometry.intermediate);
        self.op(
            OpHead {
                kind: OpKind::UpGate,
                layer: Some(layer),
                embed_fused: false,
                k_split: 1,
                out_name: "h",
                out_rows: inter,
            },
            |_, out| {
                (0..inter / t)
                    .map(|i| TileSpec {
                        row_tile: i,
                        k_chunk: 0,
                        reads: vec![whole(x_mid, hidden)],
                        writes: vec![part(out, i * t, t)],
                        cost: TaskCost {
                            weight_bytes: 2 * t as u64 * hidden as u64 * e
                                + if i == 0 { hidden as u64 * e } else { 0 },
                            activation_read_bytes: hidden as u64 * e,
                            write_bytes: t as u64 * e,
                            flops: 4 * t as u64 * hidden as u64,
                            ..TaskCost::default()
                        },
                    })
                    .collect()
            },
        )
    }

    /// Final RMSNorm + LM head + fused argmax (every tile folds its local best into `token`).
    fn lm_head(&mut self, x: TensorId) -> OpId {
        let (m, e) = (self.model, self.e);
        let t = m.lowering.lm_head_tile_rows;
        let (hidden, vocab) = (m.geometry.hidden, m.geometry.vocab);
        let token = self.tensor("token".into(), 1, Some(OpId::from_index(self.g.ops.len())));
        let added = self.op(
            OpHead {
                kind: OpKind::LmHead,
                layer: None,
                embed_fused: false,
                k_split: 1,
                out_name: "logits",
                out_rows: vocab,
            },
            |_, out| {
                (0..vocab / t)
                    .map(|i| TileSpec {
                        row_tile: i,
                        k_chunk: 0,
                        reads: vec![whole(x, hidden)],
                        writes: vec![part(out, i * t, t), whole(token, 1)],
                        cost: TaskCost {
                            weight_bytes: t as u64 * hidden as u64 * e
                                + if i == 0 { hidden as u64 * e } else { 0 },
                            activation_read_bytes: hidden as u64 * e,
                            // f32 logits plus one packed (value, index) argmax update.
                            write_bytes: t as u64 * 4 + 8,
                            flops: 2 * t as u64 * hidden as u64,
                            ..TaskCost::default()
                        },
                    })
                    .collect()
            },
        );
        added.op
    }

    /// A synchronised edge: `shards` counters over `tensor`; producer tiles signal the shard
    /// they write, consumer tiles wait on every shard they read.
    fn connect(&mut self, producer: OpId, consumer: OpId, tensor: TensorId, shards: u32) {
        let edge = EdgeId::from_index(self.g.edges.len());
        let rows = self.rows_of(tensor);
        let shard_rows = rows / shards;
        let mut counters = Vec::with_capacity(shards as usize);
        for shard in 0..shards {
            let id = CounterId::from_index(self.g.counters.len());
            let access = part(tensor, shard * shard_rows, shard_rows);
            let mut signals = 0;
            for t in self.op_task_range(producer) {
                let task = &mut self.g.tasks[t];
                if task.writes.iter().any(|w| overlap(w, &access)) {
                    task.signals.push(id);
                    signals += 1;
                }
            }
            for t in self.op_task_range(consumer) {
                let task = &mut self.g.tasks[t];
                if task.reads.iter().any(|r| overlap(r, &access)) {
                    task.waits.push(id);
                }
            }
            self.g.counters.push(Counter {
                id,
                edge,
                shard,
                access,
                signals_per_step: signals,
            });
            counters.push(id);
        }
        self.g.edges.push(Edge {
            id: edge,
            producer,
            consumer,
            tensor,
            shards,
            counters,
        });
    }

    /// An implied edge: recorded for analysis, synchronised by other edges' counters.
    fn imply(&mut self, producer: OpId, consumer: OpId, tensor: TensorId) {
        let id = EdgeId::from_index(self.g.edges.len());
        self.g.edges.push(Edge {
            id,
            producer,
            consumer,
            tensor,
            shards: 0,
            counters: Vec::new(),
        });
    }

    fn op_task_range(&self, op: OpId) -> std::ops::Range<usize> {
        let o = &self.g.ops[op.index()];
        o.first_task.index()..o.first_task.index() + o.tasks as usize
    }
}

fn overlap(a: &Access, b: &Access) -> bool {
    a.tensor == b.tensor && a.rows.overlaps(b.rows)
}
