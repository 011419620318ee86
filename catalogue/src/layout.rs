//! Threads and shared-memory layouts of the operator kernels: what a CTA of each kernel holds,
//! sized from the model's geometry and tuning. The kernels carve their shared memory by the
//! same rules (`carve_stream`, `ring_offset`, `ring_slot`, `warm_l2` in `mkc.cu`).

use mkc_ir::work::MatvecWork;
use mkc_ir::{Model, OpKind, Tuning};

/// Threads per CTA of the attention kernel (the source's `ATT_THREADS` default).
pub const ATT_THREADS: u32 = 512;

/// Consumer warps of a streaming kernel (the source's `CONSUMER_WARPS` default).
pub const CONSUMER_WARPS: u32 = 8;

/// Most ring slots a streaming kernel may use (the source's `MAX_SLOTS`).
pub const MAX_SLOTS: u32 = 16;

/// Floats of a streaming CTA's scratch (per-warp partial sums, flags; the source's 64).
pub const SCRATCH_FLOATS: u32 = 64;

/// Shared memory one CTA may use on sm_90 with the opt-in (bytes).
pub const SMEM_PER_CTA: u32 = 232_448;

/// Shared memory of one SM on sm_90 (228 KiB).
pub const SMEM_PER_SM: u32 = 233_472;

/// Bytes before a streaming CTA's input vector in its shared memory (the source's
/// `carve_stream`): the full and empty mbarriers of every slot.
const STREAM_X_OFFSET: u32 = 2 * MAX_SLOTS * 8;

/// Pages in flight while a streaming kernel warms L2 (the source's `WARM_DEPTH` default).
pub const WARM_DEPTH: u32 = 2;

/// Pages in flight while warming L2 as built: [`WARM_DEPTH`], or `tuning.warm_depth` (0: off).
pub fn warm_depth(t: &Tuning) -> u32 {
    t.warm_depth.unwrap_or(WARM_DEPTH)
}

/// Fewest KV positions attention stages per chunk.
const MIN_ATT_CHUNK: u32 = 128;

/// Threads per attention CTA as built: [`ATT_THREADS`], or `tuning.att_threads` (validated:
/// 128-1024, a multiple of 128; a smaller CTA, capped at 72 registers, fits beside a QKV or
/// O-projection CTA).
pub fn att_threads(t: &Tuning) -> u32 {
    t.att_threads.unwrap_or(ATT_THREADS)
}

/// Consumer warps the streaming kernels are built with: [`CONSUMER_WARPS`], or
/// `tuning.consumer_warps` (validated: 1-8; with fewer warps and a smaller ring,
/// `tuning.stream_smem`, two streaming CTAs can share an SM).
pub fn consumer_warps(t: &Tuning) -> u32 {
    t.consumer_warps.unwrap_or(CONSUMER_WARPS)
}

/// Threads per CTA of the streaming kernels as built: the consumer warps and the producer.
pub fn stream_threads(t: &Tuning) -> u32 {
    consumer_warps(t) * 32 + 32
}

/// Threads per CTA of the kernel for `kind`.
pub fn threads(t: &Tuning, kind: OpKind) -> u32 {
    if kind == OpKind::Attention {
        att_threads(t)
    } else {
        stream_threads(t)
    }
}

/// KV positions attention stages per chunk (the kernel derives it from its dynamic shared
/// memory, which [`dynamic_smem`] sizes from this). Attention asks for more than half the SM's
/// shared memory, so that two attention CTAs never share an SM: packed two to an SM they
/// measured 11 µs per step slower (docs/perf.md). The chunk is what that shared memory holds,
/// a multiple of 32 and at least 128; every chunk after the first costs two more dependent L2
/// round trips. `tuning.att_chunk` sets it instead, within what one CTA may use.
pub fn attention_chunk(model: &Model) -> u32 {
    let per_position = attention_position_smem(model);
    let vectors = attention_vectors_smem(model);
    if let Some(c) = model.tuning.att_chunk {
        // 1 KiB of slack for a traced build's static shared memory.
        let alone = SMEM_PER_CTA.saturating_sub(vectors + 1024) / per_position;
        return c.min(alone).max(1).max(attention_reduce_chunk(
            model,
            att_threads(&model.tuning),
            vectors,
        ));
    }
    let half = SMEM_PER_SM / 2;
    let chunk = half.saturating_sub(vectors).div_ceil(per_position);
    (chunk.div_ceil(32) * 32).max(MIN_ATT_CHUNK)
}

