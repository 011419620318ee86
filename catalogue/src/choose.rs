//! A lowering for a geometry nobody has tuned (a checkpoint's, `mkc model`): the first, in the
//! order measured fastest on the H200, that the model's validation and the kernels accept.

use mkc_ir::model::{Geometry, Lowering, Tuning, VtpShards, Workload};
use mkc_ir::Model;

use crate::{check_model, persistent_layout, Unsupported};

/// MLP edge shard counts in the order they measured on Llama-3.2-1B (docs/perf.md: persistent
/// fastest at 4, pdl at 2 and 4; 1 and 8 slower).
const UP_GATE_DOWN: [u32; 4] = [4, 2, 1, 8];

/// Widths `choose_lowering` pads an MLP that no candidate tiles to: the next multiples of this
/// many columns (the kernels' K-chunk group), up to `MLP_PAD_STEPS` of them (11004 takes
/// 11008).
const MLP_PAD_MULTIPLE: u32 = 256;
/// How many padded widths `choose_lowering` tries before it gives up.
const MLP_PAD_STEPS: u32 = 8;

/// LM-head task runs in pages (4 as `llama1b_tuned`, then 1: a vocabulary whose pages 4 does
/// not divide).
const LM_HEAD_TASK_PAGES: [u32; 2] = [4, 1];

/// Task runs of the other matvecs in pages: 1 (as `llama1b_tuned`), then longer, for a model
/// whose 1-page tasks are more than the scheduler takes (Llama-2-13B's 40 layers).
const MATVEC_TASK_PAGES: [u32; 4] = [1, 2, 4, 8];

/// Page sizes, in the order tried: 16 KiB (every measured layout), then 32 KiB for a geometry
/// whose rows a 16 KiB page cannot hold (Llama-2-13B: a gate and an up row of 5,120 columns
/// are 20 KiB).
const PAGE_BYTES: [u32; 2] = [16384, 32768];

/// Consumer warps of the streaming kernels and the persistent kernel, in the order tried: the
/// defaults (None), then fewer, so that a ring of larger pages, one slot per warp, fits in
/// shared memory beside the staged input (down stages its whole input: 28,672 floats on the
/// 70B Llamas, 112 KiB beside three 32 KiB slots).
const CONSUMER_WARPS: [Option<u32>; 6] = [None, Some(6), Some(5), Some(4), Some(3), Some(2)];

/// A page size and the warps that stream it: what a candidate lowering is tried with, 16 KiB
/// pages and the default warps first, then larger pages and fewer warps.
#[derive(Clone, Copy)]
struct Setup {
    page_bytes: u32,
    warps: Option<u32>,
}

/// Every [`Setup`], in the order tried.
fn setups() -> impl Iterator<Item = Setup> {
    PAGE_BYTES.into_iter().flat_map(|page_bytes| {
        CONSUMER_WARPS
            .into_iter()
            .map(move |warps| Setup { page_bytes, warps })
    })
}

/// The lowerings tried for `g` at one page size, best first: one query head per attention task
/// (as the tuned layouts, measured fastest), then fewer tasks per KV head; each with every MLP
/// shard count and LM-head run, shortest task runs first.
fn lowerings(g: &Geometry) -> Vec<Lowering> {
    let group = if g.kv_heads > 0 && g.heads.is_multiple_of(g.kv_heads) {
        g.heads / g.kv_heads
    } else {
        1
    };
    let splits = (1..=group).rev().filter(|s| group.is_multiple_of(*s));
    let mut out = Vec::new();
    for matvec_task_pages in MATVEC_TASK_PAGES {
        for attention_split in splits.clone() {
            for up_gate_down in UP_GATE_DOWN {
                for lm_head_task_pages in LM_HEAD_TASK_PAGES {
                    out.push(Lowering {
                        matvec_task_pages,
                        lm_head_task_pages,
                        attention_split,
                        vtp_shards: VtpShards {
                            up_gate_down,
                            ..VtpShards::default()
                        },
                        ..Lowering::default()
                    });
                }
            }
        }
    }
    out
}

