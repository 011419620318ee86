//! How long attention's body takes alone: kernel `k_attention_alone` of the operators' build
//! (the chain's `ATT_THREADS`) and `k_attention_alone_persistent` of the persistent build (its
//! consumer threads), one CTA per
//! task of one layer, over a KV history already in memory and nothing to wait for, for 1, 2 and
//! 4 query heads per task (the lowering's `attention_split`) and several KV lengths, checked
//! against the CPU. What it is for: folding attention into the O-projection's SMs pays only if
//! a task of several query heads costs little more than one (docs/perf.md, "Where the
//! persistent kernel goes next"), and the simulator charges `attention_task_ns` plus
//! `attention_head_ns` per head from the chain's clock marks.

use cudarc::driver::result;

use super::super::device::{fill_bytes, upload, DevBuf, Gpu};
use super::super::launch::arg;
use super::super::median;
use super::{launch, read_u64s, values, ProbeModule, StreamPair, RESIDENT_SMEM};
use crate::abi::{KGlobals, KLayer, KModel};
use crate::error::{check, BackendError};
use crate::reference::rel_l2;
use crate::weights::{bf2f, f2bf};
use mkc_ir::{Model, OpKind};

/// KV lengths (positions, the current one included) measured: the benches' P32/D128 range and
/// a long context.
pub const ATTENTION_LENGTHS: [u32; 3] = [32, 160, 1024];

/// Launches of each case; the median is kept.
pub const ATTENTION_REPEATS: usize = 5;

/// Words of a CTA's record: SM, start and end ns, start and end cycles.
const RECORD_WORDS: usize = 5;

/// Which build's body a row measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionBuild {
    /// The chain's `k_attention` threads (`ATT_THREADS`), its shared memory.
    Chain,
    /// The persistent kernel's consumer threads, its attention region.
    Persistent,
}

impl AttentionBuild {
    /// Its kernel (`k_attention_alone` in each build).
    pub fn entry(self) -> &'static str {
        crate::kernels::ATTENTION_ALONE_ENTRIES[match self {
            AttentionBuild::Chain => 0,
            AttentionBuild::Persistent => 1,
        }]
    }

    /// Its name in the probe's output.
    pub fn name(self) -> &'static str {
        match self {
            AttentionBuild::Chain => "chain",
            AttentionBuild::Persistent => "persistent",
        }
    }
}

/// One case: a build's body over `positions` for tasks of `heads` query heads.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionRow {
    /// The build.
    pub build: AttentionBuild,
    /// Query heads per task.
    pub heads: u32,
    /// KV positions, the current one included.
    pub positions: u32,
    /// Shared memory the body was given (its KV chunk, q, scores and partial sums).
    pub smem_bytes: u32,
    /// Tasks (CTAs) of the layer.
    pub tasks: u32,
    /// Median over CTAs and launches of a CTA's span (ns).
    pub cta_ns: f64,
    /// The same in SM cycles.
    pub cta_cycles: f64,
    /// Slowest CTA's span, median over launches (ns).
    pub slowest_ns: f64,
    /// Relative L2 error of the layer's attention output against the CPU, the worst launch.
    pub err: f64,
}

/// What the attention probe measured.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionProbe {
    /// Each head's dimension.
    pub head_dim: u32,
    /// Query heads per KV head.
    pub group: u32,
    /// The fresh inputs' seed.
    pub seed: u32,
    /// Every case, chain then persistent, by heads then positions.
    pub rows: Vec<AttentionRow>,
    /// The head counts a build cannot run for the model, each with the catalogue's reason.
    pub skipped: Vec<String>,
}

/// Query heads per task the probe runs for `model`: 1, 2, 4, ... up to its query heads per KV
/// head.
pub fn heads_per_task(model: &Model) -> Vec<u32> {
    let group = model.geometry.heads / model.geometry.kv_heads.max(1);
    (0..)
        .map(|i| 1u32 << i)
        .take_while(|&h| h <= group && group.is_multiple_of(h))
        .collect()
}

