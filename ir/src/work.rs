//! The kernels' work units: what one task of each matvec operator is.
//!
//! A matvec operator streams its weights as pages of `lowering.page_bytes`: a page holds whole
//! rows of one K chunk (of both matrices, gate and up, for the paired up/gate operator), as many
//! as fit and divide the chunk's rows, so that every page of an operator holds the same rows. A task
//! is a run of `task_pages` consecutive pages of one K chunk, and a CTA of a chain grid runs a
//! contiguous range of tasks. Lowering, the scheduler's launch plan, the simulator and the CUDA
//! backend all take this geometry from here: it is the one description of page splits.

use crate::graph::OpKind;
use crate::model::Model;

/// How one matvec operator is divided into pages and tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatvecWork {
    /// Columns of one page row: the K chunk.
    pub k: u32,
    /// K chunks (split-K); chunk c covers input columns `[c k, (c + 1) k)`.
    pub splits: u32,
    /// Output rows of one chunk.
    pub out_rows: u32,
    /// A page holds matching rows of two matrices (gate and up).
    pub paired: bool,
    /// Bytes of one page.
    pub page_bytes: u32,
    /// Bytes of one weight element.
    pub elem_bytes: u32,
    /// Pages per task.
    pub task_pages: u32,
    /// Output rows a page holds a multiple of: 2 for QKV, whose weights hold each RoPE pair's
    /// two rows side by side (a page holds whole pairs), else 1.
    pub row_multiple: u32,
}

impl MatvecWork {
    /// Matrix rows in one page: the most output rows that `page_bytes` holds (of both matrices
    /// when paired) that divide the chunk's rows in multiples of `row_multiple`, so that every
    /// page is alike (Llama-2-13B's O-projection: 2 rows of 5,120 columns in a 32 KiB page that
    /// fits 3). Where not even `row_multiple` rows fit, `row_multiple` (of each matrix):
    /// validation refuses that page.
    pub fn page_rows(&self) -> u32 {
        let per_matrix = if self.paired { 2 } else { 1 };
        let step = self.row_multiple.max(1);
        let fit = self.page_bytes as u64
            / (self.elem_bytes as u64 * self.k.max(1) as u64 * per_matrix as u64);
        let most = fit.min(self.out_rows as u64) as u32 / step;
        let out = (1..=most)
            .rev()
            .map(|n| n * step)
            .find(|rows| self.out_rows.is_multiple_of(*rows))
            .unwrap_or(step);
        out * per_matrix
    }

    /// Weight bytes a page carries: its matrix rows of one K chunk (at most `page_bytes`: a
    /// page of 3072-column rows holds two, 12 KiB of its 16 KiB slot).
    pub fn page_weight_bytes(&self) -> u64 {
        self.page_rows() as u64 * self.k as u64 * self.elem_bytes as u64
    }

    /// Output rows of one page (matrix rows, halved for a paired page).
    pub fn page_out(&self) -> u32 {
        self.page_rows() / if self.paired { 2 } else { 1 }
    }

    /// Pages of one K chunk.
    pub fn chunk_pages(&self) -> u32 {
        self.out_rows / self.page_out()
    }

    /// Pages of the operator.
    pub fn pages(&self) -> u32 {
        self.splits * self.chunk_pages()
    }

    /// Tasks of one K chunk.
    pub fn chunk_tasks(&self) -> u32 {
        self.chunk_pages() / self.task_pages
    }

    /// Tasks of the operator: chunk-major, row-minor.
    pub fn tasks(&self) -> u32 {
        self.splits * self.chunk_tasks()
    }

    /// Output rows of one task.
    pub fn task_rows(&self) -> u32 {
        self.page_out() * self.task_pages
    }

    /// Weight bytes of one task (its pages' matrix rows, both matrices when paired).
    pub fn task_weight_bytes(&self) -> u64 {
        self.task_pages as u64 * self.page_weight_bytes()
    }

    /// K chunk and first output row of page `p`: pages are chunk-major, row-minor (the
    /// kernels' `page_coords`, and the order `k_page_major` stores split-K weights in).
    pub fn page_coords(&self, p: u32) -> (u32, u32) {
        let per_chunk = self.chunk_pages();
        (p / per_chunk, (p % per_chunk) * self.page_out())
    }