/// Attention's output partial sums in shared memory (bytes), on `threads` threads: one per
/// (output, slice of the positions), a thread summing two adjacent outputs, so `threads /
/// (outputs / 2)` slices (at least one; the kernel's `att_slices`). The kernel writes them at
/// the start of its region once every staged row and score is consumed.
pub fn attention_reduce_smem(model: &Model, threads: u32) -> u32 {
    let outs = model.heads_per_attention_task() * model.geometry.head_dim;
    (threads / (outs / 2).max(1)).max(1) * outs * 4
}

/// Fewest KV positions per chunk whose region also holds [`attention_reduce_smem`], where the
/// region holds `vectors` bytes beside the chunk (the chain kernel's q and scores,
/// [`attention_vectors_smem`]; 0 where they live apart, as in the persistent kernel).
pub(crate) fn attention_reduce_chunk(model: &Model, threads: u32, vectors: u32) -> u32 {
    attention_reduce_smem(model, threads)
        .saturating_sub(vectors)
        .div_ceil(attention_position_smem(model))
}

/// Shared memory attention stages per KV position: a K row and a V row, unpadded (the source's
/// `kv_chunk_of`; the score loop rotates its chunks instead of padding the K rows, so that the
/// persistent producer copies a K history with one bulk copy).
pub(crate) fn attention_position_smem(model: &Model) -> u32 {
    4 * model.geometry.head_dim
}

/// Attention's q and scores in shared memory (bytes): every head of the task, every position
/// of its part of the history.
pub(crate) fn attention_vectors_smem(model: &Model) -> u32 {
    let hp = model.heads_per_attention_task();
    (hp * model.geometry.head_dim + hp * attention_part_positions(model)) * 4
}

/// The most KV positions one attention task reads: its part of a `max_seq_len` history
/// ([`mkc_ir::work::kv_part`]'s first part; the kernels size the scores by the same
/// `ATT_KV_SPLIT`).
pub fn attention_part_positions(model: &Model) -> u32 {
    model.attention_part_len(model.workload.max_seq_len)
}

/// How a streaming matvec kernel lays out its CTA: its work geometry and what it stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Pages and tasks of the operator (`mkc_ir::work`).
    pub work: MatvecWork,
    /// Floats of the input vector staged in shared memory. (The RMSNorm weights have no copy
    /// here: the consumers load them from L2 with the residual, docs/perf.md lease U2.)
    pub x_len: u32,
    /// Consumer warps of the kernel as built (`tuning.consumer_warps`).
    pub warps: u32,
    /// Shared memory the CTA budgets for itself (`tuning.stream_smem`, else the whole SM:
    /// halving it so that a successor's CTA could be resident early measured 25% slower).
    pub budget: u32,
}

impl Stream {
    /// Where the empty mbarriers start (after every slot's full mbarrier).
    pub const EMPTY_OFFSET: u32 = MAX_SLOTS * 8;
    /// Where the staged input vector starts (after every slot's empty mbarrier).
    pub const X_OFFSET: u32 = STREAM_X_OFFSET;

    /// Where the scratch (`SCRATCH_FLOATS`) starts: after the input vector.
    pub fn scratch_offset(&self) -> u32 {
        STREAM_X_OFFSET + self.x_len * 4
    }

    /// Shared memory before the ring: barriers, input vector, scratch (the source's
    /// `ring_offset`).
    pub fn ring_offset(&self) -> u32 {
        (self.scratch_offset() + SCRATCH_FLOATS * 4).div_ceil(128) * 128
    }

