//! The CPU reference: the same model in f32 arithmetic over the bf16 weights, used to check
//! the GPU's logits. With `round_kv` it stores K/V in bf16 as the kernels do; without, it is the
//! pure f32 model.

use mkc_ir::Model;
use rayon::prelude::*;

use crate::weights::{bf2f, f2bf, HostWeights, LayerTensor};

/// A reference decoder with its own KV cache.
pub struct Reference<'w> {
    model: Model,
    w: &'w HostWeights,
    round_kv: bool,
    /// `k[layer][kv_head][pos * head_dim + d]`
    k: Vec<Vec<Vec<f32>>>,
    v: Vec<Vec<Vec<f32>>>,
    /// Every layer's values in the last step.
    layers: Vec<LayerValues>,
}

/// One layer's values in a decode step: what the GPU's layer buffers hold after the same step
/// (`Runner::layer_values`), so that a run whose logits fail their check can say where it first
/// went wrong.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerValues {
    /// QKV's outputs, RoPE applied (before K and V are rounded into the cache).
    pub qkv: Vec<f32>,
    /// The O-projection's output (its split-K partials summed).
    pub o: Vec<f32>,
    /// The residual stream after attention.
    pub x_mid: Vec<f32>,
    /// The MLP's activations, silu(gate) x up.
    pub h: Vec<f32>,
    /// Down's output (its split-K partials summed).
    pub d: Vec<f32>,
}

impl LayerValues {
    /// The values by name, in the order the layer computes them.
    pub fn parts(&self) -> [(&'static str, &[f32]); 5] {
        [
            ("qkv", &self.qkv),
            ("o", &self.o),
            ("x_mid", &self.x_mid),
            ("h", &self.h),
            ("d", &self.d),
        ]
    }
}

/// The first layer value of `got` (the GPU's, per layer) that departs from `want` (the
/// reference's) by a relative L2 of more than `tolerance`, in the order the step computes them:
/// "L{layer} {name}: rel L2 {e}". None where every value is within it.
pub fn first_wrong_value(
    got: &[LayerValues],
    want: &[LayerValues],
    tolerance: f64,
) -> Option<String> {
    got.iter().zip(want).enumerate().find_map(|(l, (g, w))| {
        g.parts()
            .into_iter()
            .zip(w.parts())
            .find_map(|((name, gv), (_, wv))| {
                let e = rel_l2(gv, wv);
                (e.is_nan() || e > tolerance).then(|| format!("L{l} {name}: rel L2 {e:.2e}"))
            })
    })
}

/// y = W x for `rows` rows of bf16 W (row-major, x.len() columns), f32 accumulation.
pub(crate) fn matvec(w: &[u16], x: &[f32], rows: usize) -> Vec<f32> {
    let k = x.len();
    (0..rows)
        .into_par_iter()
        .map(|r| {
            let row = &w[r * k..(r + 1) * k];
            let mut acc = [0f32; 8];
            for (c, (wc, xc)) in row.chunks_exact(8).zip(x.chunks_exact(8)).enumerate() {
                let _ = c;
                for j in 0..8 {
                    acc[j] += bf2f(wc[j]) * xc[j];
                }
            }
            acc.iter().sum()
        })
        .collect()
}

/// RMSNorm of `x` with bf16 weights `w`.
pub(crate) fn rmsnorm(x: &[f32], w: &[u16], eps: f32) -> Vec<f32> {
    let ss: f32 = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let inv = 1.0 / (ss + eps).sqrt();
    x.iter().zip(w).map(|(v, &g)| v * inv * bf2f(g)).collect()
}

impl<'w> Reference<'w> {
    /// A reference with an empty cache.
    pub fn new(model: &Model, w: &'w HostWeights, round_kv: bool) -> Self {
        let g = &model.geometry;
        let empty = || vec![vec![Vec::new(); g.kv_heads as usize]; g.layers as usize];
        Reference {
            model: model.clone(),
            w,
            round_kv,
            k: empty(),
            v: empty(),
            layers: Vec::new(),
        }
    }

    /// Every layer's values in the last step (empty before the first).
    pub fn last_layers(&self) -> &[LayerValues] {
        &self.layers
    }

