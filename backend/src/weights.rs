//! Model weights: their layout, the deterministic generator (`random:SEED`) that the GPU runs
//! and the CPU reproduces bit for bit, and host-side storage for the CPU reference.
//!
//! Layout (all bf16, row-major): per layer `w_qkv` (q, k, v rows; q and k rows pair-interleaved
//! within each head so that RoPE rotates rows 2i and 2i+1), `w_o`, `w_gate`, `w_up`, `w_down`,
//! `norm1`, `norm2`; then the embedding table, the LM head (the same table when tied) and the
//! final norm.

use mkc_ir::Model;
use rayon::prelude::*;

/// How a tensor's values are generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// `(byte - 128) * 2^-shift`: uniform, exact in bf16, scaled so a K-wide dot product of
    /// unit-scale inputs has unit scale.
    Matrix {
        /// Power-of-two scale.
        shift: i32,
    },
    /// `1 + (byte - 128) / 512`, rounded to bf16: RMSNorm weights near one.
    Norm,
}

/// One weight tensor of the layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Name, e.g. `L3.w_qkv`.
    pub name: String,
    /// Generator stream (distinct per tensor).
    pub stream: u32,
    /// Rows.
    pub rows: u64,
    /// Columns.
    pub cols: u64,
    /// Generator.
    pub fill: Fill,
}

impl TensorSpec {
    /// Elements.
    pub fn len(&self) -> u64 {
        self.rows * self.cols
    }

    /// Whether the tensor is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which tensor of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerTensor {
    /// Fused QKV projection.
    Qkv = 0,
    /// Output projection.
    O = 1,
    /// Gate projection.
    Gate = 2,
    /// Up projection.
    Up = 3,
    /// Down projection.
    Down = 4,
    /// Attention RMSNorm.
    Norm1 = 5,
    /// MLP RMSNorm.
    Norm2 = 6,
}

/// Tensors per layer in the layout.
pub const PER_LAYER: usize = 7;

impl LayerTensor {
    /// A layer's tensors in layout order (index `t as usize`).
    pub const ALL: [LayerTensor; PER_LAYER] = [
        LayerTensor::Qkv,
        LayerTensor::O,
        LayerTensor::Gate,
        LayerTensor::Up,
        LayerTensor::Down,
        LayerTensor::Norm1,
        LayerTensor::Norm2,
    ];
}

fn shift_for(k: u64) -> i32 {
    // max |w| = 128 * 2^-shift ~ sqrt(3 / k)  =>  shift = 7 + log2(k / 3) / 2.
    (7.0 + ((k as f64) / 3.0).log2() / 2.0).round() as i32
}

/// The weight layout of `model`.
pub fn layout(model: &Model) -> Vec<TensorSpec> {
    let g = &model.geometry;
    let (h, i) = (g.hidden as u64, g.intermediate as u64);
    let (q, kv) = (model.q_dim() as u64, model.kv_dim() as u64);
    let mut out = Vec::new();
    let mat = |name: String, stream, rows, cols: u64| TensorSpec {
        name,
        stream,
        rows,
        cols,
        fill: Fill::Matrix {
            shift: shift_for(cols),
        },
    };
    let norm = |name: String, stream, n| TensorSpec {
        name,
        stream,
        rows: 1,
        cols: n,
        fill: Fill::Norm,
    };
    for l in 0..g.layers {
        let s = l * 16;
        out.push(mat(format!("L{l}.w_qkv"), s, q + 2 * kv, h));
        out.push(mat(format!("L{l}.w_o"), s + 1, h, q));
        out.push(mat(format!("L{l}.w_gate"), s + 2, i, h));
        out.push(mat(format!("L{l}.w_up"), s + 3, i, h));
        out.push(mat(format!("L{l}.w_down"), s + 4, h, i));
        out.push(norm(format!("L{l}.norm1"), s + 5, h));
        out.push(norm(format!("L{l}.norm2"), s + 6, h));
    }
    out.push(mat("embed".into(), 1_000_000, g.vocab as u64, h));
    if !g.tied_embeddings {
        out.push(mat("lm_head".into(), 1_000_001, g.vocab as u64, h));
    }
    out.push(norm("final_norm".into(), 1_000_002, h));
    out
}

/// The counter-based hash shared with the GPU generator (`mix` in the kernel source).
pub fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// f32 -> bf16 bits, round to nearest even (as the kernels' `f2bf`).
pub fn f2bf(f: f32) -> u16 {
    let u = f.to_bits();
    let u = u.wrapping_add(0x7FFF + ((u >> 16) & 1));
    (u >> 16) as u16
}

/// bf16 bits -> f32.
pub fn bf2f(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// Element `i` of tensor `spec` under `seed`, as bf16 bits.
pub fn value(spec: &TensorSpec, seed: u32, i: u64) -> u16 {
    let base = mix(seed ^ mix(spec.stream));
    match spec.fill {
        Fill::Matrix { shift } => {
            let key = base
                .wrapping_add(i as u32)
                .wrapping_add(((i >> 32) as u32).wrapping_mul(0x9e37_79b9));
            let byte = (mix(key) & 255) as i32;
            f2bf((byte - 128) as f32 * (-shift as f32).exp2())
        }
        Fill::Norm => {
            let byte = (mix(base.wrapping_add(i as u32)) & 255) as i32;
            f2bf(1.0 + (byte - 128) as f32 / 512.0)
        }
    }
}

/// Every tensor generated on the CPU (in parallel).
pub fn generate(model: &Model, seed: u32) -> HostWeights {
    let specs = layout(model);
    let tensors = specs
        .par_iter()
        .map(|s| {
            (0..s.len())
                .into_par_iter()
                .map(|i| value(s, seed, i))
                .collect()
        })
        .collect();
    HostWeights {
        layers: model.geometry.layers as usize,
        tied: model.geometry.tied_embeddings,
        specs,
        tensors,
    }
}

/// Weights held in host memory, in layout order.
#[derive(Clone, Debug)]
pub struct HostWeights {
    /// Layers.
    pub layers: usize,
    /// Whether the LM head is the embedding table.
    pub tied: bool,
    /// Tensor specs in layout order.
    pub specs: Vec<TensorSpec>,
    /// Tensor data (bf16 bits) in layout order.
    pub tensors: Vec<Vec<u16>>,
}

impl HostWeights {
    /// A tensor of layer `l`.
    pub fn layer(&self, l: usize, t: LayerTensor) -> &[u16] {
        &self.tensors[l * PER_LAYER + t as usize]
    }

    /// The embedding table.
    pub fn embed(&self) -> &[u16] {
        &self.tensors[self.layers * PER_LAYER]
    }

    /// The LM head.
    pub fn lm_head(&self) -> &[u16] {
        if self.tied {
            self.embed()
        } else {
            &self.tensors[self.layers * PER_LAYER + 1]
        }
    }

    /// The final norm.
    pub fn final_norm(&self) -> &[u16] {
        self.tensors.last().expect("a final norm")
    }
}

/// Parses `random:SEED`.
pub fn parse_seed(source: &str) -> Option<u32> {
    source.strip_prefix("random:")?.parse().ok()
}

/// Loads a Hugging Face Llama checkpoint directory (`config.json` + `*.safetensors`) into the
/// layout of `model`, checking that the geometry matches. q/k rows are permuted from Hugging
/// Face's rotate-half order into mkc's pair-interleaved order.
pub fn load_checkpoint(
    dir: &std::path::Path,
    model: &Model,
) -> Result<HostWeights, crate::BackendError> {
    crate::checkpoint::load(dir, model)
}
