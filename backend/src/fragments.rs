//! The tensor-core page loop's input fragments as the host reads and writes them. Where the
//! O-projection or down reads its input from L2 on the tensor cores
//! (`mkc_catalogue::fragment_input`), the producer stores that vector (attention's output, h)
//! as fragments, not floats: per 2,048-column chunk, 2,048 words of two bf16 halves each, every
//! value split into its bf16 rounding (part 0) and the residue (part 1) at the positions
//! [`word`] gives. The host needs the layout to feed and check those buffers in the operator
//! tests and the attention probe.
//!
//! [`word`] mirrors `fragment_word` in `backend/kernels/mkc.cu`, and a test pins the kernel's
//! formula to the one here, so that neither changes alone.

use crate::weights::{bf2f, f2bf};

/// Columns of one chunk of fragments (`mkc_catalogue::REGISTER_K`).
pub const CHUNK: usize = mkc_catalogue::REGISTER_K as usize;

/// The word, within its chunk, holding part `h` of columns (c, c + 1), c even (the low half
/// holds column c).
pub fn word(c: usize, h: usize) -> usize {
    let (j, chunk8, r) = (c >> 6, (c >> 3) & 7, c & 7);
    let (t, u, b) = (chunk8 & 3, 2 * (chunk8 >> 2) + ((r >> 1) & 1), r >> 2);
    let lane = 4 * (2 * u + h) + t;
    ((j >> 1) * 32 + lane) * 4 + 2 * (j & 1) + b
}

/// The halfword (of the whole vector's fragments) holding part `h` of value `i`.
fn half_index(i: usize, h: usize) -> usize {
    let (chunk, c) = (i / CHUNK, i % CHUNK);
    2 * (chunk * CHUNK + word(c & !1, h)) + (c & 1)
}

/// The fragments of `x` (a whole number of chunks), as the kernels' producers store them.
pub fn encode(x: &[f32]) -> Vec<u32> {
    assert!(x.len().is_multiple_of(CHUNK), "{} columns", x.len());
    let mut halves = vec![0u16; 2 * x.len()];
    for (i, &v) in x.iter().enumerate() {
        let hi = f2bf(v);
        let lo = f2bf(v - bf2f(hi));
        halves[half_index(i, 0)] = hi;
        halves[half_index(i, 1)] = lo;
    }
    halves
        .chunks(2)
        .map(|p| p[0] as u32 | (p[1] as u32) << 16)
        .collect()
}

/// The values the fragments `words` hold (rounding plus residue). A value either of whose
/// halves is still the 0xFFFF poison reads as the poison float (all bits set), so that an
/// unwritten value shows as one.
pub fn decode(words: &[u32]) -> Vec<f32> {
    assert!(words.len().is_multiple_of(CHUNK), "{} words", words.len());
    let half = |i: usize| (words[i / 2] >> (16 * (i % 2))) as u16;
    (0..words.len())
        .map(|i| {
            let (hi, lo) = (half(half_index(i, 0)), half(half_index(i, 1)));
            if hi == u16::MAX || lo == u16::MAX {
                f32::from_bits(u32::MAX)
            } else {
                bf2f(hi) + bf2f(lo)
            }
        })
        .collect()
}

/// [`encode`] where the input of `kind` is stored as fragments for `model`, else `x`'s floats,
/// as the words to upload.
pub fn input_words(model: &mkc_ir::Model, kind: mkc_ir::OpKind, x: &[f32]) -> Vec<u32> {
    if mkc_catalogue::fragment_input(model, kind) {
        encode(x)
    } else {
        x.iter().map(|v| v.to_bits()).collect()
    }
}

