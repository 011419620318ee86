//! Lowering: a validated [`Model`] becomes the tiled task DAG of one decode step.
//!
//! Per layer, five fused operators (QKV+RoPE, attention, O-proj, up/gate, down), then the LM
//! head with fused argmax; the embedding gather is fused into layer 0's QKV. A matvec task is a
//! run of weight pages (`crate::work`); every task records its reads, writes and bytes; edges
//! get one counter per VTP shard, and split-K consumers take one K chunk per shard so they wait
//! only for the shard they read.

use crate::graph::{
    Access, Accesses, Counter, CounterIds, Edge, OpKind, Operator, Rows, Task, TaskCost, TaskGraph,
    Tensor,
};
use crate::ids::{CounterId, EdgeId, OpId, TaskId, TensorId};
use crate::model::Model;
use smallvec::smallvec;

/// Bytes of one activation element as the kernels store activations (f32; the KV cache is in
/// the model's dtype).
pub const ACTIVATION_BYTES: u64 = 4;

/// Lowers a validated model into its task graph.
///
/// The tensors are the kernels' buffers. Per layer: QKV reads the residual stream as the
/// previous layer left it (`x_mid` plus down's split-K partials, or the embedding row), writes
/// `qkv` and stores the summed stream `x_in` (each task its share); attention writes `attn`;
/// the O-projection writes one partial block per K chunk (`o_part`); up/gate sums `x_in` and
/// `o_part`, stores `x_mid` (shares) and writes `h`; down writes `d_part`.
///
/// # Panics
/// Only on a model that [`Model::validate`] would reject (an internal bug, not user input).
pub fn lower(model: &Model) -> TaskGraph {
    let mut b = Builder::new(model);
    let g = &model.geometry;
    let shards = &model.lowering.vtp_shards;
    let embed = b.tensor("embed_row".into(), g.hidden, None);
    // The residual stream entering a layer: the embedding row, or (x_mid, d_part, down).
    let mut stream = Stream::Embedding(embed);
    for layer in 0..g.layers {
        let qkv = b.qkv(layer, &stream);
        b.link_stream(&stream, qkv.op, shards.down_qkv);
        let o_proj = if model.lowering.attention_in_o_proj.is_some() {
            let o_proj = b.attention_o_proj(layer, qkv.out);
            b.connect(qkv.op, o_proj.op, qkv.out, shards.qkv_attention);
            b.zero_shares(qkv.op, o_proj.out);
            o_proj
        } else {
            let attn = b.attention(layer, qkv.out);
            b.connect(qkv.op, attn.op, qkv.out, shards.qkv_attention);
            let o_proj = b.o_proj(layer, attn.out);
            b.connect(attn.op, o_proj.op, attn.out, shards.attention_o_proj);
            o_proj
        };
        let up_gate = b.up_gate(layer, qkv.stored, o_proj.out);
        b.connect(o_proj.op, up_gate.op, o_proj.out, shards.o_proj_up_gate);
        b.imply(qkv.op, up_gate.op, qkv.stored);
        if let Stream::Layer {
            x_mid, producer, ..
        } = stream
        {
            b.imply(producer, up_gate.op, x_mid);
        }
        let down = b.split_k_matvec(OpKind::Down, layer, "d_part", up_gate.out);
        b.connect(up_gate.op, down.op, up_gate.out, shards.up_gate_down);
        stream = Stream::Layer {
            x_mid: up_gate.stored,
            producer: up_gate.op,
            d_part: down.out,
            down: down.op,
        };
    }
    let lm_head = b.lm_head(&stream);
    b.link_stream(&stream, lm_head, shards.down_lm_head);
    b.finish()
}

/// The residual stream as an operator reads it.
enum Stream {
    /// Layer 0: the gathered embedding row.
    Embedding(TensorId),
    /// After a layer: its `x_mid` (written by `producer`, up/gate) plus down's partials.
    Layer {
        x_mid: TensorId,
        producer: OpId,
        d_part: TensorId,
        down: OpId,
    },
}