/// The model of `name`, `g` and `workload` at the first [`Setup`] where a lowering fits: the
/// first lowering that validates and that both the chain kernels and the persistent kernel can
/// run, else the first that the chain kernels can run. Where none fits `g`'s MLP width, the MLP
/// is zero-padded (its stored width kept as `geometry.checkpoint_intermediate`) to the first
/// wider multiple of 256 that one fits, before a larger page is tried (padding costs a few
/// zero columns; a larger page, fewer warps). When none fits at all, the error
/// gives each distinct reason, in the order tried, for the checkpoint's own width.
pub fn choose_lowering(
    name: &str,
    g: &Geometry,
    workload: &Workload,
) -> Result<Model, Unsupported> {
    let g = &with_padded_heads(g);
    // A size out of range fails every candidate alike (2^29 heads took 32 s to refuse through
    // them all).
    let alone = Model {
        name: name.to_string(),
        geometry: g.clone(),
        workload: workload.clone(),
        lowering: Lowering::default(),
        tuning: Tuning::default(),
    };
    alone
        .validate_geometry_sizes("the checkpoint's geometry")
        .map_err(|e| Unsupported(e.to_string()))?;
    let mut reasons = Vec::new();
    for setup in setups() {
        if let Some(m) = choose_in_setup(name, g, workload, setup, &mut reasons) {
            return Ok(m);
        }
    }
    Err(Unsupported(format!(
        "no lowering mkc tries fits this geometry (attention splits, MLP shards 4, 2, 1 and 8, \
         task runs of 1 to 8 pages, LM-head runs of 4 or 1, pages of 16 or 32 KiB, 2 to 8 \
         consumer warps): {}. Otherwise, write the lowering by hand (README, \"Model file \
         format\"), if the kernels take this shape at all",
        reasons.join("; ")
    )))
}

/// `g` with a head width the kernels cannot read in 16-byte pieces (OpenLLaMA-3B's 100)
/// zero-padded (`Geometry::padded_head_dim`), its stored width kept as
/// `geometry.checkpoint_head_dim`; any other `g` as it is (an odd width stays, for validation
/// to refuse).
fn with_padded_heads(g: &Geometry) -> Geometry {
    match g.padded_head_dim() {
        Some(padded) if g.checkpoint_head_dim.is_none() => Geometry {
            head_dim: padded,
            checkpoint_head_dim: Some(g.head_dim),
            ..g.clone()
        },
        _ => g.clone(),
    }
}

/// [`choose_lowering`] at one page size and warp count; adds why its candidates at `g`'s own
/// width fail to `reasons`.
fn choose_in_setup(
    name: &str,
    g: &Geometry,
    workload: &Workload,
    setup: Setup,
    reasons: &mut Vec<String>,
) -> Option<Model> {
    if let Some(m) = choose_at_width(name, g, workload, setup, reasons) {
        return Some(m);
    }
    if g.checkpoint_intermediate.is_some() {
        return None;
    }
    let first = g.intermediate / MLP_PAD_MULTIPLE + 1;
    (first..first + MLP_PAD_STEPS)
        .filter_map(|groups| groups.checked_mul(MLP_PAD_MULTIPLE))
        .find_map(|width| {
            let padded = Geometry {
                intermediate: width,
                checkpoint_intermediate: Some(g.intermediate),
                ..g.clone()
            };
            choose_at_width(name, &padded, workload, setup, &mut Vec::new())
        })
}

