//! The persistent megakernel's CTA: its threads and its shared-memory layout. Its producer
//! lane fills one ring of weight pages across the whole instruction stream, and attention's
//! KV history ahead of it (the RMSNorm weights are no copy of their own: the consumers load
//! them from L2 beside the residual, so that their bytes go to the ring); the consumer warps run each
//! instruction in a work region of their own: a streaming operator's input vector, or
//! attention's q and scores in the same bytes (one instruction runs at a time), then
//! attention's KV chunk, apart so that the producer may copy the next attention's history
//! while a streaming operator stages its input. The kernel
//! takes every offset from the constants generated from [`PersistentLayout`]
//! (`PERSISTENT_*`), so the layout has this one description.

use crate::layout::{self, MAX_SLOTS, SCRATCH_FLOATS, SMEM_PER_CTA};
use crate::Unsupported;
use mkc_ir::{Model, Tuning};

/// Shared memory kept for the kernel's static variables (the instruction, its layer and their
/// staging copies, the model and globals): measured 0.7 KiB.
pub const PERSISTENT_STATIC_SMEM: u32 = 1024;

/// Most counter references (waits and signals together) of one persistent instruction: the
/// kernel stages the next instruction's in shared memory, so that no wait or signal loads one
/// from global memory on the way to a counter.
pub const PERSISTENT_MAX_REFS: u32 = 16;

/// Fewest KV positions the persistent kernel's attention stages per chunk.
const MIN_PERSISTENT_CHUNK: u32 = 32;

/// Consumer warps of the persistent kernel by default: 8 (288 threads, capped at 168
/// registers, three warps on one sub-partition) measured 45-47 us per step slower on the H200
/// than 7, with and without spills (docs/perf.md, twentieth and twenty-first sessions).
pub const PERSISTENT_WARPS: u32 = 7;

/// Consumer warps of the persistent kernel: [`PERSISTENT_WARPS`], or
/// `tuning.persistent_warps` (validated: 1-8).
pub fn persistent_warps(t: &Tuning) -> u32 {
    t.persistent_warps.unwrap_or(PERSISTENT_WARPS)
}

/// Weight pages the persistent producer keeps in flight at most while its consumers are
/// between two instructions, where neither the model nor the device profile sets it: no limit
/// (16, at least any ring's slots). The limit is a card's measurement: 1 gained 58 us per step
/// on an H100 (963 against 1,021, leases L and M) and 66 on an H200 (751 against 818, lease
/// AF), so both profiles set 1; a card not measured keeps the producer unlimited (docs/perf.md).
pub const PERSISTENT_BOUNDARY_INFLIGHT: u32 = 16;

/// [`PERSISTENT_BOUNDARY_INFLIGHT`], or `tuning.persistent_boundary_inflight` (validated:
/// 0-16; at least the ring's slots leaves the producer unlimited).
pub fn persistent_boundary_inflight(t: &Tuning) -> u32 {
    t.persistent_boundary_inflight
        .unwrap_or(PERSISTENT_BOUNDARY_INFLIGHT)
}

/// Weight pages the persistent producer keeps in flight at most outside the boundary window,
/// where neither the model nor the device profile sets it: no limit (16, at least any ring's
/// slots). 4 gained 1.7-3.3 us per step on an H100 with the hold at 1 (four rounds, lease AQ
/// and AS), so the h100 profile sets it; the H200 keeps no limit until measured (docs/perf.md).
pub const PERSISTENT_STREAM_INFLIGHT: u32 = 16;

/// [`PERSISTENT_STREAM_INFLIGHT`], or `tuning.persistent_stream_inflight` (validated: 1-16;
/// at least the ring's slots leaves the producer unlimited).
pub fn persistent_stream_inflight(t: &Tuning) -> u32 {
    t.persistent_stream_inflight
        .unwrap_or(PERSISTENT_STREAM_INFLIGHT)
}

/// Weight pages the persistent producer may warm into L2 ahead of its ring where neither the
/// model nor the device profile sets it: none (an experiment until a lease measures it).
pub const PERSISTENT_WARM_PAGES: u32 = 0;

/// [`PERSISTENT_WARM_PAGES`], or `tuning.persistent_warm_pages` (validated: 0-32): how far past
/// the next page to issue the producer reads pages into L2 while every page it issued has
/// landed, its next slot is still held and its consumers are past their inputs' staging, so
/// that HBM streams while the SM computes with a full ring (the H200's ring covers 5.7 us of
/// its stream; a layer idles HBM 11.6 us, docs/perf.md).
pub fn persistent_warm_pages(t: &Tuning) -> u32 {
    t.persistent_warm_pages.unwrap_or(PERSISTENT_WARM_PAGES)
}