/// Shared memory the body of `build` gets for tasks of `heads` query heads: what the catalogue
/// gives that build's attention for `model` lowered so.
fn body_smem(model: &Model, build: AttentionBuild, heads: u32) -> Result<u32, BackendError> {
    let group = model.geometry.heads / model.geometry.kv_heads;
    let mut m = model.clone();
    m.lowering.attention_split = group / heads;
    match build {
        AttentionBuild::Chain => Ok(mkc_catalogue::dynamic_smem(&m, OpKind::Attention)),
        // The KV chunk region, and the vectors the persistent kernel keeps apart (the probe's
        // body lays them after the chunk: the same chunk).
        AttentionBuild::Persistent => mkc_catalogue::persistent_layout(&m)
            .map(|l| l.att_bytes() + l.att_vectors)
            .map_err(|e| BackendError::Unsupported(format!("{e}"))),
    }
}

/// The shape of a layer's attention: query heads, KV heads, head dimension, and the positions
/// each KV head's history holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionShape {
    /// Query heads.
    pub heads: usize,
    /// KV heads (each serves heads / kv_heads query heads).
    pub kv_heads: usize,
    /// Each head's dimension.
    pub head_dim: usize,
    /// Positions per KV head in the caches.
    pub max_seq: usize,
    /// The scores' scale, `Model::attention_scale` (the checkpoint's 1/sqrt(head width), which
    /// a zero-padded head keeps): the kernels' `ATT_SCALE`.
    pub scale: f32,
}

/// The CPU's attention output for every query head: softmax(q K^T * scale) V over the first
/// `len` positions of each KV head's bf16 history.
pub fn cpu_attention(
    q: &[f32],
    k: &[u16],
    v: &[u16],
    shape: &AttentionShape,
    len: usize,
) -> Vec<f32> {
    let AttentionShape {
        heads,
        kv_heads,
        head_dim: hd,
        max_seq,
        scale,
    } = *shape;
    let group = heads / kv_heads;
    (0..heads)
        .flat_map(|h| {
            let base = h / group * max_seq * hd;
            let qh = &q[h * hd..(h + 1) * hd];
            let scores: Vec<f32> = (0..len)
                .map(|p| {
                    let row = &k[base + p * hd..base + (p + 1) * hd];
                    qh.iter().zip(row).map(|(a, &b)| a * bf2f(b)).sum::<f32>() * scale
                })
                .collect();
            let mx = scores.iter().copied().fold(f32::MIN, f32::max);
            let e: Vec<f32> = scores.iter().map(|s| (s - mx).exp()).collect();
            let sum: f32 = e.iter().sum();
            (0..hd)
                .map(|d| {
                    (0..len)
                        .map(|p| e[p] / sum * bf2f(v[base + p * hd + d]))
                        .sum::<f32>()
                })
                .collect::<Vec<f32>>()
        })
        .collect()
}

/// Each CTA's span in ns and in cycles.
fn cta_spans(records: &[u64]) -> (Vec<f64>, Vec<f64>) {
    records
        .chunks(RECORD_WORDS)
        .map(|r| {
            (
                r[2].saturating_sub(r[1]) as f64,
                r[4].saturating_sub(r[3]) as f64,
            )
        })
        .unzip()
}

