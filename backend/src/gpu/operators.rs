//! Each operator kernel alone: its grid, as the plan launches it, run once on fresh random
//! inputs in every buffer it reads, with every buffer it writes poisoned (all bits set: NaN in
//! f32 and bf16), and each output compared with the same operator computed on the CPU from the
//! same inputs and weights. A full step can hide an operator's fault behind a later one (a
//! wrong row the next norm smooths over, a partial block nobody reads); one operator at a time
//! cannot.

use std::time::{Duration, Instant};

use cudarc::driver::result;
use mkc_ir::OpKind;
use mkc_scheduler::Schedule;

use super::device::{fill_bytes, upload, wait_stream};
use super::launch::{op_fn, GridLaunch};
use super::Runner;
use crate::error::{check, BackendError};
use crate::memory::LayerBuffer;
use crate::reference::{argmax_margin, matvec, rel_l2, rmsnorm, LayerValues};
use crate::weights::{bf2f, f2bf, HostWeights, LayerTensor};

/// Relative L2 error an output may have: the CPU sums in another order (and RoPE's angle,
/// SiLU's and softmax's exponentials differ in the last bits); a wrong row, index or block is
/// off by order one.
pub const OPERATOR_TOLERANCE: f64 = 1e-3;

/// One output buffer of one operator run alone.
#[derive(Clone, Debug)]
pub struct OutputCheck {
    /// The buffer (`qkv`, `k_cache[pos]`, `o_part`, ...).
    pub buffer: &'static str,
    /// Relative L2 error against the CPU.
    pub rel_l2: f64,
    /// Elements still poisoned after the run (rows the kernel should have written and did not).
    pub unwritten: usize,
    /// Where the worst error is, where the buffer has parts worth naming (a split-KV record's
    /// head and part); empty otherwise.
    pub worst: String,
}

impl OutputCheck {
    /// Every element written and within [`OPERATOR_TOLERANCE`].
    pub fn passed(&self) -> bool {
        self.unwritten == 0 && self.rel_l2.is_finite() && self.rel_l2 <= OPERATOR_TOLERANCE
    }
}

/// One operator's grid run alone.
#[derive(Clone, Debug)]
pub struct OperatorCheck {
    /// Operator label (`L1.qkv_rope`).
    pub operator: String,
    /// The grid's CTAs.
    pub ctas: u32,
    /// Its outputs.
    pub outputs: Vec<OutputCheck>,
}

impl OperatorCheck {
    /// Every output passed.
    pub fn passed(&self) -> bool {
        self.outputs.iter().all(OutputCheck::passed)
    }
}

/// splitmix64: the inputs' generator (any seed gives fresh, reproducible inputs).
struct Inputs(u64);

impl Inputs {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `n` floats uniform in [-scale, scale).
    fn floats(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
            .collect()
    }
}

fn download<T: Copy + Default>(ptr: u64, n: usize, what: &str) -> Result<Vec<T>, BackendError> {
    let mut out = vec![T::default(); n];
    // SAFETY: every caller passes a live device buffer of at least n elements of T.
    check(
        unsafe { result::memcpy_dtoh_sync(&mut out, ptr) },
        "cuMemcpyDtoH",
        what,
    )?;
    Ok(out)
}

/// Poisons `bytes` bytes at `ptr` (0xFF: NaN floats), done before this returns.
fn poison(ptr: u64, bytes: usize, what: &str) -> Result<(), BackendError> {
    fill_bytes(ptr, 0xFF, bytes, what)
}

