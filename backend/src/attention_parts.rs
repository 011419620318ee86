//! Attention's output as the host reads and writes it. Without split-KV it is the output vector
//! (floats, or the O-projection's fragments: [`crate::fragments`]). With split-KV
//! (`lowering.attention_kv_split` > 1) it is one partial record per query head and part
//! (`mkc_ir::work::attention_part_row`): the part's outputs, already divided by its softmax
//! sum, then that maximum and sum. The O-projection merges the records as it stages its input
//! (the kernels' `merge_parts`); [`merge`] is the same merge on the host, so that the operator
//! checks can read attention's records and feed the O-projection records of their own.

use mkc_ir::work::{attention_part_record, attention_part_row, attention_part_written};
use mkc_ir::Model;

/// Parts of `model`'s split-KV attention (1 without).
fn parts(model: &Model) -> usize {
    model.lowering.kv_parts() as usize
}

/// The output vector (`q_dim` values) that attention's output tensor `words` (its
/// `attention_out_rows` words, as downloaded) holds for `model`.
pub fn output_values(model: &Model, words: &[u32]) -> Vec<f32> {
    if parts(model) == 1 {
        crate::fragments::input_values(model, mkc_ir::OpKind::OProj, words)
    } else {
        let records: Vec<f32> = words.iter().map(|&w| f32::from_bits(w)).collect();
        merge(model, &records)
    }
}

/// The floats attention writes of each of `records`' partial records, in order, without
/// their padding (which nothing writes): what a check compares.
pub fn written_fields(model: &Model, records: &[f32]) -> Vec<f32> {
    let hd = model.geometry.head_dim;
    let written = attention_part_written(hd) as usize;
    records
        .chunks_exact(attention_part_record(hd) as usize)
        .flat_map(|r| r[..written].iter().copied())
        .collect()
}

/// The output vector the partial `records` merge to: value d of head h is
/// `sum_s w_s o_s[d] / sum_s w_s`, `w_s = l_s exp(m_s - M)`, M the largest part maximum; a
/// head whose parts all have a zero sum merges to zeros. A NaN anywhere in the written floats
/// of a head's records (a poisoned record nothing wrote) makes its values NaN; the records'
/// padding is never read.
pub fn merge(model: &Model, records: &[f32]) -> Vec<f32> {
    let g = &model.geometry;
    let (hd, s) = (g.head_dim as usize, parts(model));
    let record = attention_part_record(g.head_dim) as usize;
    let written = attention_part_written(g.head_dim) as usize;
    let mut out = vec![0f32; model.q_dim() as usize];
    for h in 0..g.heads as usize {
        let rec = |p: usize| {
            let at = attention_part_row(h as u32, p as u32, s as u32, g.head_dim) as usize;
            &records[at..at + record]
        };
        let mx = (0..s).map(|p| rec(p)[hd]).fold(f32::MIN, f32::max);
        let weights: Vec<f32> = (0..s)
            .map(|p| rec(p)[hd + 1] * (rec(p)[hd] - mx).exp())
            .collect();
        let total: f32 = weights.iter().sum();
        let nan = (0..s).any(|p| rec(p)[..written].iter().any(|v| v.is_nan()));
        for d in 0..hd {
            let v: f32 = (0..s).map(|p| weights[p] * rec(p)[d]).sum();
            out[h * hd + d] = if nan {
                f32::NAN
            } else if total > 0.0 {
                v / total
            } else {
                0.0
            };
        }
    }
    out
}