/// Runs the attention probe with `k_attention_alone` of `chain_cubin` (the operators' build of
/// mkc.cu for `model`) and `k_attention_alone_persistent` of `persistent_cubin` (its persistent
/// build), on inputs from `seed`.
pub fn probe_attention(
    gpu: &Gpu,
    chain_cubin: &[u8],
    persistent_cubin: &[u8],
    model: &Model,
    seed: u32,
) -> Result<AttentionProbe, BackendError> {
    if model.lowering.kv_parts() > 1 {
        return Err(BackendError::Unsupported(
            "the attention probe times tasks over whole histories: build its kernels for the \
             model with lowering.attention_kv_split 1"
                .into(),
        ));
    }
    let g = &model.geometry;
    let (heads, kv_heads, hd) = (g.heads as usize, g.kv_heads as usize, g.head_dim as usize);
    let max_seq = model.workload.max_seq_len as usize;
    let shape = AttentionShape {
        heads,
        kv_heads,
        head_dim: hd,
        max_seq,
        scale: model.attention_scale(),
    };
    let group = (heads / kv_heads) as u32;
    let q_dim = heads * hd;
    let kv_elems = kv_heads * max_seq * hd;
    let k_host: Vec<u16> = values(kv_elems, seed).map(f2bf).collect();
    let v_host: Vec<u16> = values(kv_elems, seed.wrapping_add(1)).map(f2bf).collect();
    // The layer's qkv buffer (q, then k and v of the current position, which the body reads
    // from the caches instead).
    let qkv_host: Vec<f32> = values(q_dim + 2 * kv_heads * hd, seed.wrapping_add(2)).collect();
    let (kc, vc) = (
        DevBuf::new(kv_elems * 2, "attention probe K")?,
        DevBuf::new(kv_elems * 2, "attention probe V")?,
    );
    let qkv = DevBuf::new(qkv_host.len() * 4, "attention probe qkv")?;
    let out = DevBuf::new(q_dim * 4, "attention probe output")?;
    let pos = DevBuf::new(4, "attention probe position")?;
    upload(kc.ptr, &k_host, "attention probe K")?;
    upload(vc.ptr, &v_host, "attention probe V")?;
    upload(qkv.ptr, &qkv_host, "attention probe qkv")?;
    let sms = gpu.sms as usize;
    let rec = DevBuf::new(sms * RECORD_WORDS * 8, "attention probe records")?;
    let streams = StreamPair::new()?;
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (build, cubin) in [
        (AttentionBuild::Chain, chain_cubin),
        (AttentionBuild::Persistent, persistent_cubin),
    ] {
        // A head count this build cannot run for the model is skipped, with the reason.
        let mut sizes = Vec::new();
        for h in heads_per_task(model) {
            match body_smem(model, build, h) {
                Ok(b) => sizes.push((h, b)),
                Err(e) => skipped.push(format!("{} build, {h} heads per task: {e}", build.name())),
            }
        }
        // One CTA per SM: at least RESIDENT_SMEM whatever region the body is given.
        let launch_smem = |bytes: u32| bytes.max(RESIDENT_SMEM);
        let most = sizes
            .iter()
            .map(|&(_, b)| launch_smem(b))
            .max()
            .unwrap_or(0);
        let module = ProbeModule::load(cubin)?;
        let entry = build.entry();
        let kernel = module.kernel_with_smem(entry, most)?;
        // The build's threads, as `mkc kernels` reports them (the persistent build's tuning
        // has its consumer warps).
        let tuning = match build {
            AttentionBuild::Chain => model.tuning.clone(),
            AttentionBuild::Persistent => mkc_catalogue::persistent_tuning(&model.tuning),
        };
        let threads = crate::kernels::threads_of(&tuning, entry);
        for &(heads_per, bytes) in &sizes {
            for positions in ATTENTION_LENGTHS
                .into_iter()
                .filter(|&p| p as usize <= max_seq)
            {
                let mut km = KModel::of(model);
                km.attn_split = (group / heads_per) as i32;
                let tasks = kv_heads as u32 * group / heads_per;
                if tasks as usize > sms {
                    continue;
                }
                upload(pos.ptr, &[positions as i32 - 1], "attention probe position")?;
                let mut kg = KGlobals {
                    pos: pos.ptr,
                    ..KGlobals::default()
                };
                let mut kl = KLayer {
                    k_cache: kc.ptr,
                    v_cache: vc.ptr,
                    qkv: qkv.ptr,
                    attn: out.ptr,
                    ..KLayer::default()
                };
                let want = cpu_attention(
                    &qkv_host[..q_dim],
                    &k_host,
                    &v_host,
                    &shape,
                    positions as usize,
                );
                let (mut ns, mut cycles, mut slowest, mut err) = (vec![], vec![], vec![], 0f64);
                for _ in 0..ATTENTION_REPEATS {
                    // Poisoned before each launch: an output the body skips shows as NaN.
                    fill_bytes(out.ptr, 0xFF, q_dim * 4, "attention probe output")?;
                    fill_bytes(
                        rec.ptr,
                        0,
                        sms * RECORD_WORDS * 8,
                        "attention probe records",
                    )?;
                    let (mut b, mut r) = (bytes, rec.ptr);
                    let mut args = vec![
                        arg(&mut km),
                        arg(&mut kg),
                        arg(&mut kl),
                        arg(&mut b),
                        arg(&mut r),
                    ];
                    launch(
                        kernel,
                        (tasks, threads, launch_smem(bytes)),
                        streams.0,
                        &mut args,
                    )?;
                    streams.sync(entry)?;
                    let recs = read_u64s(
                        rec.ptr,
                        tasks as usize * RECORD_WORDS,
                        "attention probe records",
                    )?;
                    let (n, c) = cta_spans(&recs);
                    slowest.push(n.iter().copied().fold(0.0, f64::max));
                    ns.extend(n);
                    cycles.extend(c);
                    let mut words = vec![0u32; q_dim];
                    // SAFETY: out holds q_dim f32; the stream is idle.
                    check(
                        unsafe { result::memcpy_dtoh_sync(&mut words, out.ptr) },
                        "cuMemcpyDtoH",
                        "attention probe output",
                    )?;
                    // Stored as the O-projection reads it: fragments or floats.
                    let got = crate::fragments::input_values(model, OpKind::OProj, &words);
                    err = err.max(rel_l2(&got, &want));
                }
                rows.push(AttentionRow {
                    build,
                    heads: heads_per,
                    positions,
                    smem_bytes: bytes,
                    tasks,
                    cta_ns: median(ns),
                    cta_cycles: median(cycles),
                    slowest_ns: median(slowest),
                    err,
                });
            }
        }
    }
    Ok(AttentionProbe {
        head_dim: hd as u32,
        group,
        seed,
        rows,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probed_head_counts_divide_the_group() {
        let m = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        assert_eq!(heads_per_task(&m), vec![1, 2, 4]);
        let mut m3 = m.clone();
        m3.geometry.kv_heads = m3.geometry.heads / 3;
        assert_eq!(heads_per_task(&m3), vec![1]);
    }

    /// One position: softmax of one score is 1, so the output is that position's V row; two
    /// equal keys split the weight evenly.
    #[test]
    fn the_cpu_attention_weighs_v_rows_by_the_softmax_of_the_scores() {
        let hd = 2;
        let one = f2bf(1.0);
        let two = f2bf(2.0);
        let zero = f2bf(0.0);
        // One KV head, max_seq 2: K rows [1, 0], [1, 0]; V rows [1, 2], [2, 0].
        let k = [one, zero, one, zero];
        let v = [one, two, two, zero];
        let q = [0.5, 0.25, 3.0, -1.0];
        let shape = AttentionShape {
            heads: 2,
            kv_heads: 1,
            head_dim: hd,
            max_seq: 2,
            scale: 1.0 / (hd as f32).sqrt(),
        };
        let a = cpu_attention(&q, &k, &v, &shape, 1);
        assert_eq!(a, vec![1.0, 2.0, 1.0, 2.0]);
        let b = cpu_attention(&q, &k, &v, &shape, 2);
        for (got, want) in b.iter().zip([1.5, 1.0, 1.5, 1.0]) {
            assert!((got - want).abs() < 1e-6, "{b:?}");
        }
    }

    /// Every probed head count gets a region the catalogue sizes for it, one that holds a KV
    /// chunk beside q and the scores; one head per task always, more where the build can run
    /// them (the probe skips the others, saying why).
    #[test]
    fn every_probed_head_count_gets_a_region_of_its_own() {
        for name in ["llama1b", "llama3b", "llama8b"] {
            let m = mkc_ir::embedded::resolve_model(name).unwrap();
            let hd = m.geometry.head_dim;
            let max_seq = m.workload.max_seq_len;
            for h in heads_per_task(&m) {
                for build in [AttentionBuild::Chain, AttentionBuild::Persistent] {
                    match body_smem(&m, build, h) {
                        Ok(bytes) => {
                            // kv_chunk_of: what is left beside q and the scores, in positions.
                            let vectors = (h * hd + h * max_seq) * 4;
                            assert!(bytes > vectors + 4 * hd, "{name} {build:?} {h}: {bytes}");
                        }
                        // Only a task of several heads may be refused, and the reason says how
                        // to fix the lowering.
                        Err(e) => assert!(h > 1 && format!("{e}").contains("Fix"), "{name}: {e}"),
                    }
                }
            }
        }
    }

    #[test]
    fn a_cta_span_is_its_end_less_its_start() {
        let rec = [3, 100, 350, 1000, 1500, 7, 10, 20, 5, 9];
        assert_eq!(cta_spans(&rec), (vec![250.0, 10.0], vec![500.0, 4.0]));
    }
}