/// The values of a downloaded input of `kind` for `model`: [`decode`] where it is stored as
/// fragments, else the floats as they are.
pub fn input_values(model: &mkc_ir::Model, kind: mkc_ir::OpKind, words: &[u32]) -> Vec<f32> {
    if mkc_catalogue::fragment_input(model, kind) {
        decode(words)
    } else {
        words.iter().map(|&w| f32::from_bits(w)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (column pair, part) has a word of its own, and the words are every word of the
    /// chunk.
    #[test]
    fn the_layout_is_a_bijection_onto_the_chunk() {
        let mut seen = vec![false; CHUNK];
        for c in (0..CHUNK).step_by(2) {
            for h in 0..2 {
                let w = word(c, h);
                assert!(!seen[w], "word {w} twice");
                seen[w] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    /// Word 4 (32 jp + l) + w is what lane l loads as B register w % 2 of k-step 2 jp + w / 2
    /// (`load_fragments`, `page_dots_mma`): for lane l = 4 g + t, subset u = g / 2 of part
    /// h = g % 2 at columns c, c + 1 (register 0) and c + 4, c + 5 (register 1),
    /// c = 64 j + 8 (4 (u / 2) + t) + 2 (u % 2).
    #[test]
    fn each_lane_loads_the_columns_its_mma_fragment_takes() {
        for lane in 0..32 {
            let (g, t) = (lane >> 2, lane & 3);
            let (u, h) = (g >> 1, g & 1);
            for jp in 0..16 {
                for w in 0..4 {
                    let (j, b) = (2 * jp + w / 2, w % 2);
                    let c = 64 * j + 8 * (4 * (u >> 1) + t) + 2 * (u & 1) + 4 * b;
                    assert_eq!(
                        word(c, h),
                        (jp * 32 + lane) * 4 + w,
                        "lane {lane} jp {jp} w {w}"
                    );
                }
            }
        }
    }

    /// Decoding what was encoded gives each value to the residue's precision, chunk by chunk;
    /// a poisoned half reads as the poison float.
    #[test]
    fn decode_undoes_encode_and_shows_poison() {
        let x: Vec<f32> = (0..2 * CHUNK)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 37.0)
            .collect();
        let words = encode(&x);
        assert_eq!(words.len(), x.len());
        for (a, b) in decode(&words).iter().zip(&x) {
            assert!((a - b).abs() <= b.abs() * 1e-5, "{a} against {b}");
        }
        let mut poisoned = words.clone();
        poisoned[CHUNK + 5] = u32::MAX;
        let bad = decode(&poisoned)
            .iter()
            .filter(|v| v.to_bits() == u32::MAX)
            .count();
        assert_eq!(bad, 2, "a word holds one part of two values");
    }

    /// The kernel's `fragment_word` is this module's [`word`], line for line.
    #[test]
    fn the_kernel_computes_the_same_layout() {
        let src = crate::kernels::SOURCE;
        for line in [
            "const int j = c >> 6, chunk8 = (c >> 3) & 7, r = c & 7;",
            "const int t = chunk8 & 3, u = 2 * (chunk8 >> 2) + ((r >> 1) & 1), b = r >> 2;",
            "const int lane = 4 * (2 * u + h) + t;",
            "return ((j >> 1) * 32 + lane) * 4 + 2 * (j & 1) + b;",
        ] {
            assert!(
                src.contains(line),
                "mkc.cu's fragment_word no longer has: {line}"
            );
        }
    }

    /// Only the inputs the catalogue stores as fragments are encoded.
    #[test]
    fn only_fragment_inputs_are_encoded() {
        let m = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        let x: Vec<f32> = (0..CHUNK).map(|i| i as f32).collect();
        let words = input_words(&m, mkc_ir::OpKind::OProj, &x);
        assert_ne!(
            words[..8],
            x[..8].iter().map(|v| v.to_bits()).collect::<Vec<_>>()[..]
        );
        let mut wide = m.clone();
        wide.lowering.vtp_shards.up_gate_down = 1;
        let floats = input_words(&wide, mkc_ir::OpKind::Down, &vec![1.5; 8192]);
        assert!(floats.iter().all(|&w| w == 1.5f32.to_bits()));
        assert_eq!(input_values(&wide, mkc_ir::OpKind::Down, &floats)[0], 1.5);
    }
}