/// Number of tasks the lowering of `model` produces (used to refuse absurd tilings early),
/// computed in u64 from the geometry so that it cannot wrap.
pub fn task_count(model: &Model) -> u64 {
    let g = &model.geometry;
    let l = &model.lowering;
    let mut per_layer = if l.attention_in_o_proj.is_some() {
        0
    } else {
        g.kv_heads as u64 * l.attention_split as u64 * l.kv_parts() as u64
    };
    let mut lm = 0;
    for kind in crate::work::MATVECS {
        let Some(w) = crate::work::matvec(model, kind) else {
            continue;
        };
        let chunk_tasks = w.out_rows as u64 / w.page_out().max(1) as u64 / w.task_pages as u64;
        let tasks = w.splits as u64 * chunk_tasks;
        if kind == OpKind::LmHead {
            lm = tasks;
        } else {
            per_layer += tasks;
        }
    }
    g.layers as u64 * per_layer + lm
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
    /// Rows of that tensor (u64: a partial tensor has chunks x hidden rows).
    pub rows: u64,
    /// Rows each producer task writes.
    pub producer_tile_rows: u32,
}

/// Every shardable edge of a layer (and the LM head's input edge) with its shape facts.
pub fn shard_edges(model: &Model) -> Vec<ShardEdgeSpec> {
    let g = &model.geometry;
    let s = &model.lowering.vtp_shards;
    let rows_of = |kind| crate::work::matvec(model, kind).map_or(1, |w| w.task_rows());
    // The output rows of a query group's attention tasks: its heads' rows, every part's
    // records under split-KV (whole heads, so that a shard holds every part of them).
    let attn_tile = model.heads_per_attention_task() * model.attention_rows_per_head();
    let spec = |field, shards, tensor, rows: u64, producer_tile_rows| ShardEdgeSpec {
        field,
        shards,
        tensor,
        rows,
        producer_tile_rows,
    };
    let hidden = g.hidden as u64;
    // With attention inside the O-projection there is no attention edge, and the O-projection
    // adds into one vector rather than a partial block per K chunk.
    let fused = model.lowering.attention_in_o_proj.is_some();
    let (o_tensor, o_rows) = if fused {
        ("o_sum", hidden)
    } else {
        ("o_part", s.attention_o_proj as u64 * hidden)
    };
    let mut edges = vec![spec(
        "qkv_attention",
        s.qkv_attention,
        "qkv",
        model.qkv_rows() as u64,
        rows_of(OpKind::QkvRope),
    )];
    if !fused {
        edges.push(spec(
            "attention_o_proj",
            s.attention_o_proj,
            "attn",
            model.attention_out_rows(),
            attn_tile,
        ));
    }
    edges.extend([
        spec(
            "o_proj_up_gate",
            s.o_proj_up_gate,
            o_tensor,
            o_rows,
            rows_of(OpKind::OProj),
        ),
        spec(
            "up_gate_down",
            s.up_gate_down,
            "h",
            g.intermediate as u64,
            rows_of(OpKind::UpGate),
        ),
        spec(
            "down_qkv",
            s.down_qkv,
            "d_part",
            s.up_gate_down as u64 * hidden,
            rows_of(OpKind::Down),
        ),
        spec(
            "down_lm_head",
            s.down_lm_head,
            "d_part",
            s.up_gate_down as u64 * hidden,
            rows_of(OpKind::Down),
        ),
    ]);
    edges
}

/// What one tile of an operator is, before it gets an id.
struct TileSpec {
    row_tile: u32,
    k_chunk: u32,
    reads: Accesses,
    writes: Accesses,
    accumulates: Accesses,
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

/// An operator just added, its output and the residual vector its tasks store in shares.
struct AddedStream {
    op: OpId,
    out: TensorId,
    stored: TensorId,
}

struct Builder<'m> {
    model: &'m Model,
    /// Bytes per weight element.
    e: u64,
    g: TaskGraph,
}

fn whole(tensor: TensorId, rows: u32) -> Access {
    Access {
        tensor,
        rows: Rows::new(0, rows),
    }
}

/// Task `t` of `tasks`' share of a `len`-row residual vector, if it has one.
fn share_access(tensor: TensorId, t: u32, tasks: u32, len: u32) -> Option<Access> {
    let (start, end) = crate::work::residual_share(t, tasks, len);
    (start < end).then(|| part(tensor, start, end - start))
}

fn part(tensor: TensorId, start: u32, len: u32) -> Access {
    Access {
        tensor,
        rows: Rows::new(start, start + len),
    }
}