/// Warm reads in flight at most: each has an mbarrier of its own, so that the producer issues
/// the next once the oldest has landed (the probe read L2-held pages fastest at 4 copies in
/// flight; the chain's warming keeps 2).
pub const PERSISTENT_WARM_INFLIGHT: u32 = 2;

/// Bytes the warm reads land in and are dropped: a real read leaves the lines in L2 where no
/// prefetch instruction does (docs/perf.md, eighth session), and a page's read lands in pieces
/// of this size, one over the other, so that warming costs the ring no slot.
pub const PERSISTENT_SINK_BYTES: u32 = 1024;

/// The tuning the persistent kernel's build compiles with: `t` with the streaming bodies'
/// warps (`consumer_warps`, the source's one `CONSUMER_WARPS`) set to the persistent kernel's,
/// so that everything sized from the streaming warps agrees with the kernel as built.
pub fn persistent_tuning(t: &Tuning) -> Tuning {
    Tuning {
        consumer_warps: Some(persistent_warps(t)),
        ..t.clone()
    }
}

/// Threads of the persistent kernel's CTA as `tuning` builds it: its consumer warps and the
/// producer warp.
pub fn persistent_threads(t: &Tuning) -> u32 {
    layout::stream_threads(&persistent_tuning(t))
}

/// Where the persistent kernel keeps what, in bytes of dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistentLayout {
    /// Ring slots (the ring is one sequence of pages across instructions; slot j belongs to
    /// consumer warp j % warps).
    pub slots: u32,
    /// Consumer warps (`tuning.persistent_warps`).
    pub warps: u32,
    /// Bytes of a weight page.
    pub page_bytes: u32,
    /// Floats of a streaming operator's input vector in the work region (the hidden size).
    pub x_len: u32,
    /// Bytes of attention's q and scores (`layout::attention_vectors_smem`), which share the
    /// input vector's bytes, so that the KV chunk region holds rows only (a ring slot more at
    /// P32/D128: docs/perf.md, fortieth session).
    pub att_vectors: u32,
    /// Bytes of the consumers' work region.
    pub work_bytes: u32,
    /// Bytes of the warm reads' sink ([`PERSISTENT_SINK_BYTES`] where the producer warms,
    /// else 0: the layout of a build that does not warm is unchanged).
    pub sink_bytes: u32,
}

const fn align128(x: u32) -> u32 {
    x.div_ceil(128) * 128
}

impl PersistentLayout {
    /// The KV history's full and free mbarriers, after every ring slot's pair.
    pub const KV_BARS_OFFSET: u32 = 2 * MAX_SLOTS * 8;

    /// Those mbarriers: the KV history's full and free.
    pub const KV_BARS: u32 = 2;

    /// The warm reads' mbarriers ([`PERSISTENT_WARM_INFLIGHT`]), after the KV history's.
    pub const WARM_BARS_OFFSET: u32 = Self::KV_BARS_OFFSET + Self::KV_BARS * 8;

    /// Where the warm reads' sink starts: after every mbarrier.
    pub fn sink_offset(&self) -> u32 {
        align128(Self::WARM_BARS_OFFSET + PERSISTENT_WARM_INFLIGHT * 8)
    }

    /// Where the consumers' work region starts: after the mbarriers and the sink.
    pub fn work_offset(&self) -> u32 {
        self.sink_offset() + self.sink_bytes
    }

    /// Bytes of the work region's shared part, at its start: a streaming operator's input
    /// vector and scratch, or attention's q and scores (the kernel's PERSISTENT_X_LEN floats,
    /// then the scratch; attention's vectors from the same offset).
    pub fn x_bytes(&self) -> u32 {
        align128((self.x_len * 4 + SCRATCH_FLOATS * 4).max(self.att_vectors))
    }

    /// Where attention's KV chunk starts: after the shared part, so that the producer's copy
    /// of the next attention's history never lands on a staged input.
    pub fn att_offset(&self) -> u32 {
        self.work_offset() + self.x_bytes()
    }

    /// Bytes of attention's KV chunk region (its K rows, then its V rows; at the end the
    /// output's partial sums).
    pub fn att_bytes(&self) -> u32 {
        self.ring_offset() - self.att_offset()
    }