/// The split-KV record (its `record` written floats, `parts` per head, head-major) whose values are
/// furthest from the CPU's, NaN counting as furthest: its head, part, softmax maximum and sum
/// on both sides, and how many of its `hd` outputs are NaN; empty where every record matches.
fn worst_record(got: &[f32], want: &[f32], record: usize, parts: usize, hd: usize) -> String {
    let errors = got
        .chunks_exact(record)
        .zip(want.chunks_exact(record))
        .map(|(g, w)| {
            let e = rel_l2(g, w);
            (if e.is_finite() { e } else { f64::MAX }, g, w)
        });
    match errors.enumerate().max_by(|a, b| a.1 .0.total_cmp(&b.1 .0)) {
        Some((i, (e, g, w))) if e > OPERATOR_TOLERANCE => format!(
            "worst record: head {} part {}: max {} (cpu {}), sum {} (cpu {}), {} NaN outputs, rel L2 {:.2e}",
            i / parts,
            i % parts,
            g[hd],
            w[hd],
            g[hd + 1],
            w[hd + 1],
            g[..hd].iter().filter(|v| v.is_nan()).count(),
            e
        ),
        _ => String::new(),
    }
}

/// An f32 output against the CPU's.
fn compare(buffer: &'static str, got: &[f32], want: &[f32]) -> OutputCheck {
    OutputCheck {
        buffer,
        rel_l2: rel_l2(got, want),
        unwritten: got.iter().filter(|v| v.to_bits() == u32::MAX).count(),
        worst: String::new(),
    }
}

/// `y[r] = sum_j W[r][col0 + j] x[j]` for `rows` rows of a row-major bf16 W with `ld` columns.
fn matvec_cols(w: &[u16], ld: usize, col0: usize, x: &[f32], rows: usize) -> Vec<f32> {
    (0..rows)
        .map(|r| {
            let row = &w[r * ld + col0..r * ld + col0 + x.len()];
            row.iter().zip(x).map(|(&a, &b)| bf2f(a) * b).sum()
        })
        .collect()
}

/// The residual stream an operator stages: `base` plus the partial blocks.
fn residual(base: &[f32], parts: &[f32]) -> Vec<f32> {
    let n = base.len();
    (0..n)
        .map(|i| base[i] + parts.chunks(n).map(|p| p[i]).sum::<f32>())
        .collect()
}