/// Writes query head `h`'s partial records of a `len`-position history into `records` (the
/// tensor [`merge`] reads) as the kernels' attention writes them: for each part
/// ([`mkc_ir::work::kv_part`]), its outputs divided by its softmax sum, then that maximum and
/// sum; an empty part holds zeros, the kernels' maximum floor (-3e38) and a zero sum.
/// `score(p)` is position p's scaled q·k, `value(p, d)` dimension d of its V row.
pub fn write_head_records(
    model: &Model,
    records: &mut [f32],
    h: usize,
    len: usize,
    score: impl Fn(usize) -> f32,
    value: impl Fn(usize, usize) -> f32,
) {
    let (hd, s) = (model.geometry.head_dim as usize, parts(model));
    let record = attention_part_record(model.geometry.head_dim) as usize;
    for part in 0..s {
        let (lo, hi) = mkc_ir::work::kv_part(len as u32, part as u32, s as u32);
        let span = lo as usize..hi as usize;
        let at = attention_part_row(h as u32, part as u32, s as u32, model.geometry.head_dim);
        let r = &mut records[at as usize..at as usize + record];
        let max = span.clone().map(&score).fold(-3.0e38f32, f32::max);
        let sum: f32 = span.clone().map(|p| (score(p) - max).exp()).sum();
        for (d, out) in r[..hd].iter_mut().enumerate() {
            let o: f32 = span
                .clone()
                .map(|p| (score(p) - max).exp() * value(p, d))
                .sum();
            *out = if sum > 0.0 { o / sum } else { 0.0 };
        }
        r[hd] = max;
        r[hd + 1] = sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_model(parts: u32) -> Model {
        let mut m = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        m.lowering.attention_kv_split = Some(parts);
        m
    }

    /// Records made from one softmax split over parts merge to that softmax's output: the
    /// merge is the identity on a history however it is dealt.
    #[test]
    fn records_of_one_history_merge_to_its_attention() {
        let m = split_model(3);
        let (hd, heads) = (m.geometry.head_dim as usize, m.geometry.heads as usize);
        let len = 7;
        // Scores and values of each head, a function of (head, position, dimension).
        let score = |h: usize, p: usize| ((h * 7 + p * 3) % 11) as f32 * 0.3 - 1.0;
        let value = |h: usize, p: usize, d: usize| ((h + p * 5 + d) % 13) as f32 * 0.1 - 0.6;
        let mut records = vec![0f32; m.attention_out_rows() as usize];
        let mut want = vec![0f32; heads * hd];
        for h in 0..heads {
            let mx = (0..len).map(|p| score(h, p)).fold(f32::MIN, f32::max);
            let sum: f32 = (0..len).map(|p| (score(h, p) - mx).exp()).sum();
            for d in 0..hd {
                want[h * hd + d] = (0..len)
                    .map(|p| (score(h, p) - mx).exp() / sum * value(h, p, d))
                    .sum();
            }
            write_head_records(
                &m,
                &mut records,
                h,
                len,
                |p| score(h, p),
                |p, d| value(h, p, d),
            );
        }
        let got = merge(&m, &records);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
    }

    /// A record nothing wrote (poison) shows in its head's values; an all-empty head merges to
    /// zeros, not NaN.
    #[test]
    fn unwritten_records_show_and_empty_heads_are_zero() {
        let m = split_model(2);
        let hd = m.geometry.head_dim as usize;
        let mut records = vec![0f32; m.attention_out_rows() as usize];
        let got = merge(&m, &records);
        assert!(got.iter().all(|&v| v == 0.0));
        records[0] = f32::from_bits(u32::MAX);
        let got = merge(&m, &records);
        assert!(got[..hd].iter().all(|v| v.is_nan()));
        assert!(got[hd..].iter().all(|&v| v == 0.0));
    }

    /// The records' padding, which the kernels never write and a check poisons, neither
    /// reaches the merge nor the compared fields: lease BH's operator check failed on it
    /// (every output NaN) where the kernel was right.
    #[test]
    fn poisoned_padding_is_neither_merged_nor_compared() {
        let m = split_model(3);
        let (hd, heads) = (m.geometry.head_dim as usize, m.geometry.heads as usize);
        let mut records = vec![0f32; m.attention_out_rows() as usize];
        for h in 0..heads {
            write_head_records(
                &m,
                &mut records,
                h,
                10,
                |p| p as f32 * 0.1,
                |p, d| (p + d) as f32 * 0.01,
            );
        }
        let clean = merge(&m, &records);
        let clean_fields = written_fields(&m, &records);
        let record = attention_part_record(hd as u32) as usize;
        for r in records.chunks_mut(record) {
            r[hd + 2..].fill(f32::from_bits(u32::MAX));
        }
        assert_eq!(merge(&m, &records), clean);
        let fields = written_fields(&m, &records);
        assert_eq!(fields, clean_fields);
        assert_eq!(fields.len(), heads * 3 * (hd + 2));
        assert!(clean.iter().all(|v| v.is_finite() && *v != 0.0));
    }
}