    /// Ring slots: as many per consumer warp as fit the streaming budget (at least one, at
    /// most `MAX_SLOTS / warps`), the same number for every warp.
    pub fn slots(&self) -> u32 {
        let budget = self.budget.min(SMEM_PER_CTA);
        let fit = budget.saturating_sub(self.ring_offset()) / (self.work.page_bytes * self.warps);
        fit.clamp(1, MAX_SLOTS / self.warps) * self.warps
    }

    /// Dynamic shared memory of the kernel.
    pub fn dynamic_smem(&self) -> u32 {
        self.ring_offset() + self.slots() * self.work.page_bytes
    }
}

/// The first item and item count of CTA `b` of `g` over `n` items (the source's `page_range`):
/// contiguous ranges, balanced to within one item.
pub fn page_range(n: u32, b: u32, g: u32) -> (u32, u32) {
    let first = (b as u64 * n as u64 / g as u64) as u32;
    let end = ((b as u64 + 1) * n as u64 / g as u64) as u32;
    (first, end - first)
}

/// Ring slot and lap of the ring's page `i` (the source's `ring_slot`): page i goes to slot
/// `i % slots`, lap `i / slots`.
pub fn ring_slot(i: u32, slots: u32) -> (u32, u32) {
    (i % slots, i / slots)
}

/// The consumer warp of the ring's page `i` (the source's `ring_owner_of`): slot j belongs to
/// warp `j % warps`, which takes its pages in order. The parity waits on a slot's barriers are
/// sound only because each slot has one consumer whose laps come in order (tested as a
/// property); with `slots` not a multiple of `warps` the first warps own one slot more.
pub fn ring_owner(i: u32, slots: u32, warps: u32) -> u32 {
    i % slots % warps
}

/// The first page from `i` on that warp `warp` owns (the source's `ring_next_of`); None for a
/// warp with no slot (`warp >= slots`).
pub fn ring_next(i: u32, slots: u32, warps: u32, warp: u32) -> Option<u32> {
    if warp >= slots {
        return None;
    }
    let (base, j) = (i - i % slots, i % slots);
    let owned = warp + (j.saturating_sub(warp)).div_ceil(warps) * warps;
    Some(if owned < slots {
        base + owned
    } else {
        base + slots + warp
    })
}

/// Ring slot and lap of the `n`-th page a CTA with `count` pages of its own warms L2 with, at
/// most `depth` in flight (the source's `warm_l2`): the slots past its own pages, so that
/// warming never overwrites a page a consumer reads (tested as a property). None when its own
/// pages take every slot.
pub fn warm_slot(count: u32, slots: u32, depth: u32, n: u32) -> Option<(u32, u32)> {
    if count >= slots || depth == 0 {
        return None;
    }
    let free = (slots - count).min(depth);
    Some((count + n % free, n / free))
}

/// The streaming layout of a matvec operator (None for attention).
pub fn stream(model: &Model, kind: OpKind) -> Option<Stream> {
    let work = mkc_ir::work::matvec(model, kind)?;
    Some(Stream {
        work,
        x_len: staged_input(model, kind, &work),
        warps: consumer_warps(&model.tuning),
        budget: model.tuning.stream_smem.unwrap_or(SMEM_PER_CTA),
    })
}

/// Columns of a K chunk that the page loop holds in a lane's registers (8 groups of 256
/// columns). A longer chunk ([`blocked_k`]) is staged in shared memory and read block by
/// block (`page_dots_blocked`).
pub const REGISTER_K: u32 = 2048;

/// Whether the page loop takes a K chunk of `k` columns block by block from an input staged in
/// shared memory: longer than [`REGISTER_K`], in whole 16-byte pieces.
pub fn blocked_k(k: u32) -> bool {
    k > REGISTER_K && k.is_multiple_of(8)
}

/// Whether the kernels' page loop streams a K chunk of `k` columns: whole 16-byte pieces (8
/// columns), dealt over a warp's lanes in rounds of 32 (256 columns; the last round partial
/// where `k` is no multiple of 256: SmolLM's 576), held in registers up to [`REGISTER_K`], or a
/// longer, [`blocked_k`] one.
pub fn streamable_k(k: u32) -> bool {
    k > 0 && k.is_multiple_of(8)
}