impl Runner {
    /// Runs every operator kernel alone (QKV at layers 0 and 1, the others at layer 1, the LM
    /// head) on inputs drawn from `seed`, at a position past attention's first KV chunk, and
    /// checks each against the CPU. `host` must be the weights the runner was filled with;
    /// `schedule` is a chain plan for this GPU (its grids are launched without PDL).
    pub fn check_operators(
        &self,
        schedule: &Schedule,
        host: &HostWeights,
        seed: u64,
        watchdog: Duration,
    ) -> Result<Vec<OperatorCheck>, BackendError> {
        let m = &self.model;
        let g = &m.geometry;
        let (hidden, inter, hd) = (
            g.hidden as usize,
            g.intermediate as usize,
            g.head_dim as usize,
        );
        let (q_dim, kv_dim) = (m.q_dim() as usize, m.kv_dim() as usize);
        let (kv_heads, max_seq) = (g.kv_heads as usize, m.workload.max_seq_len as usize);
        let s_attn = m.lowering.vtp_shards.attention_o_proj as usize;
        let s_down = m.lowering.vtp_shards.up_gate_down as usize;
        let eps = g.norm_eps as f32;
        let layer = 1.min(self.layers.len() - 1);
        // Past the first KV chunk of every part (split-KV parts of ceil(len / parts)).
        let parts = m.lowering.kv_parts() as usize;
        let pos = (mkc_catalogue::attention_chunk(m) as usize * parts + 37).min(max_seq - 2);
        let mut rng = Inputs(seed);
        let shapes = crate::launch_plan::launch_plan(schedule, m)?;
        let mut out = Vec::new();

        let cases: Vec<(OpKind, usize)> = vec![
            (OpKind::QkvRope, 0),
            (OpKind::QkvRope, layer),
            (OpKind::Attention, layer),
            (OpKind::OProj, layer),
            (OpKind::UpGate, layer),
            (OpKind::Down, layer),
            (OpKind::LmHead, self.layers.len() - 1),
        ];
        self.set_position(pos as u32)?;
        for (kind, l) in cases {
            let lay = self.layers[l];
            let w = |t| host.layer(l, t);
            let mut outputs = Vec::new();
            let launch = |this: &Runner| -> Result<u32, BackendError> {
                let mut shape = *shapes
                    .iter()
                    .find(|s| s.kind == kind && (kind == OpKind::LmHead || s.layer == l as u32))
                    .ok_or_else(|| {
                        BackendError::Unsupported(format!(
                            "the plan has no {} grid for layer {l}",
                            kind.name()
                        ))
                    })?;
                // Alone: nothing to wait for, nothing to admit early.
                shape.waits = false;
                shape.pdl_attribute = false;
                shape.early = false;
                this.launch(&GridLaunch {
                    f: op_fn(&this.funcs, kind)?,
                    shape,
                    trace: 0,
                })?;
                this.finish_within(shape.entry, watchdog)?;
                Ok(shape.ctas)
            };
            let ctas;
            match kind {
                OpKind::QkvRope => {
                    let x = if lay.prev_mid == 0 {
                        let token = (rng.next() % g.vocab as u64) as u32;
                        let mut tokens = vec![0u64; max_seq + 1];
                        tokens[pos] = (0xFFFF_FFFFu64 << 32) | (0xFFFF_FFFF - token) as u64;
                        upload(self.globals.tokens, &tokens, "tokens")?;
                        let e = host.embed();
                        e[token as usize * hidden..(token as usize + 1) * hidden]
                            .iter()
                            .map(|&b| bf2f(b))
                            .collect::<Vec<f32>>()
                    } else {
                        let mid = rng.floats(hidden, 1.0);
                        let parts = rng.floats(s_down * hidden, 0.5);
                        upload(lay.prev_mid, &mid, "prev_mid")?;
                        upload(lay.prev_part, &parts, "prev_part")?;
                        residual(&mid, &parts)
                    };
                    poison(lay.x_in, hidden * 4, "x_in")?;
                    poison(lay.qkv, (q_dim + 2 * kv_dim) * 4, "qkv")?;
                    for c in [lay.k_cache, lay.v_cache] {
                        for h in 0..kv_heads {
                            poison(c + (((h * max_seq + pos) * hd) * 2) as u64, hd * 2, "cache")?;
                        }
                    }
                    ctas = launch(self)?;
                    let xn = rmsnorm(&x, w(LayerTensor::Norm1), eps);
                    let mut qkv = matvec(w(LayerTensor::Qkv), &xn, q_dim + 2 * kv_dim);
                    for r in (0..q_dim + kv_dim).step_by(2) {
                        let freq = m.rope_freq(((r % hd) / 2) as u32);
                        let (sn, cs) = (pos as f32 * freq).sin_cos();
                        let (a, b) = (qkv[r], qkv[r + 1]);
                        qkv[r] = a * cs - b * sn;
                        qkv[r + 1] = a * sn + b * cs;
                    }
                    outputs.push(compare("x_in", &download(lay.x_in, hidden, "x_in")?, &x));
                    let got = download(lay.qkv, q_dim + 2 * kv_dim, "qkv")?;
                    outputs.push(compare("qkv", &got, &qkv));
                    for (name, c, off) in [
                        ("k_cache[pos]", lay.k_cache, q_dim),
                        ("v_cache[pos]", lay.v_cache, q_dim + kv_dim),
                    ] {
                        let (mut got, mut want) = (Vec::new(), Vec::new());
                        for h in 0..kv_heads {
                            let at = c + (((h * max_seq + pos) * hd) * 2) as u64;
                            let row: Vec<u16> = download(at, hd, name)?;
                            got.extend(row.iter().map(|&b| {
                                if b == u16::MAX {
                                    f32::from_bits(u32::MAX)
                                } else {
                                    bf2f(b)
                                }
                            }));
                            want.extend((0..hd).map(|d| bf2f(f2bf(qkv[off + h * hd + d]))));
                        }
                        outputs.push(compare(name, &got, &want));
                    }
                }
                OpKind::Attention => {
                    let qkv = rng.floats(q_dim + 2 * kv_dim, 2.0);
                    upload(lay.qkv, &qkv, "qkv")?;
                    let mut caches = Vec::new();
                    for (c, name) in [(lay.k_cache, "k_cache"), (lay.v_cache, "v_cache")] {
                        let vals: Vec<u16> = rng
                            .floats(kv_heads * max_seq * hd, 1.0)
                            .into_iter()
                            .map(f2bf)
                            .collect();
                        upload(c, &vals, name)?;
                        caches.push(vals);
                    }
                    let attn_rows = m.attention_out_rows() as usize;
                    poison(lay.attn, attn_rows * 4, "attn")?;
                    ctas = launch(self)?;
                    let gq = (g.heads / g.kv_heads) as usize;
                    let scale = m.attention_scale();
                    let mut want = vec![0f32; q_dim];
                    let mut want_records = vec![0f32; if parts > 1 { attn_rows } else { 0 }];
                    for h in 0..g.heads as usize {
                        let kvh = h / gq;
                        let q = &qkv[h * hd..(h + 1) * hd];
                        let at = |p: usize, d: usize| (kvh * max_seq + p) * hd + d;
                        let scores: Vec<f32> = (0..=pos)
                            .map(|p| {
                                (0..hd)
                                    .map(|d| q[d] * bf2f(caches[0][at(p, d)]))
                                    .sum::<f32>()
                                    * scale
                            })
                            .collect();
                        let mx = scores.iter().cloned().fold(f32::MIN, f32::max);
                        let e: Vec<f32> = scores.iter().map(|s| (s - mx).exp()).collect();
                        let sum: f32 = e.iter().sum();
                        for d in 0..hd {
                            want[h * hd + d] = (0..=pos)
                                .map(|p| e[p] / sum * bf2f(caches[1][at(p, d)]))
                                .sum();
                        }
                        if parts > 1 {
                            crate::attention_parts::write_head_records(
                                m,
                                &mut want_records,
                                h,
                                pos + 1,
                                |p| scores[p],
                                |p, d| bf2f(caches[1][at(p, d)]),
                            );
                        }
                    }
                    let words = download::<u32>(lay.attn, attn_rows, "attn")?;
                    if parts > 1 {
                        // The records' written floats only: nothing writes their padding.
                        let got: Vec<f32> = words.iter().map(|&w| f32::from_bits(w)).collect();
                        let got = crate::attention_parts::written_fields(m, &got);
                        let want = crate::attention_parts::written_fields(m, &want_records);
                        let mut check = compare("attn records", &got, &want);
                        let record = mkc_ir::work::attention_part_written(g.head_dim) as usize;
                        check.worst = worst_record(&got, &want, record, parts, hd);
                        outputs.push(check);
                    }
                    let got = crate::attention_parts::output_values(m, &words);
                    outputs.push(compare("attn", &got, &want));
                }
                OpKind::OProj | OpKind::Down => {
                    let (input, part, k_total, splits, wt) = if kind == OpKind::OProj {
                        (lay.attn, lay.o_part, q_dim, s_attn, LayerTensor::O)
                    } else {
                        (lay.h, lay.d_part, inter, s_down, LayerTensor::Down)
                    };
                    let split_kv = kind == OpKind::OProj && m.lowering.kv_parts() > 1;
                    let (x, words) = if split_kv {
                        // Random partial records, their statistics included: the input is
                        // what they merge to (the O-projection merges as it stages).
                        let mut records = rng.floats(m.attention_out_rows() as usize, 1.0);
                        let record = mkc_ir::work::attention_part_record(g.head_dim) as usize;
                        for r in records.chunks_mut(record) {
                            r[hd + 1] = r[hd + 1].abs() * 4.0 + 0.25; // a softmax sum
                            r[hd] *= 3.0; // its maximum
                        }
                        let x = crate::attention_parts::merge(m, &records);
                        (x, records.iter().map(|v| v.to_bits()).collect())
                    } else {
                        let x = rng.floats(k_total, 1.0);
                        let words = crate::fragments::input_words(m, kind, &x);
                        (x, words)
                    };
                    upload(input, &words, "input")?;
                    poison(part, splits * hidden * 4, "partials")?;
                    ctas = launch(self)?;
                    let k = k_total / splits;
                    let want: Vec<f32> = (0..splits)
                        .flat_map(|c| {
                            matvec_cols(w(wt), k_total, c * k, &x[c * k..(c + 1) * k], hidden)
                        })
                        .collect();
                    let name = if kind == OpKind::OProj {
                        "o_part"
                    } else {
                        "d_part"
                    };
                    outputs.push(compare(
                        name,
                        &download(part, splits * hidden, name)?,
                        &want,
                    ));
                }
                OpKind::UpGate => {
                    let base = rng.floats(hidden, 1.0);
                    let parts = rng.floats(s_attn * hidden, 0.5);
                    upload(lay.x_in, &base, "x_in")?;
                    upload(lay.o_part, &parts, "o_part")?;
                    poison(lay.x_mid, hidden * 4, "x_mid")?;
                    poison(lay.h, inter * 4, "h")?;
                    ctas = launch(self)?;
                    let x = residual(&base, &parts);
                    let xn = rmsnorm(&x, w(LayerTensor::Norm2), eps);
                    let gate = matvec(w(LayerTensor::Gate), &xn, inter);
                    let up = matvec(w(LayerTensor::Up), &xn, inter);
                    let h: Vec<f32> = gate
                        .iter()
                        .zip(&up)
                        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                        .collect();
                    outputs.push(compare("x_mid", &download(lay.x_mid, hidden, "x_mid")?, &x));
                    let got = download::<u32>(lay.h, inter, "h")?;
                    let got = crate::fragments::input_values(m, OpKind::Down, &got);
                    outputs.push(compare("h", &got, &h));
                }
                OpKind::LmHead => {
                    let base = rng.floats(hidden, 1.0);
                    let parts = rng.floats(s_down * hidden, 0.5);
                    upload(self.globals.final_mid, &base, "final_mid")?;
                    upload(self.globals.final_part, &parts, "final_part")?;
                    let vocab = g.vocab as usize;
                    poison(self.globals.logits, vocab * 4, "logits")?;
                    upload(self.globals.tokens, &vec![0u64; max_seq + 1], "tokens")?;
                    ctas = launch(self)?;
                    let x = residual(&base, &parts);
                    let xn = rmsnorm(&x, host.final_norm(), eps);
                    let want = matvec(host.lm_head(), &xn, vocab);
                    let got = download(self.globals.logits, vocab, "logits")?;
                    outputs.push(compare("logits", &got, &want));
                    // The fused argmax: the token of the largest logit the GPU computed.
                    let tokens: Vec<u64> = download(self.globals.tokens, max_seq + 1, "tokens")?;
                    let token = 0xFFFF_FFFF - (tokens[pos + 1] & 0xFFFF_FFFF) as u32;
                    let (best, _) = argmax_margin(&got);
                    outputs.push(OutputCheck {
                        buffer: "tokens[pos + 1] (argmax)",
                        rel_l2: if token as usize == best { 0.0 } else { 1.0 },
                        unwritten: usize::from(tokens[pos + 1] == 0),
                        worst: String::new(),
                    });
                }
            }
            let label = match kind {
                OpKind::LmHead => "lm_head".to_string(),
                _ => format!("L{l}.{}", kind.name()),
            };
            out.push(OperatorCheck {
                operator: label,
                ctas,
                outputs,
            });
        }
        Ok(out)
    }