/// What attention task `c` (KV head `c / attention_split`, query heads from `c x` its heads
/// on) reads of `qkv`: its query heads, then its KV head's key and value rows.
fn attention_reads(m: &Model, qkv: TensorId, c: u32) -> Accesses {
    let (hd, hp) = (m.geometry.head_dim, m.heads_per_attention_task());
    let (q_dim, kv_dim) = (m.q_dim(), m.kv_dim());
    let kv_head = c / m.lowering.attention_split;
    smallvec![
        part(qkv, c * hp * hd, hp * hd),
        part(qkv, q_dim + kv_head * hd, hd),
        part(qkv, q_dim + kv_dim + kv_head * hd, hd),
    ]
}

/// What computing one attention task's heads costs beside its writes: its q, k and v reads,
/// its KV history (per cached token) and the scores' and output's flops.
fn attention_cost(m: &Model) -> TaskCost {
    let (hd, hp) = (
        m.geometry.head_dim as u64,
        m.heads_per_attention_task() as u64,
    );
    TaskCost {
        activation_read_bytes: (hp + 2) * hd * ACTIVATION_BYTES,
        kv_bytes_per_token: 2 * hd * m.geometry.dtype.bytes(),
        flops_per_token: 4 * hp * hd,
        ..TaskCost::default()
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
                // Sized once: growing ~10^5 tasks by doubling copied them several times.
                tasks: Vec::with_capacity(task_count(model) as usize),
                edges: Vec::new(),
                counters: Vec::new(),
                model_weight_bytes: model.weight_bytes(),
                typical_kv_len: w.typical_kv_len(),
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
                accumulates: spec.accumulates,
                waits: CounterIds::new(),
                signals: CounterIds::new(),
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

    /// The work geometry of matvec `kind` (validated: every matvec has one).
    fn work(&self, kind: OpKind) -> crate::work::MatvecWork {
        crate::work::matvec(self.model, kind).expect("a matvec operator")
    }

    /// What a task reads of the residual stream `stream` (the whole vector: its RMSNorm needs
    /// every row) and the bytes that costs.
    fn stream_reads(&self, stream: &Stream) -> (Accesses, u64) {
        let hidden = self.model.geometry.hidden;
        match *stream {
            Stream::Embedding(row) => (smallvec![whole(row, hidden)], hidden as u64 * self.e),
            Stream::Layer { x_mid, d_part, .. } => {
                let parts = self.rows_of(d_part);
                (
                    smallvec![whole(x_mid, hidden), whole(d_part, parts)],
                    (hidden + parts) as u64 * ACTIVATION_BYTES,
                )
            }
        }
    }

    /// The edges that carry the residual stream into `consumer`: down's partials (synchronised,
    /// `shards` counters) and up/gate's `x_mid` (implied: down's tasks follow all of up/gate's).
    fn link_stream(&mut self, stream: &Stream, consumer: OpId, shards: u32) {
        if let Stream::Layer {
            x_mid,
            producer,
            d_part,
            down,
        } = *stream
        {
            self.connect(down, consumer, d_part, shards);
            self.imply(producer, consumer, x_mid);
        }
    }

    /// RMSNorm + QKV + RoPE + KV append, reading the residual stream; each task also stores
    /// its share of the summed stream `x_in`.
    fn qkv(&mut self, layer: u32, stream: &Stream) -> AddedStream {
        let (m, e) = (self.model, self.e);
        let hidden = m.geometry.hidden;
        let w = self.work(OpKind::QkvRope);
        let q_dim = m.q_dim();
        let (reads, read_bytes) = self.stream_reads(stream);
        let x_in = self.tensor(format!("L{layer}.x_in"), hidden, None);
        let added = self.op(
            OpHead {
                kind: OpKind::QkvRope,
                layer: Some(layer),
                embed_fused: layer == 0,
                k_split: 1,
                out_name: "qkv",
                out_rows: m.qkv_rows(),
            },
            |_, out| {
                let (n, t) = (w.tasks(), w.task_rows());
                (0..n)
                    .map(|i| {
                        let norm = if i == 0 { hidden as u64 * e } else { 0 };
                        let kv_rows = (i * t + t).saturating_sub(q_dim.max(i * t)).min(t);
                        let mut writes: Accesses = smallvec![part(out, i * t, t)];
                        let share = share_access(x_in, i, n, hidden);
                        let share_bytes = share.map_or(0, |a| a.rows.len() as u64);
                        writes.extend(share);
                        TileSpec {
                            row_tile: i,
                            k_chunk: 0,
                            reads: reads.clone(),
                            writes,
                            accumulates: Accesses::new(),
                            cost: TaskCost {
                                weight_bytes: w.task_weight_bytes() + norm,
                                activation_read_bytes: read_bytes,
                                write_bytes: (t as u64 + share_bytes) * ACTIVATION_BYTES
                                    + kv_rows as u64 * e,
                                flops: 2 * t as u64 * hidden as u64,
                                ..TaskCost::default()
                            },
                        }
                    })
                    .collect()
            },
        );
        self.g.tensors[x_in.index()].producer = Some(added.op);
        AddedStream {
            op: added.op,
            out: added.out,
            stored: x_in,
        }
    }

    /// Decode attention: one task per (KV head, query-head group), or with split-KV one per
    /// (KV head, query-head group, part of the history), the parts of a group consecutive
    /// (task t's part is t mod parts: the kernels' `attention_body` decodes it so). A part
    /// writes one partial record per query head ([`crate::work::attention_part_row`]).
    fn attention(&mut self, layer: u32, qkv: TensorId) -> Added {
        let m = self.model;
        let a = ACTIVATION_BYTES;
        let g = &m.geometry;
        let hd = g.head_dim;
        let hp = m.heads_per_attention_task();
        let split = m.lowering.attention_split;
        let parts = m.lowering.kv_parts();
        let record = crate::work::attention_part_record(hd);
        let out_rows = u32::try_from(m.attention_out_rows()).expect("validated tensor rows");
        // Rows one task writes: its heads' outputs, or their records of its part.
        let task_rows = hp * m.attention_rows_per_head() / parts;
        self.op(
            OpHead {
                kind: OpKind::Attention,
                layer: Some(layer),
                embed_fused: false,
                k_split: 1,
                out_name: "attn",
                out_rows,
            },
            |_, out| {
                let mut tiles = Vec::new();
                for kv_head in 0..g.kv_heads {
                    for s in 0..split {
                        let q_head = kv_head * hp * split + s * hp;
                        for p in 0..parts {
                            let writes: Accesses = if parts == 1 {
                                smallvec![part(out, q_head * hd, task_rows)]
                            } else {
                                let row =
                                    |h| crate::work::attention_part_row(h, p, parts, hd) as u32;
                                (q_head..q_head + hp)
                                    .map(|h| part(out, row(h), record))
                                    .collect()
                            };
                            tiles.push(TileSpec {
                                row_tile: (kv_head * split + s) * parts + p,
                                k_chunk: p,
                                reads: attention_reads(m, qkv, kv_head * split + s),
                                writes,
                                accumulates: Accesses::new(),
                                cost: TaskCost {
                                    write_bytes: task_rows as u64 * a,
                                    kv_part: p,
                                    kv_parts: parts,
                                    ..attention_cost(m)
                                },
                            });
                        }
                    }
                }
                tiles
            },
        )
    }

    /// The O-projection: a split-K matvec over attention's output, whose K chunk c is read as
    /// columns `[c k, (c + 1) k)` of the output vector, or with split-KV as every part's
    /// record of the heads those columns belong to (merged as the chunk is staged).
    fn o_proj(&mut self, layer: u32, attn: TensorId) -> Added {
        let m = self.model;
        let parts = m.lowering.kv_parts();
        let hd = m.geometry.head_dim;
        let input = move |c: u32, k: u32| -> (u32, u32) {
            if parts == 1 {
                (c * k, k)
            } else {
                let (h0, h1) = (c * k / hd, ((c + 1) * k).div_ceil(hd));
                let row = |h| crate::work::attention_part_row(h, 0, parts, hd) as u32;
                (row(h0), row(h1) - row(h0))
            }
        };
        self.split_k_matvec_with(OpKind::OProj, layer, "o_part", attn, input)
    }

    /// Attention inside the O-projection (`lowering.attention_in_o_proj`): task (c, r) takes
    /// attention task c's query heads (K chunk c: their columns) and the r-th run of output
    /// rows; it computes those heads' attention over the whole history, multiplies the result
    /// by its pages and adds its rows into `o_sum` (one vector; QKV zeroes it,
    /// [`Builder::zero_shares`]).
    fn attention_o_proj(&mut self, layer: u32, qkv: TensorId) -> Added {
        let m = self.model;
        let w = self.work(OpKind::OProj);
        let hidden = m.geometry.hidden;
        self.op(
            OpHead {
                kind: OpKind::OProj,
                layer: Some(layer),
                embed_fused: false,
                k_split: w.splits,
                out_name: "o_sum",
                out_rows: hidden,
            },
            |_, out| {
                (0..w.tasks())
                    .map(|t| {
                        let (c, row0) = w.task_coords(t);
                        let rows = w.task_rows();
                        TileSpec {
                            row_tile: row0 / rows,
                            k_chunk: c,
                            reads: attention_reads(m, qkv, c),
                            writes: Accesses::new(),
                            accumulates: smallvec![part(out, row0, rows)],
                            cost: TaskCost {
                                weight_bytes: w.task_weight_bytes(),
                                write_bytes: rows as u64 * ACTIVATION_BYTES,
                                flops: 2 * rows as u64 * w.k as u64,
                                ..attention_cost(m)
                            },
                        }
                    })
                    .collect()
            },
        )
    }

    /// Each task of `op` also stores zeros over its share of `tensor` (which a later operator
    /// adds into), as QKV stores its share of the residual.
    fn zero_shares(&mut self, op: OpId, tensor: TensorId) {
        let len = self.rows_of(tensor);
        let range = self.op_task_range(op);
        let n = range.len() as u32;
        for (i, t) in range.enumerate() {
            if let Some(share) = share_access(tensor, i as u32, n, len) {
                let task = &mut self.g.tasks[t];
                task.writes.push(share);
                task.cost.write_bytes += share.rows.len() as u64 * ACTIVATION_BYTES;
            }
        }
    }

    /// A split-K matvec (O-projection, down): task (c, r) multiplies K chunk c of `input` by
    /// its pages and writes rows r of chunk c's partial block (`splits` blocks of `hidden`
    /// rows); the operator that next stages the residual adds the blocks up.
    fn split_k_matvec(
        &mut self,
        kind: OpKind,
        layer: u32,
        out_name: &str,
        input: TensorId,
    ) -> Added {
        self.split_k_matvec_with(kind, layer, out_name, input, |c, k| (c * k, k))
    }

    /// [`Builder::split_k_matvec`] whose K chunk c (of `k` columns) is read as the rows
    /// `input_rows(c, k)` (first row, rows) of `input`.
    fn split_k_matvec_with(
        &mut self,
        kind: OpKind,
        layer: u32,
        out_name: &str,
        input: TensorId,
        input_rows: impl Fn(u32, u32) -> (u32, u32),
    ) -> Added {
        let w = self.work(kind);
        let hidden = self.model.geometry.hidden;
        let a = ACTIVATION_BYTES;
        self.op(
            OpHead {
                kind,
                layer: Some(layer),
                embed_fused: false,
                k_split: w.splits,
                out_name,
                out_rows: w.splits * hidden,
            },
            |_, out| {
                (0..w.tasks())
                    .map(|t| {
                        let (c, row0) = w.task_coords(t);
                        let rows = w.task_rows();
                        let (in0, in_rows) = input_rows(c, w.k);
                        TileSpec {
                            row_tile: row0 / rows,
                            k_chunk: c,
                            reads: smallvec![part(input, in0, in_rows)],
                            writes: smallvec![part(out, c * hidden + row0, rows)],
                            accumulates: Accesses::new(),
                            cost: TaskCost {
                                weight_bytes: w.task_weight_bytes(),
                                activation_read_bytes: in_rows as u64 * a,
                                write_bytes: rows as u64 * a,
                                flops: 2 * rows as u64 * w.k as u64,
                                ..TaskCost::default()
                            },
                        }
                    })
                    .collect()
            },
        )
    }

    /// RMSNorm of `x_in` plus the O-projection's partials + up/gate + SiLU: each task streams
    /// its pages of both matrices and stores its share of the summed stream `x_mid`.
    fn up_gate(&mut self, layer: u32, x_in: TensorId, o_part: TensorId) -> AddedStream {
        let (m, e) = (self.model, self.e);
        let w = self.work(OpKind::UpGate);
        let hidden = m.geometry.hidden;
        let parts = self.rows_of(o_part);
        let x_mid = self.tensor(format!("L{layer}.x_mid"), hidden, None);
        let added = self.op(
            OpHead {
                kind: OpKind::UpGate,
                layer: Some(layer),
                embed_fused: false,
                k_split: 1,
                out_name: "h",
                out_rows: m.geometry.intermediate,
            },
            |_, out| {
                let (n, t) = (w.tasks(), w.task_rows());
                (0..n)
                    .map(|i| {
                        let mut writes: Accesses = smallvec![part(out, i * t, t)];
                        let share = share_access(x_mid, i, n, hidden);
                        let share_bytes = share.map_or(0, |a| a.rows.len() as u64);
                        writes.extend(share);
                        TileSpec {
                            row_tile: i,
                            k_chunk: 0,
                            reads: smallvec![whole(x_in, hidden), whole(o_part, parts)],
                            writes,
                            accumulates: Accesses::new(),
                            cost: TaskCost {
                                weight_bytes: w.task_weight_bytes()
                                    + if i == 0 { hidden as u64 * e } else { 0 },
                                activation_read_bytes: (hidden + parts) as u64 * ACTIVATION_BYTES,
                                write_bytes: (t as u64 + share_bytes) * ACTIVATION_BYTES,
                                flops: 4 * t as u64 * hidden as u64,
                                ..TaskCost::default()
                            },
                        }
                    })
                    .collect()
            },
        );
        self.g.tensors[x_mid.index()].producer = Some(added.op);
        AddedStream {
            op: added.op,
            out: added.out,
            stored: x_mid,
        }
    }

    /// Final RMSNorm + LM head + fused argmax (every task folds its local best into `token`).
    fn lm_head(&mut self, stream: &Stream) -> OpId {
        let (m, e) = (self.model, self.e);
        let w = self.work(OpKind::LmHead);
        let hidden = m.geometry.hidden;
        let (reads, read_bytes) = self.stream_reads(stream);
        let token = self.tensor("token".into(), 1, Some(OpId::from_index(self.g.ops.len())));
        let added = self.op(
            OpHead {
                kind: OpKind::LmHead,
                layer: None,
                embed_fused: false,
                k_split: 1,
                out_name: "logits",
                out_rows: m.geometry.vocab,
            },
            |_, out| {
                let t = w.task_rows();
                (0..w.tasks())
                    .map(|i| TileSpec {
                        row_tile: i,
                        k_chunk: 0,
                        reads: reads.clone(),
                        writes: smallvec![part(out, i * t, t), whole(token, 1)],
                        accumulates: Accesses::new(),
                        cost: TaskCost {
                            weight_bytes: w.task_weight_bytes()
                                + if i == 0 { hidden as u64 * e } else { 0 },
                            activation_read_bytes: read_bytes,
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
    /// they write, consumer tiles wait on every shard they read. Shards are equal row ranges,
    /// so the shards an access touches are found by division, not by scanning every shard.
    fn connect(&mut self, producer: OpId, consumer: OpId, tensor: TensorId, shards: u32) {
        let edge = EdgeId::from_index(self.g.edges.len());
        let rows = self.rows_of(tensor);
        let shard_rows = rows / shards;
        let first = self.g.counters.len();
        let mut signals = vec![0u32; shards as usize];
        // The shards that accesses of `tensor` touch, in row order, each once.
        let touched = |accesses: &[Access]| -> smallvec::SmallVec<[u32; 4]> {
            let mut out: smallvec::SmallVec<[u32; 4]> = accesses
                .iter()
                .filter(|a| a.tensor == tensor)
                .flat_map(|a| a.rows.start / shard_rows..=(a.rows.end - 1) / shard_rows)
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        };
        for t in self.op_task_range(producer) {
            let task = &mut self.g.tasks[t];
            let written: Accesses = task
                .writes
                .iter()
                .chain(&task.accumulates)
                .copied()
                .collect();
            for shard in touched(&written) {
                task.signals
                    .push(CounterId::from_index(first + shard as usize));
                signals[shard as usize] += 1;
            }
        }
        for t in self.op_task_range(consumer) {
            let task = &mut self.g.tasks[t];
            for shard in touched(&task.reads) {
                task.waits
                    .push(CounterId::from_index(first + shard as usize));
            }
        }
        let mut counters = Vec::with_capacity(shards as usize);
        for shard in 0..shards {
            let id = CounterId::from_index(first + shard as usize);
            self.g.counters.push(Counter {
                id,
                edge,
                shard,
                access: part(tensor, shard * shard_rows, shard_rows),
                signals_per_step: signals[shard as usize],
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