    /// K chunk and first output row of task `t`.
    pub fn task_coords(&self, t: u32) -> (u32, u32) {
        let per_chunk = self.chunk_tasks();
        (t / per_chunk, (t % per_chunk) * self.task_rows())
    }
}

/// The work geometry of matvec operator `kind` of `model` (None for attention).
pub fn matvec(model: &Model, kind: OpKind) -> Option<MatvecWork> {
    let g = &model.geometry;
    let l = &model.lowering;
    let s = &l.vtp_shards;
    let (k, splits, out_rows, paired, task_pages) = match kind {
        OpKind::Attention => return None,
        OpKind::QkvRope => (g.hidden, 1, model.qkv_rows(), false, l.matvec_task_pages),
        OpKind::OProj => match l.attention_in_o_proj {
            // Attention inside: a K chunk per attention task (its query heads' columns), its
            // rows dealt over `tasks` tasks.
            Some(tasks) => {
                let k = (model.heads_per_attention_task() * g.head_dim).max(1);
                let splits = model.q_dim() / k;
                let chunk = MatvecWork {
                    k,
                    splits,
                    out_rows: g.hidden,
                    paired: false,
                    page_bytes: l.page_bytes,
                    elem_bytes: g.dtype.bytes() as u32,
                    task_pages: 1,
                    row_multiple: 1,
                };
                let pages = chunk.chunk_pages() / tasks.max(1);
                (k, splits, g.hidden, false, pages)
            }
            None => (
                model.q_dim() / s.attention_o_proj.max(1),
                s.attention_o_proj,
                g.hidden,
                false,
                l.matvec_task_pages,
            ),
        },
        OpKind::UpGate => (g.hidden, 1, g.intermediate, true, l.matvec_task_pages),
        OpKind::Down => (
            g.intermediate / s.up_gate_down.max(1),
            s.up_gate_down,
            g.hidden,
            false,
            l.matvec_task_pages,
        ),
        OpKind::LmHead => (g.hidden, 1, g.vocab, false, l.lm_head_task_pages),
    };
    Some(MatvecWork {
        k,
        splits,
        out_rows,
        paired,
        page_bytes: l.page_bytes,
        elem_bytes: g.dtype.bytes() as u32,
        task_pages: task_pages.max(1),
        row_multiple: if kind == OpKind::QkvRope { 2 } else { 1 },
    })
}

/// Every matvec operator kind, in layer order.
pub const MATVECS: [OpKind; 5] = [
    OpKind::QkvRope,
    OpKind::OProj,
    OpKind::UpGate,
    OpKind::Down,
    OpKind::LmHead,
];

/// The rows `[start, end)` of a `len`-element residual vector that task `t` of `tasks` writes
/// when an operator's tasks store a vector between them (the QKV operator's `x_in`, up/gate's
/// `x_mid`): balanced runs of whole float4 groups, so that a CTA running a contiguous range of
/// tasks stores one contiguous range. Empty (start == end) for a task with no share.
pub fn residual_share(t: u32, tasks: u32, len: u32) -> (u32, u32) {
    let groups = len.div_ceil(4) as u64;
    let at = |i: u32| ((i as u64 * groups / tasks.max(1) as u64) as u32 * 4).min(len);
    (at(t), at(t + 1))
}

/// Floats of one split-KV partial record of one query head: its `head_dim` outputs (already
/// divided by its own softmax sum), then its softmax maximum and sum, then two unused floats
/// that keep every record 16-byte aligned. The kernels take it as the generated
/// `ATT_PART_RECORD`.
pub fn attention_part_record(head_dim: u32) -> u32 {
    attention_part_written(head_dim) + 2
}

/// Floats of a split-KV partial record that attention writes (outputs, maximum, sum): the
/// record's padding is never written, so a check that poisons the tensor finds it poisoned.
pub fn attention_part_written(head_dim: u32) -> u32 {
    head_dim + 2
}