    /// Waits for the runner's stream, or stops with a watchdog error after `limit`.
    fn finish_within(&self, what: &str, limit: Duration) -> Result<(), BackendError> {
        if wait_stream(self.stream, what, Instant::now() + limit)? {
            return Ok(());
        }
        Err(BackendError::Watchdog {
            target: what.to_string(),
            pos: 0,
            seconds: limit.as_secs_f64(),
        })
    }
}

impl Runner {
    /// Every layer's values after the last step, downloaded as `reference::LayerValues` (the
    /// split-K partials summed in chunk order, h decoded where it is stored as fragments), to
    /// compare with the CPU's layer by layer where a run fails its check.
    pub fn layer_values(&self) -> Result<Vec<LayerValues>, BackendError> {
        let m = &self.model;
        let (hidden, inter) = (m.geometry.hidden as usize, m.geometry.intermediate as usize);
        // The partial-sum blocks the runner allocated (`memory::LayerBuffer`).
        let blocks = |b: LayerBuffer| b.bytes(m) as usize / (4 * hidden);
        let (o_blocks, d_blocks) = (blocks(LayerBuffer::OPart), blocks(LayerBuffer::DPart));
        let summed = |ptr: u64, blocks: usize, what: &str| -> Result<Vec<f32>, BackendError> {
            let parts: Vec<f32> = download(ptr, blocks * hidden, what)?;
            Ok((0..hidden)
                .map(|i| (0..blocks).map(|b| parts[b * hidden + i]).sum())
                .collect())
        };
        self.layers
            .iter()
            .map(|lay| {
                let h_words: Vec<u32> = download(lay.h, inter, "h")?;
                Ok(LayerValues {
                    qkv: download(lay.qkv, m.qkv_rows() as usize, "qkv")?,
                    o: summed(lay.o_part, o_blocks, "o_part")?,
                    x_mid: download(lay.x_mid, hidden, "x_mid")?,
                    h: crate::fragments::input_values(m, OpKind::Down, &h_words),
                    d: summed(lay.d_part, d_blocks, "d_part")?,
                })
            })
            .collect()
    }