    /// Where the page ring starts.
    pub fn ring_offset(&self) -> u32 {
        self.work_offset() + self.work_bytes
    }

    /// Dynamic shared memory of the kernel.
    pub fn dynamic_smem(&self) -> u32 {
        self.ring_offset() + self.slots * self.page_bytes
    }

    /// KV positions the kernel's attention stages per chunk in the work region (the source's
    /// `kv_chunk_apart` over PERSISTENT_ATT_BYTES: its vectors are not in that region).
    pub fn attention_chunk(&self, model: &Model) -> u32 {
        self.att_bytes() / layout::attention_position_smem(model)
    }
}

/// The persistent kernel's layout for `model`. The work region holds a streaming operator's
/// input vector and, beside it, attention's vectors and KV chunk; the page ring takes the rest.
/// Its slots: `tuning.persistent_slots`, or by default as many as leave attention a chunk
/// that holds the KV history of the run's middle step (`Workload::typical_kv_len`, at most
/// `max_seq_len`: one chunk, which the producer loads ahead; on llama1b_tuned 10 slots
/// measured 835 µs against 841 for the 9 that hold the whole history), at least one per
/// consumer warp; never so many that the chunk holds fewer than 32 positions.
/// The error names the field and the fix.
pub fn persistent_layout(model: &Model) -> Result<PersistentLayout, Unsupported> {
    let warps = persistent_warps(&model.tuning);
    let consumers = warps * 32;
    let hp = model.heads_per_attention_task();
    let outs = hp * model.geometry.head_dim;
    if outs > 2 * consumers {
        return Err(Unsupported(format!(
            "the persistent kernel runs attention on its {consumers} consumer threads, two \
             outputs each, and this model's attention task has {outs} (query heads x head_dim). \
             Fix: raise lowering.attention_split or tuning.persistent_warps"
        )));
    }
    let hidden = model.geometry.hidden;
    let page_bytes = model.lowering.page_bytes;
    let mut l = PersistentLayout {
        slots: 1,
        warps,
        page_bytes,
        // The longest input vector any operator stages (the hidden vector, or down's whole
        // input where its K chunk is staged).
        x_len: mkc_ir::work::MATVECS
            .iter()
            .filter_map(|&kind| {
                Some(layout::staged_input(
                    model,
                    kind,
                    &mkc_ir::work::matvec(model, kind)?,
                ))
            })
            .fold(hidden, u32::max),
        att_vectors: layout::attention_vectors_smem(model),
        work_bytes: 0,
        sink_bytes: if persistent_warm_pages(&model.tuning) > 0 {
            PERSISTENT_SINK_BYTES
        } else {
            0
        },
    };
    let budget = SMEM_PER_CTA - PERSISTENT_STATIC_SMEM;
    let w = &model.workload;
    // The ring slots that fit beside a chunk of `chunk` KV positions.
    let fit = |chunk: u32| {
        let att = chunk * layout::attention_position_smem(model);
        let room = budget.saturating_sub(l.work_offset() + l.x_bytes() + align128(att));
        (room / page_bytes).min(MAX_SLOTS)
    };
    let part_max = layout::attention_part_positions(model);
    // The output's partial sums reuse the KV chunk region, which holds them alone (attention's
    // vectors live apart).
    let reduce_chunk = layout::attention_reduce_chunk(model, consumers, 0);
    let min_chunk = MIN_PERSISTENT_CHUNK.min(part_max).max(reduce_chunk);
    let most = fit(min_chunk);
    if most == 0 {
        return Err(Unsupported(format!(
            "the persistent kernel's shared memory ({budget} bytes) cannot hold one ring slot \
             ({page_bytes} bytes) beside attention's scores of workload.max_seq_len {} \
             positions. Fix: lower workload.max_seq_len or raise lowering.attention_split",
            w.max_seq_len
        )));
    }
    l.slots = match model.tuning.persistent_slots {
        Some(n) if n > most => {
            return Err(Unsupported(format!(
                "tuning.persistent_slots {n}: the persistent kernel's shared memory holds at \
                 most {most} ring slots of {page_bytes} bytes beside attention's {min_chunk} \
                 KV positions. Fix: set tuning.persistent_slots to at most {most}"
            )))
        }
        Some(n) => n,
        None => {
            // The middle step's history, or its first part under split-KV.
            let typical = w.typical_kv_len().min(w.max_seq_len);
            let history = model.attention_part_len(typical).max(min_chunk);
            fit(history).clamp(warps.min(most), most)
        }
    };
    l.work_bytes = (budget - l.work_offset() - l.slots * page_bytes) / 128 * 128;
    Ok(l)
}