    /// Runs the token at position `pos` (positions must come in order from 0) and returns the
    /// logits.
    pub fn step(&mut self, token: u32, pos: u32) -> Vec<f32> {
        let m = &self.model;
        let g = &m.geometry;
        let (hidden, hd) = (g.hidden as usize, g.head_dim as usize);
        let (q_dim, kv_dim) = (m.q_dim() as usize, m.kv_dim() as usize);
        let gq = (g.heads / g.kv_heads) as usize;
        let eps = g.norm_eps as f32;
        let embed = self.w.embed();
        self.layers.clear();
        let mut x: Vec<f32> = embed[token as usize * hidden..(token as usize + 1) * hidden]
            .iter()
            .map(|&b| bf2f(b))
            .collect();
        for l in 0..g.layers as usize {
            let xn = rmsnorm(&x, self.w.layer(l, LayerTensor::Norm1), eps);
            let mut qkv = matvec(self.w.layer(l, LayerTensor::Qkv), &xn, q_dim + 2 * kv_dim);
            for r in (0..q_dim + kv_dim).step_by(2) {
                let pair = (r % hd) / 2;
                let freq = m.rope_freq(pair as u32);
                let (sn, cs) = (pos as f32 * freq).sin_cos();
                let (a, b) = (qkv[r], qkv[r + 1]);
                qkv[r] = a * cs - b * sn;
                qkv[r + 1] = a * sn + b * cs;
            }
            let round = |v: f32| if self.round_kv { bf2f(f2bf(v)) } else { v };
            for kvh in 0..g.kv_heads as usize {
                for d in 0..hd {
                    let kv = round(qkv[q_dim + kvh * hd + d]);
                    let vv = round(qkv[q_dim + kv_dim + kvh * hd + d]);
                    self.k[l][kvh].push(kv);
                    self.v[l][kvh].push(vv);
                }
            }
            let len = pos as usize + 1;
            let scale = m.attention_scale();
            let attn: Vec<f32> = (0..g.heads as usize)
                .into_par_iter()
                .flat_map_iter(|h| {
                    let kvh = h / gq;
                    let q = &qkv[h * hd..(h + 1) * hd];
                    let kc = &self.k[l][kvh];
                    let vc = &self.v[l][kvh];
                    let scores: Vec<f32> = (0..len)
                        .map(|p| {
                            q.iter()
                                .zip(&kc[p * hd..(p + 1) * hd])
                                .map(|(a, b)| a * b)
                                .sum::<f32>()
                                * scale
                        })
                        .collect();
                    let mx = scores.iter().cloned().fold(f32::MIN, f32::max);
                    let e: Vec<f32> = scores.iter().map(|s| (s - mx).exp()).collect();
                    let sum: f32 = e.iter().sum();
                    (0..hd)
                        .map(|d| (0..len).map(|p| e[p] / sum * vc[p * hd + d]).sum::<f32>())
                        .collect::<Vec<f32>>()
                })
                .collect();
            let o = matvec(self.w.layer(l, LayerTensor::O), &attn, hidden);
            let x_mid: Vec<f32> = x.iter().zip(&o).map(|(a, b)| a + b).collect();
            let xn2 = rmsnorm(&x_mid, self.w.layer(l, LayerTensor::Norm2), eps);
            let inter = g.intermediate as usize;
            let gate = matvec(self.w.layer(l, LayerTensor::Gate), &xn2, inter);
            let up = matvec(self.w.layer(l, LayerTensor::Up), &xn2, inter);
            let h: Vec<f32> = gate
                .iter()
                .zip(&up)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let d = matvec(self.w.layer(l, LayerTensor::Down), &h, hidden);
            x = x_mid.iter().zip(&d).map(|(a, b)| a + b).collect();
            self.layers.push(LayerValues {
                qkv,
                o,
                x_mid,
                h,
                d,
            });
        }
        let xf = rmsnorm(&x, self.w.final_norm(), eps);
        matvec(self.w.lm_head(), &xf, g.vocab as usize)
    }
}

/// Relative L2 error of `got` against `want`; infinite where either holds a NaN (an output
/// poisoned and never written), so that a `max` over cases cannot drop it (`f64::max` ignores
/// a NaN).
pub fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (a, b) in got.iter().zip(want) {
        num += ((a - b) as f64).powi(2);
        den += (*b as f64).powi(2);
    }
    let e = (num / den.max(1e-30)).sqrt();
    if e.is_nan() {
        f64::INFINITY
    } else {
        e
    }
}

/// Index of the largest value (smallest index on ties) and the margin to the runner-up.
pub fn argmax_margin(v: &[f32]) -> (usize, f32) {
    let mut best = (0usize, f32::MIN);
    let mut second = f32::MIN;
    for (i, &x) in v.iter().enumerate() {
        if x > best.1 {
            second = best.1;
            best = (i, x);
        } else if x > second {
            second = x;
        }
    }
    (best.0, best.1 - second)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unwritten (NaN-poisoned) output is an infinite error, so that the worst over several
    /// cases keeps it: `f64::max` would drop a NaN.
    #[test]
    fn a_poisoned_output_is_an_infinite_error_that_a_max_keeps() {
        let want = [1.0f32, 2.0, 2.0];
        assert_eq!(rel_l2(&want, &want), 0.0);
        assert!((rel_l2(&[1.0, 2.0, 0.0], &want) - (4.0f64 / 9.0).sqrt()).abs() < 1e-12);
        let poisoned = [1.0, f32::NAN, 2.0];
        assert_eq!(rel_l2(&poisoned, &want), f64::INFINITY);
        assert_eq!(0.0f64.max(rel_l2(&poisoned, &want)), f64::INFINITY);
    }
}