    /// The weights as the producers read them, against `host` (the same weights, row-major)
    /// laid out by the Rust description of a page (`mkc_ir::work`): each of the last layer's
    /// split-K matrices (the O-projection, down) page-major, page p at p x its page's elements
    /// holding the rows of its K chunk that `MatvecWork` names, and gate and up one buffer, gate's
    /// rows then up's. Returns the tensors that differ (`k_page_major` and the upload disagree
    /// with the Rust rule), empty when all agree.
    pub fn check_weight_store(&self, host: &HostWeights) -> Result<Vec<String>, BackendError> {
        let m = &self.model;
        let l = self.layers.len() - 1;
        let lay = self.layers[l];
        let mut wrong = Vec::new();
        for (kind, tensor, ptr) in [
            (OpKind::OProj, LayerTensor::O, lay.w_o),
            (OpKind::Down, LayerTensor::Down, lay.w_down),
        ] {
            let w = mkc_ir::work::matvec(m, kind).expect("a matvec");
            let src = host.layer(l, tensor);
            let ld = (w.k * w.splits) as usize;
            let (rows, k) = (w.page_rows() as usize, w.k as usize);
            let mut want = Vec::with_capacity(src.len());
            for p in 0..w.pages() {
                let (chunk, row0) = w.page_coords(p);
                for r in 0..rows {
                    let at = (row0 as usize + r) * ld + chunk as usize * k;
                    want.extend_from_slice(&src[at..at + k]);
                }
            }
            let got: Vec<u16> = download(ptr, want.len(), kind.name())?;
            if got != want {
                wrong.push(format!("L{l} {}", kind.name()));
            }
        }
        let gate_up = [
            host.layer(l, LayerTensor::Gate),
            host.layer(l, LayerTensor::Up),
        ]
        .concat();
        let got: Vec<u16> = download(lay.w_gate_up, gate_up.len(), "w_gate_up")?;
        if got != gate_up {
            wrong.push(format!("L{l} w_gate_up"));
        }
        Ok(wrong)
    }
}
