//! The operator catalogue: for each operator kind, its kernel entry point, its work unit
//! (`mkc_ir::work`), its launch shape (CTAs, threads, declared registers) and its shared-memory
//! layout. It needs no cudarc: the scheduler builds the launch plan from it, the simulator times
//! that plan, and the CUDA backend launches it and generates the kernels' constants from it.

pub mod ablation;
pub mod choose;
pub mod kv_parts;
pub mod launch;
pub mod layout;
pub mod persistent;

pub use ablation::Ablation;
pub use choose::choose_lowering;
pub use kv_parts::kv_parts_for;
pub use launch::{cta_tasks, declared_resources, grid, GridShape, ResourceSource, Resources};
pub use layout::{
    att_threads, attention_chunk, attention_part_positions, attention_reduce_smem, blocked_k,
    consumer_warps, dynamic_smem, fragment_input, page_range, prefetch_bytes, ring_next,
    ring_owner, ring_slot, staged_input, stream, stream_threads, streamable_k, tensor_core_shape,
    threads, warm_depth, warm_slot, Stream, ATT_THREADS, CONSUMER_WARPS, MAX_PAGE_ROWS, MAX_SLOTS,
    REGISTER_K, SMEM_PER_CTA, SMEM_PER_SM, TENSOR_CORE_ROWS, WARM_DEPTH,
};

pub use persistent::{
    persistent_boundary_inflight, persistent_dynamic_smem, persistent_layout,
    persistent_stream_inflight, persistent_threads, persistent_tuning, persistent_warm_pages,
    persistent_warps, PersistentLayout, PERSISTENT_BOUNDARY_INFLIGHT, PERSISTENT_MAX_REFS,
    PERSISTENT_SINK_BYTES, PERSISTENT_STATIC_SMEM, PERSISTENT_STREAM_INFLIGHT,
    PERSISTENT_WARM_INFLIGHT, PERSISTENT_WARM_PAGES, PERSISTENT_WARPS,
};

use mkc_ir::OpKind;

/// Kernel entry names, in operator order.
pub const ENTRY_POINTS: &[(&str, OpKind)] = &[
    ("k_qkv_rope", OpKind::QkvRope),
    ("k_attention", OpKind::Attention),
    ("k_o_proj", OpKind::OProj),
    ("k_up_gate", OpKind::UpGate),
    ("k_down", OpKind::Down),
    ("k_lm_head", OpKind::LmHead),
];

/// The persistent megakernel's entry point: one CTA per SM runs every operator's body.
pub const PERSISTENT_ENTRY: &str = "k_persistent";

/// The kernel entry point of operator `kind`.
pub fn entry_point(kind: OpKind) -> &'static str {
    ENTRY_POINTS
        .iter()
        .find(|(_, k)| *k == kind)
        .map_or("k_unknown", |(n, _)| n)
}

/// The operator kind whose kernel is `name`, if any.
pub fn kind_of(name: &str) -> Option<OpKind> {
    ENTRY_POINTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
}

/// Why the CUDA kernels cannot run a model; the message names the field and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

/// Checks the model fits the kernels' assumptions; the error names the field and the fix.
pub fn check_model(model: &mkc_ir::Model) -> Result<(), Unsupported> {
    let g = &model.geometry;
    let fail = |field: &str, why: String| {
        Err(Unsupported(format!(
            "the CUDA backend cannot run this model: {field}: {why}"
        )))
    };
    let hp = model.heads_per_attention_task();
    let att = att_threads(&model.tuning);
    if hp * g.head_dim > 2 * att || !g.head_dim.is_multiple_of(8) {
        return fail(
            "lowering.attention_split",
            format!(
                "{hp} query heads of {} per attention task exceed the kernel's {} outputs \
                 (head_dim must also be a multiple of 8); raise attention_split",
                g.head_dim,
                2 * att
            ),
        );
    }
    if dynamic_smem(model, OpKind::Attention) > SMEM_PER_CTA {
        return fail(
            "workload.max_seq_len",
            "the attention scores do not fit in shared memory; lower max_seq_len".into(),
        );
    }
    let page = model.lowering.page_bytes;
    if !page.is_power_of_two() || page < 8192 {
        return fail(
            "lowering.page_bytes",
            format!(
                "the kernels stream pages of a power of two of at least 8192 bytes (a QKV page \
                 must hold whole RoPE pairs), not {page}; use 16384 (8192 measured ~15% slower)"
            ),
        );
    }
    for kind in mkc_ir::work::MATVECS {
        let Some(s) = stream(model, kind) else {
            continue;
        };
        let field = match kind {
            OpKind::OProj => "lowering.vtp_shards.attention_o_proj",
            OpKind::Down => "lowering.vtp_shards.up_gate_down",
            _ => "geometry.hidden",
        };
        // Attention inside the O-projection: its K chunk is one attention task's heads, in
        // pages whose rows the lanes own.
        if kind == OpKind::OProj && model.lowering.attention_in_o_proj.is_some() {
            if !layout::narrow_k(s.work.k, s.work.page_rows()) {
                return fail(
                    "lowering.attention_in_o_proj",
                    format!(
                        "attention inside the O-projection takes K chunks of one attention \
                         task's {} columns (query heads x head_dim), and its page loop takes \
                         at most 256, in pages of a multiple of 32 rows; raise \
                         lowering.attention_split or remove attention_in_o_proj",
                        s.work.k
                    ),
                );
            }
        } else if s.work.page_rows() > layout::MAX_PAGE_ROWS {
            return fail(
                "lowering.page_bytes",
                format!(
                    "{}'s pages hold {} rows of {} columns; the kernels' page loop takes at most \
                     {} (a lane of a warp per row), which takes K chunks of at least {} columns \
                     in pages of {page} bytes",
                    kind.name(),
                    s.work.page_rows(),
                    s.work.k,
                    layout::MAX_PAGE_ROWS,
                    page / (2 * layout::MAX_PAGE_ROWS)
                ),
            );
        } else if !streamable_k(s.work.k) {
            // A chunk longer than the registers hold is taken block by block from the input
            // staged in shared memory (the normalised operators stage theirs anyway).
            return fail(
                field,
                format!(
                    "{} streams rows of {} columns; the kernels take K chunks of whole 16-byte \
                     pieces (a multiple of 8 columns; choose shards so that the chunk is one)",
                    kind.name(),
                    s.work.k,
                ),
            );
        }
        if s.ring_offset() + s.warps * page > SMEM_PER_CTA {
            return fail(
                "geometry",
                format!("{} needs too much shared memory", kind.name()),
            );
        }
    }
    Ok(())
}