/// The most rows a page of the page loop in which a warp shares each row may hold: its
/// epilogues hand row r's sum to lane r (the kernels' `consume` asserts it).
pub const MAX_PAGE_ROWS: u32 = 32;

/// Whether the page loop where each lane owns whole rows (`consume_narrow`: attention inside
/// the O-projection, whose K chunk is one attention task's heads) takes K chunks of `k`
/// columns in pages of `page_rows` rows: rows of whole 16-byte pieces, at most 256 columns, a
/// page's rows dealt evenly over a warp's 32 lanes.
pub fn narrow_k(k: u32, page_rows: u32) -> bool {
    k > 0 && k.is_multiple_of(8) && k <= 256 && page_rows.is_multiple_of(32)
}

/// Floats of its input vector a streaming operator stages in shared memory: the normalised
/// operators (QKV, up/gate, the LM head) their whole hidden vector; the O-projection and down
/// none, since they read their K chunks from global memory into registers, unless the chunk
/// is longer than [`REGISTER_K`] ([`blocked_k`]) or (the O-projection) attention writes
/// split-KV partial records: then their whole input vector (each chunk at its own offset; an
/// instruction stages the chunks of its own tasks).
pub fn staged_input(model: &Model, kind: OpKind, work: &MatvecWork) -> u32 {
    let split_kv = model.lowering.kv_parts() > 1;
    match kind {
        // Attention inside the O-projection writes each task's heads into their chunk's place.
        OpKind::OProj if model.lowering.attention_in_o_proj.is_some() => work.k * work.splits,
        // Split-KV partial records are merged as they are staged (the kernels' merge_parts).
        OpKind::OProj if split_kv => work.k * work.splits,
        OpKind::OProj | OpKind::Down if !blocked_k(work.k) => 0,
        OpKind::OProj | OpKind::Down => work.k * work.splits,
        _ => model.geometry.hidden,
    }
}

/// The one page shape whose page loop runs on the tensor cores (`page_dots_mma`): 4 rows of
/// [`REGISTER_K`] bf16 columns.
pub const TENSOR_CORE_ROWS: u32 = 4;

/// Whether a page loop over K chunks of `k` columns in pages of `page_rows` rows runs on the
/// tensor cores: chunks of [`REGISTER_K`] columns in pages of [`TENSOR_CORE_ROWS`] rows,
/// whatever the operator. Its input's fragments are then written once per CTA where the input
/// is staged ([`staged_input`]: QKV, up/gate, the LM head), and by the producer where the
/// operator reads it from L2 ([`fragment_input`]: the O-projection, down). Every other shape
/// runs the FMA loop. The kernels decide the same at compile time from the generated
/// `TENSOR_CORE_K_GROUPS` and `TENSOR_CORE_ROWS` (`run_stream`'s `MMA`, with the operator's
/// `PAGE_ROWS_*`); the simulator charges these pages `page_compute_mma_ns`, and `mkc probe
/// pages` times this loop.
pub fn tensor_core_shape(k: u32, page_rows: u32) -> bool {
    k == REGISTER_K && page_rows == TENSOR_CORE_ROWS
}

/// Whether the input of operator `kind` (the O-projection's: attention's output; down's: h) is
/// stored as tensor-core fragments rather than floats: the operator reads it from L2 in its page
/// loop ([`staged_input`] 0) and its pages run on the tensor cores. Its producer then writes
/// each value as two bf16 halves (its rounding and the residue) where the fragments' order puts
/// them (the kernels' `store_fragment_value`, the host's `mkc_backend::fragments`), in the same
/// 4 bytes per value. Generated as `ATTN_FRAGMENTS` and `H_FRAGMENTS`.
pub fn fragment_input(model: &Model, kind: OpKind) -> bool {
    matches!(kind, OpKind::OProj | OpKind::Down)
        && mkc_ir::work::matvec(model, kind).is_some_and(|w| {
            staged_input(model, kind, &w) == 0 && tensor_core_shape(w.k, w.page_rows())
        })
}

/// Bytes of one KV position of one KV head (its key and value rows).
pub(crate) fn kv_position_bytes(model: &Model) -> u64 {
    2 * model.geometry.head_dim as u64 * model.geometry.dtype.bytes()
}