/// [`choose_in_setup`] at `g`'s MLP width as it is; each distinct reason a candidate fails
/// for is added to `reasons`.
fn choose_at_width(
    name: &str,
    g: &Geometry,
    workload: &Workload,
    setup: Setup,
    reasons: &mut Vec<String>,
) -> Option<Model> {
    let model = |lowering: Lowering| Model {
        name: name.to_string(),
        geometry: g.clone(),
        workload: workload.clone(),
        lowering: Lowering {
            page_bytes: setup.page_bytes,
            ..lowering
        },
        tuning: Tuning {
            consumer_warps: setup.warps,
            persistent_warps: setup.warps,
            ..Tuning::default()
        },
    };
    let fits = |m: &Model| -> Result<(), String> {
        m.validate("a candidate lowering")
            .map_err(|e| e.to_string())?;
        check_model(m).map_err(|e| e.to_string())
    };
    let mut chain_only = None;
    for lowering in lowerings(g) {
        let m = model(lowering);
        match fits(&m) {
            Ok(()) if persistent_layout(&m).is_ok() => return Some(m),
            Ok(()) => {
                chain_only.get_or_insert(m);
            }
            Err(why) => {
                // Each reason ends a clause of the message above, which adds its own stop.
                let why = why.trim_end_matches('.').to_string();
                if !reasons.contains(&why) {
                    reasons.push(why);
                }
            }
        }
    }
    chain_only
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(name: &str) -> Geometry {
        mkc_ir::embedded::resolve_model(name).unwrap().geometry
    }

    /// A size out of range is refused by its field before any candidate is tried (a fuzzed
    /// config with 2^29 query heads took 32 s through every candidate).
    #[test]
    fn a_geometry_out_of_range_is_refused_before_the_search() {
        let mut g = geometry("llama8b");
        g.heads = 1 << 29;
        let e = choose_lowering("x", &g, &Workload::default())
            .unwrap_err()
            .0;
        assert!(
            e.contains("geometry.heads") && e.contains("Fix") && !e.contains("candidate"),
            "{e}"
        );
    }

    /// The 70B Llamas' shape (hidden 8,192, MLP 28,672, 64 query and 8 KV heads of 128): QKV's
    /// RoPE pairs need 32 KiB pages and down's staged input leaves room for three slots, so
    /// three warps on both kernels, in 8-page tasks (the fewest under the task cap); at two
    /// layers as at eighty.
    #[test]
    fn the_70b_llamas_take_three_warps() {
        for layers in [2, 80] {
            let mut g = geometry("llama8b");
            (g.hidden, g.intermediate, g.layers) = (8192, 28672, layers);
            (g.heads, g.kv_heads, g.head_dim, g.vocab) = (64, 8, 128, 128256);
            let m = choose_lowering("x", &g, &Workload::default()).unwrap();
            assert_eq!(
                (
                    m.lowering.page_bytes,
                    m.tuning.consumer_warps,
                    m.tuning.persistent_warps
                ),
                (32768, Some(3), Some(3)),
                "{layers} layers"
            );
            assert!(persistent_layout(&m).is_ok() && check_model(&m).is_ok());
        }
    }

    #[test]
    fn llama_1b_gets_the_tuned_lowering() {
        let m = choose_lowering("x", &geometry("llama1b"), &Workload::default()).unwrap();
        let l = &m.lowering;
        assert_eq!(
            (
                l.matvec_task_pages,
                l.lm_head_task_pages,
                l.attention_split,
                l.vtp_shards.up_gate_down
            ),
            (1, 4, 4, 4)
        );
    }

    #[test]
    fn an_mlp_whose_quarter_is_no_k_chunk_takes_fewer_shards() {
        // TinyLlama-1.1B's MLP (5632 = 22 x 256): a quarter (1408, 176 pieces of 8 columns) is
        // a K chunk the kernels take, its last lane round partial.
        let mut g = geometry("llama1b");
        g.intermediate = 5632;
        g.kv_heads = 4;
        let m = choose_lowering("x", &g, &Workload::default()).unwrap();
        assert_eq!(m.lowering.vtp_shards.up_gate_down, 4);
        // 5648: a quarter (1412) is no whole number of 16-byte pieces, a half (2824) is.
        g.intermediate = 5648;
        let m = choose_lowering("x", &g, &Workload::default()).unwrap();
        assert_eq!(m.lowering.vtp_shards.up_gate_down, 2);
        assert!(check_model(&m).is_ok());
    }

    #[test]
    fn a_head_the_kernels_cannot_read_is_zero_padded_to_a_multiple_of_8() {
        // OpenLLaMA-3B: 32 heads of 100 in a residual of 3200; padded to 104, its stored width
        // kept, and runnable by both kernel families.
        let mut g = geometry("llama1b");
        (g.hidden, g.intermediate, g.layers) = (3200, 8640, 26);
        (g.heads, g.kv_heads, g.head_dim) = (32, 32, 100);
        (g.vocab, g.rope_scaling) = (32000, None);
        let m = choose_lowering("x", &g, &Workload::default()).unwrap();
        assert_eq!(m.geometry.head_dim, 104);
        assert_eq!(m.geometry.checkpoint_head_dim, Some(100));
        assert_eq!(m.geometry.as_stored(), g);
        assert!(check_model(&m).is_ok());
        // A width of 8s stays as it is; an odd one is left for validation to refuse.
        let m = choose_lowering("x", &geometry("llama1b"), &Workload::default()).unwrap();
        assert_eq!(m.geometry.checkpoint_head_dim, None);
        g.head_dim = 99;
        let err = choose_lowering("x", &g, &Workload::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("geometry.head_dim"), "{err}");
        assert!(err.contains("must be even"), "{err}");
        assert!(
            !err.contains("checkpoint_head_dim"),
            "no padding fixes it: {err}"
        );
    }

    #[test]
    fn an_mlp_no_lowering_tiles_is_zero_padded_to_one_that_fits() {
        // An MLP of 11,004 columns: no shard count's K chunk is whole 16-byte pieces (11004 =
        // 4 x 2751); padded to 11,008 (43 x 256), whose quarter is.
        let mut g = geometry("llama8b");
        g.intermediate = 11004;
        g.kv_heads = 32;
        let m = choose_lowering("x", &g, &Workload::default()).unwrap();
        assert_eq!(m.geometry.intermediate, 11008);
        assert_eq!(m.geometry.checkpoint_intermediate, Some(11004));
        assert_eq!(m.geometry.as_stored(), g);
        assert!(check_model(&m).is_ok());
        // A width that fits as it is stays unpadded: Llama-2-7B's 11008 among them.
        g.intermediate = 11008;
        let m = choose_lowering("x", &g, &Workload::default()).unwrap();
        assert_eq!(m.geometry.checkpoint_intermediate, None);
        let m = choose_lowering("x", &geometry("llama1b"), &Workload::default()).unwrap();
        assert_eq!(m.geometry.checkpoint_intermediate, None);
    }

    #[test]
    fn a_geometry_no_lowering_fits_is_refused_with_a_reason() {
        let mut g = geometry("llama1b");
        g.head_dim = 61; // odd: no padding makes RoPE's pairs whole
        g.hidden = 64 * 32;
        let err = choose_lowering("x", &g, &Workload::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("no lowering"), "{err}");
        assert!(!err.contains(".."), "a reason's stop doubled: {err}");
    }

    /// Llama-2-13B's geometry.
    fn llama_2_13b() -> Geometry {
        let mut g = geometry("llama1b");
        g.hidden = 5120;
        g.heads = 40;
        g.kv_heads = 40;
        g.head_dim = 128;
        g.intermediate = 13824;
        g.vocab = 32000;
        g
    }

    #[test]
    fn rows_wider_than_a_16_kib_page_take_32_kib_pages_and_fewer_warps() {
        // A gate and an up row of 5,120 columns are 20 KiB; a 32 KiB ring slot per warp
        // leaves room for at most 6 warps beside the staged input.
        let m = choose_lowering("x", &llama_2_13b(), &Workload::default()).unwrap();
        assert_eq!(m.lowering.page_bytes, 32768);
        assert!(check_model(&m).is_ok() && persistent_layout(&m).is_ok());
        let warps = m
            .tuning
            .consumer_warps
            .expect("fewer warps than the default");
        assert!(warps < crate::layout::consumer_warps(&Tuning::default()));
        // The O-projection's pages hold 2 rows (they fit 3, which 5,120 does not divide).
        let o = mkc_ir::work::matvec(&m, mkc_ir::OpKind::OProj).unwrap();
        assert_eq!((o.k, o.page_rows()), (5120, 2));
    }

    #[test]
    fn a_row_wider_than_every_page_is_named_once_in_the_refusal() {
        // A gate and an up row of 16,384 columns are 64 KiB: no page mkc tries holds them.
        let mut g = llama_2_13b();
        g.hidden = 16384;
        g.heads = 128;
        g.kv_heads = 128;
        let err = choose_lowering("x", &g, &Workload::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("page_bytes"), "{err}");
        assert!(!err.contains(".."), "a reason's stop doubled: {err}");
    }
}