/// The first row of query head `head`'s record of part `part` (of `parts`) in attention's
/// output tensor: records are head-major, so that a shard of whole heads holds every part of
/// them.
pub fn attention_part_row(head: u32, part: u32, parts: u32, head_dim: u32) -> u64 {
    (head as u64 * parts as u64 + part as u64) * attention_part_record(head_dim) as u64
}

/// The positions `[lo, hi)` part `part` of `parts` covers of a `len`-position KV history:
/// runs of `ceil(len / parts)` positions in order, the last parts empty where the history is
/// shorter than the parts (the kernels' `kv_part_range`, which the bench's reference check
/// covers: a part the kernel and this disagree on is priced wrongly, never computed wrongly,
/// since the merge takes whatever each part holds).
pub fn kv_part(len: u32, part: u32, parts: u32) -> (u32, u32) {
    let per = len.div_ceil(parts.max(1));
    let lo = (part as u64 * per as u64).min(len as u64) as u32;
    (lo, lo.saturating_add(per).min(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of a history tile it in order, whatever the length and part count.
    #[test]
    fn kv_parts_tile_the_history() {
        for len in [0, 1, 2, 7, 96, 160, 1056, 2048] {
            for parts in [1, 2, 3, 4, 8, 13] {
                let mut next = 0;
                for p in 0..parts {
                    let (lo, hi) = kv_part(len, p, parts);
                    assert_eq!(lo, next, "len {len} parts {parts} part {p}");
                    assert!(hi >= lo && hi - lo <= len.div_ceil(parts));
                    next = hi;
                }
                assert_eq!(next, len, "len {len} parts {parts}");
            }
        }
    }

    /// Pages and tasks are ordered alike (chunk-major, row-minor): a task's first page is at
    /// the task's K chunk and first row, and the pages of a chunk tile its rows in order.
    #[test]
    fn a_tasks_first_page_is_where_the_task_starts() {
        for (name, text) in crate::embedded::MODELS {
            let model = Model::parse(name, text).unwrap();
            for kind in MATVECS {
                let Some(w) = matvec(&model, kind) else {
                    continue;
                };
                for t in 0..w.tasks() {
                    assert_eq!(
                        w.page_coords(t * w.task_pages),
                        w.task_coords(t),
                        "{name} {kind:?} task {t}"
                    );
                }
                for p in 0..w.pages() {
                    let (chunk, row0) = w.page_coords(p);
                    assert!(
                        chunk < w.splits && row0 + w.page_out() <= w.out_rows,
                        "{name} {kind:?} page {p}"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod page_rows_props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A page holds the most rows that fit it and divide the chunk's rows in steps of
        /// `row_multiple`: every page of an operator alike, none wasting room a larger divisor
        /// would fill.
        #[test]
        fn a_page_holds_the_largest_dividing_run_of_rows_that_fits(
            k in 1u32..9000,
            out_rows in 1u32..20000,
            paired in any::<bool>(),
            row_multiple in 1u32..3,
            page_shift in 13u32..16,
        ) {
            let w = MatvecWork {
                k,
                splits: 1,
                out_rows: out_rows * row_multiple,
                paired,
                page_bytes: 1 << page_shift,
                elem_bytes: 2,
                task_pages: 1,
                row_multiple,
            };
            let per_matrix = if paired { 2 } else { 1 };
            let rows = w.page_out();
            prop_assert_eq!(w.page_rows(), rows * per_matrix);
            prop_assert!(w.out_rows.is_multiple_of(rows) && rows.is_multiple_of(row_multiple));
            prop_assert_eq!(w.chunk_pages() * rows, w.out_rows);
            let fits = |r: u32| r as u64 * per_matrix as u64 * k as u64 * 2 <= w.page_bytes as u64;
            if fits(row_multiple) {
                prop_assert!(fits(rows));
                prop_assert!(w.page_weight_bytes() <= w.page_bytes as u64);
                for larger in rows + 1..=w.out_rows {
                    prop_assert!(
                        !(fits(larger)
                            && w.out_rows.is_multiple_of(larger)
                            && larger.is_multiple_of(row_multiple)),
                        "{} rows would fit and divide", larger
                    );
                    if !fits(larger) { break; }
                }
            } else {
                prop_assert_eq!(rows, row_multiple);
            }
        }
    }
}