/// Bytes of independent loads (weights, KV history) one CTA of operator `kind` holds before
/// its wait: a streaming kernel's page ring (its producer can run no further ahead until the
/// consumers free a slot, which they do only after the wait), as many pages as it has slots,
/// each the weight bytes a page carries (less than a slot where rows do not fill it);
/// attention's KV chunk.
pub fn prefetch_bytes(model: &Model, kind: OpKind) -> u64 {
    match stream(model, kind) {
        Some(s) => s.slots() as u64 * s.work.page_weight_bytes(),
        None => attention_chunk(model) as u64 * kv_position_bytes(model),
    }
}

/// Dynamic shared memory of the kernel of operator `kind` for `model`.
pub fn dynamic_smem(model: &Model, kind: OpKind) -> u32 {
    if let Some(s) = stream(model, kind) {
        return s.dynamic_smem();
    }
    // K chunk (rows padded by 8 elements), V chunk, q, then the scores.
    attention_chunk(model) * attention_position_smem(model) + attention_vectors_smem(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The tensor cores take every 4-row page of 2,048 columns, and nothing else: not a wider
    /// hidden size's (blocked), not 8-row pages; their producers store only the inputs read from
    /// L2 as fragments.
    #[test]
    fn only_four_row_2048_column_pages_run_on_the_tensor_cores() {
        let on = |m: &Model, kind| {
            let w = mkc_ir::work::matvec(m, kind).unwrap();
            tensor_core_shape(w.k, w.page_rows())
        };
        let m = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        for kind in mkc_ir::work::MATVECS {
            assert!(on(&m, kind), "{kind:?}");
        }
        // Only the inputs read from L2 are stored as fragments by their producers.
        assert!(fragment_input(&m, OpKind::OProj) && fragment_input(&m, OpKind::Down));
        assert!(!fragment_input(&m, OpKind::QkvRope) && !fragment_input(&m, OpKind::UpGate));
        // Down's K chunk of 8,192 (one MLP shard) is staged: floats, the FMA loop.
        let mut one_shard = m.clone();
        one_shard.lowering.vtp_shards.up_gate_down = 1;
        assert!(!on(&one_shard, OpKind::Down) && !fragment_input(&one_shard, OpKind::Down));
        assert!(fragment_input(&one_shard, OpKind::OProj));
        // Hidden 3072: every chunk but down's (8192 over 4 shards) is blocked.
        let wide = mkc_ir::embedded::resolve_model("llama3b").unwrap();
        for kind in mkc_ir::work::MATVECS {
            assert_eq!(on(&wide, kind), kind == OpKind::Down, "{kind:?}");
        }
        let mut big_pages = m.clone();
        big_pages.lowering.page_bytes *= 2;
        assert!(!on(&big_pages, OpKind::QkvRope));
    }

    proptest! {
        /// Attention's shared memory holds its output partial sums as well as its chunk, q and
        /// scores, whatever the context length, split, thread count or tuned chunk: the kernel
        /// writes slices x outputs floats at the region's start, which at small max_seq the
        /// scores alone would not cover.
        #[test]
        fn attention_smem_holds_its_partial_sums(
            which in 0usize..mkc_ir::embedded::MODELS.len(),
            max_seq in 1u32..512,
            split in prop::sample::select(vec![1u32, 2, 4, 8]),
            threads in prop::option::of(prop::sample::select(vec![128u32, 256, 512, 1024])),
            chunk in prop::option::weighted(0.8, 1u32..64),
        ) {
            let (name, text) = mkc_ir::embedded::MODELS[which];
            let mut model = Model::parse(name, text).unwrap();
            model.workload.max_seq_len = max_seq;
            model.workload.prompt_len = 1;
            model.workload.generate = 1;
            model.lowering.attention_split = split;
            model.tuning.att_threads = threads;
            model.tuning.att_chunk = chunk;
            prop_assume!(model.validate(name).is_ok());
            let smem = dynamic_smem(&model, OpKind::Attention);
            prop_assert!(attention_reduce_smem(&model, att_threads(&model.tuning)) <= smem);
        }
    }
}