/// Dynamic shared memory of the persistent kernel (0 where it cannot run `model`).
pub fn persistent_dynamic_smem(model: &Model) -> u32 {
    persistent_layout(model).map_or(0, |l| l.dynamic_smem())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The persistent kernel's ring of `slots` pages and attention's KV chunk fit its shared
    /// memory, for every embedded model at 4, 7 and 8 consumer warps (the simulator's loader
    /// buffers exactly the slots).
    #[test]
    fn the_persistent_ring_and_kv_chunk_fit_the_kernels_shared_memory() {
        for (name, text) in mkc_ir::embedded::MODELS {
            let mut model = Model::parse(name, text).unwrap();
            for warps in [4, 7, 8] {
                model.tuning.persistent_warps = Some(warps);
                let Ok(l) = persistent_layout(&model) else {
                    continue;
                };
                assert!(l.slots >= 1, "{name}");
                assert!(
                    l.slots as u64 * l.page_bytes as u64 <= l.dynamic_smem() as u64,
                    "{name}"
                );
                let kv = l.attention_chunk(&model) as u64 * 4 * model.geometry.head_dim as u64;
                assert!(kv > 0 && kv <= l.att_bytes() as u64, "{name}");
            }
        }
    }

    proptest! {
        /// Wherever the layout is granted, its regions follow one another without overlap,
        /// 128-byte aligned where bulk copies land, attention keeps its minimum chunk and the
        /// whole fits the CTA's shared memory; where refused, the error says how to fix it.
        #[test]
        fn the_persistent_layout_partitions_shared_memory(
            which in 0usize..mkc_ir::embedded::MODELS.len(),
            max_seq in 1u32..20_000,
            page_kib in prop::sample::select(vec![4u32, 8, 16, 32]),
            split in prop::sample::select(vec![1u32, 2, 4, 8]),
            warps in prop::option::of(prop::sample::select(vec![4u32, 5, 7, 8])),
            warm in 0u32..3,
        ) {
            let (name, text) = mkc_ir::embedded::MODELS[which];
            let mut model = Model::parse(name, text).unwrap();
            model.workload.max_seq_len = max_seq;
            model.lowering.page_bytes = page_kib * 1024;
            model.lowering.attention_split = split;
            model.tuning.persistent_warps = warps;
            model.tuning.persistent_warm_pages = Some(warm);
            prop_assume!(model.validate(name).is_ok());
            match persistent_layout(&model) {
                Ok(l) => {
                    prop_assert!(l.slots >= 1 && l.slots <= MAX_SLOTS);
                    let bars = PersistentLayout::WARM_BARS_OFFSET + PERSISTENT_WARM_INFLIGHT * 8;
                    prop_assert!(bars <= l.sink_offset());
                    prop_assert!(l.sink_offset() + l.sink_bytes <= l.work_offset());
                    prop_assert_eq!(l.sink_bytes > 0, warm > 0);
                    prop_assert!(l.work_offset() + l.x_len * 4 + SCRATCH_FLOATS * 4 <= l.att_offset());
                    prop_assert!(
                        l.work_offset() + layout::attention_vectors_smem(&model) <= l.att_offset()
                    );
                    prop_assert!(l.att_offset() < l.ring_offset());
                    for offset in [l.sink_offset(), l.work_offset(), l.att_offset(), l.ring_offset()] {
                        prop_assert_eq!(offset % 128, 0);
                    }
                    prop_assert!(l.attention_chunk(&model) >= MIN_PERSISTENT_CHUNK.min(max_seq));
                    // Its output partial sums fit the region too.
                    let reduce = layout::attention_reduce_smem(&model, l.warps * 32);
                    prop_assert!(reduce <= l.att_bytes());
                    prop_assert!(
                        l.attention_chunk(&model) * layout::attention_position_smem(&model)
                            <= l.att_bytes()
                    );
                    prop_assert!(l.dynamic_smem() + PERSISTENT_STATIC_SMEM <= SMEM_PER_CTA);
                }
                Err(e) => prop_assert!(e.0.contains("Fix:"), "{}", e.0),
            }
        }
    }
}
