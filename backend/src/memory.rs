//! The GPU memory a runner allocates for a model: its weights (`weights::layout`), each layer's
//! KV cache and activation buffers, the step's global buffers, and the scratch that split-K
//! weights pass through on their way to their page-major store. One list, which the runner
//! allocates from and checks against the card's free memory before it allocates anything, so
//! that a model too large for the card is refused with its figures, not by a failed
//! `cuMemAlloc` halfway through its weights.

use mkc_ir::Model;

use crate::weights::layout;

/// Bytes the GPU keeps for itself beyond the runner's buffers before a model is refused: the
/// context, the loaded modules, the CUDA graphs, the persistent plan and allocation rounding.
pub const RESERVE_BYTES: u64 = 1 << 30;

/// One buffer the runner allocates per layer, in allocation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerBuffer {
    /// The layer's keys, `kv_heads x max_seq_len x head_dim` bf16.
    KCache,
    /// The layer's values, as the keys.
    VCache,
    /// The residual stream entering the layer (f32).
    XIn,
    /// QKV's outputs (f32).
    Qkv,
    /// Attention's outputs, or its split-KV partial records (f32).
    Attn,
    /// The O-projection's split-K partial sums (f32).
    OPart,
    /// The residual stream after attention (f32).
    XMid,
    /// The MLP's hidden activations (f32).
    H,
    /// Down's split-K partial sums (f32).
    DPart,
}

impl LayerBuffer {
    /// Every per-layer buffer, in allocation order.
    pub const ALL: [LayerBuffer; 9] = [
        LayerBuffer::KCache,
        LayerBuffer::VCache,
        LayerBuffer::XIn,
        LayerBuffer::Qkv,
        LayerBuffer::Attn,
        LayerBuffer::OPart,
        LayerBuffer::XMid,
        LayerBuffer::H,
        LayerBuffer::DPart,
    ];

    /// The buffer's name in allocation errors.
    pub fn name(self) -> &'static str {
        match self {
            LayerBuffer::KCache => "k_cache",
            LayerBuffer::VCache => "v_cache",
            LayerBuffer::XIn => "x_in",
            LayerBuffer::Qkv => "qkv",
            LayerBuffer::Attn => "attn",
            LayerBuffer::OPart => "o_part",
            LayerBuffer::XMid => "x_mid",
            LayerBuffer::H => "h",
            LayerBuffer::DPart => "d_part",
        }
    }

    /// Bytes of this buffer for `model`.
    pub fn bytes(self, model: &Model) -> u64 {
        let g = &model.geometry;
        let hidden = g.hidden as u64 * 4;
        let shards = &model.lowering.vtp_shards;
        match self {
            LayerBuffer::KCache | LayerBuffer::VCache => {
                g.kv_heads as u64 * model.workload.max_seq_len as u64 * g.head_dim as u64 * 2
            }
            LayerBuffer::XIn | LayerBuffer::XMid => hidden,
            LayerBuffer::Qkv => model.qkv_rows() as u64 * 4,
            LayerBuffer::Attn => model.attention_out_rows() * 4,
            LayerBuffer::OPart => shards.attention_o_proj as u64 * hidden,
            LayerBuffer::H => g.intermediate as u64 * 4,
            LayerBuffer::DPart => shards.up_gate_down as u64 * hidden,
        }
    }
}

/// The step's global buffers (name, bytes), in allocation order: the token history, the
/// position and the logits.
pub fn global_buffers(model: &Model) -> [(&'static str, u64); 3] {
    [
        ("tokens", (model.workload.max_seq_len as u64 + 1) * 8),
        ("pos", 4),
        ("logits", model.geometry.vocab as u64 * 4),
    ]
}

/// The work of matvec `kind` where its K is split (`mkc_ir::work`): the pages `k_page_major`
/// stores its weights in. None for an unsplit one, whose row-major layout is its page-major
/// one, and for attention.
pub fn split_k(model: &Model, kind: mkc_ir::OpKind) -> Option<mkc_ir::work::MatvecWork> {
    mkc_ir::work::matvec(model, kind).filter(|w| w.splits > 1)
}

/// Bytes of the scratch buffer split-K weights are written to before `k_page_major` stores
/// them page-major: the largest split-K matrix (None where no matrix is split).
pub fn split_scratch_bytes(model: &Model) -> Option<u64> {
    [mkc_ir::OpKind::OProj, mkc_ir::OpKind::Down]
        .into_iter()
        .filter_map(|kind| split_k(model, kind))
        .map(|w| w.out_rows as u64 * w.k as u64 * w.splits as u64 * 2)
        .max()
}

/// Bytes in GiB, as the figures are shown.
fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// The device memory a runner allocates for a model, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceMemory {
    /// Every weight tensor (bf16), stored once.
    pub weights: u64,
    /// Every layer's KV cache.
    pub kv_cache: u64,
    /// Every layer's activation buffers and the step's global buffers.
    pub activations: u64,
    /// The split-K scratch, freed once the weights are stored (its peak counts).
    pub scratch: u64,
}

impl DeviceMemory {
    /// What a runner for `model` allocates.
    pub fn of(model: &Model) -> DeviceMemory {
        let layers = model.geometry.layers as u64;
        let per_layer = |kv: bool| -> u64 {
            LayerBuffer::ALL
                .iter()
                .filter(|b| matches!(b, LayerBuffer::KCache | LayerBuffer::VCache) == kv)
                .map(|b| b.bytes(model))
                .sum()
        };
        DeviceMemory {
            weights: weight_bytes(model),
            kv_cache: layers * per_layer(true),
            activations: layers * per_layer(false)
                + global_buffers(model).iter().map(|b| b.1).sum::<u64>(),
            scratch: split_scratch_bytes(model).unwrap_or(0),
        }
    }

    /// The peak: every buffer and the scratch at once.
    pub fn total(&self) -> u64 {
        self.weights + self.kv_cache + self.activations + self.scratch
    }

    /// The buffers the runner keeps (all but the scratch).
    pub fn kept(&self) -> u64 {
        self.total() - self.scratch
    }

    /// One line for a summary: the peak and its parts in GiB, and what a run keeps free.
    pub fn describe(&self) -> String {
        format!(
            "GPU memory {:.2} GiB: weights {:.2}, KV cache {:.2}, activations {:.2}, split-K \
             scratch {:.2} (a run also needs {:.1} free)",
            gib(self.total()),
            gib(self.weights),
            gib(self.kv_cache),
            gib(self.activations),
            gib(self.scratch),
            gib(RESERVE_BYTES)
        )
    }

    /// Refuses `model` (named `name`) on a card with `free` of `card_total` bytes free when its
    /// buffers and [`RESERVE_BYTES`] do not fit, with the figures and what would shrink them.
    pub fn check_fits(&self, name: &str, free: u64, card_total: u64) -> Result<(), String> {
        let need = self.total() + RESERVE_BYTES;
        if need <= free {
            return Ok(());
        }
        Err(format!(
            "{name} needs {:.1} GiB of GPU memory (weights {:.1}, KV cache {:.1}, activations \
             {:.2}, split-K scratch {:.2}, and {:.1} kept free for the context and the graphs); \
             the GPU has {:.1} of its {:.1} GiB free. Fix: a smaller workload.max_seq_len (the KV \
             cache), fewer layers, or a card with more memory",
            gib(need),
            gib(self.weights),
            gib(self.kv_cache),
            gib(self.activations),
            gib(self.scratch),
            gib(RESERVE_BYTES),
            gib(free),
            gib(card_total)
        ))
    }
}

/// Bytes of `model`'s weights, every tensor in bf16: what the card holds, and what the host
/// holds for the CPU reference (`HostWeights`, generated or a checkpoint's).
pub fn weight_bytes(model: &Model) -> u64 {
    layout(model).iter().map(|s| s.len() * 2).sum()
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib.checked_mul(1024)?)
}

/// The host memory available now (Linux's `MemAvailable`); None where the system does not say.
pub fn host_available() -> Option<u64> {
    mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// Refuses to hold `need` bytes for `what` in host memory where `available` is known and
/// smaller, with the figures and `fix`: a run killed by the system for memory says nothing.
pub fn check_host_fits(
    what: &str,
    need: u64,
    available: Option<u64>,
    fix: &str,
) -> Result<(), String> {
    match available {
        Some(free) if need > free => Err(format!(
            "{what} needs {:.1} GiB of host memory and this machine has {:.1} GiB available. \
             Fix: {fix}",
            gib(need),
            gib(free)
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host-memory check reads Linux's MemAvailable, refuses a need above it with both
    /// figures and the fix, and passes where the system does not say.
    #[test]
    fn host_memory_is_checked_against_what_the_system_says_is_available() {
        let text = "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   \
                    125829120 kB\n";
        assert_eq!(mem_available(text), Some(125_829_120 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: x kB\n"), None);
        let free = Some(120u64 << 30);
        assert!(check_host_fits("w", 100 << 30, free, "f").is_ok());
        let e = check_host_fits("the weights", 141 << 30, free, "use --no-check").unwrap_err();
        assert!(
            e.contains("141.0 GiB") && e.contains("120.0 GiB") && e.contains("Fix: use --no-check"),
            "{e}"
        );
        assert!(check_host_fits("w", u64::MAX, None, "f").is_ok());
        // The 70B Llamas' weights are more than a 128 GiB host holds twice.
        let mut m = model("llama8b");
        (
            m.geometry.hidden,
            m.geometry.intermediate,
            m.geometry.layers,
        ) = (8192, 28672, 80);
        (m.geometry.heads, m.geometry.kv_heads, m.geometry.head_dim) = (64, 8, 128);
        assert_eq!(weight_bytes(&m), DeviceMemory::of(&m).weights);
        assert!(weight_bytes(&m) > 130 << 30);
    }

    fn model(name: &str) -> Model {
        mkc_ir::embedded::resolve_model(name).unwrap()
    }

    /// Llama-3.2-1B: 1.236 G parameters (tied embeddings), 16 layers of 8 KV heads x 64 x 2048
    /// positions x 2 (keys and values) bf16.
    #[test]
    fn llama_1b_needs_its_weights_and_kv_cache() {
        let m = model("llama1b");
        let d = DeviceMemory::of(&m);
        assert_eq!(d.weights, 1_235_814_400 * 2);
        assert_eq!(d.kv_cache, 16 * 2 * 8 * 2048 * 64 * 2);
        assert!(d.activations > 0 && d.activations < 4 << 20, "{d:?}");
        assert_eq!(d.total(), d.kept() + d.scratch);
    }

    /// The split-K scratch is the largest split matrix; none where nothing is split.
    #[test]
    fn the_scratch_is_the_largest_split_matrix() {
        let mut m = model("llama1b");
        m.lowering.vtp_shards.up_gate_down = 4;
        m.lowering.vtp_shards.attention_o_proj = 1;
        assert_eq!(split_scratch_bytes(&m), Some(2048 * 8192 * 2));
        m.lowering.vtp_shards.up_gate_down = 1;
        assert_eq!(split_scratch_bytes(&m), None);
    }

    /// A model that does not fit the card's free memory is refused with its figures and the
    /// fix; one that fits with the reserve is not.
    #[test]
    fn a_model_larger_than_the_free_memory_is_refused_with_its_figures() {
        let d = DeviceMemory::of(&model("llama8b"));
        let gib = 1u64 << 30;
        assert!(d.check_fits("llama8b", 80 * gib, 80 * gib).is_ok());
        let e = d.check_fits("llama8b", 10 * gib, 80 * gib).unwrap_err();
        assert!(
            e.contains("llama8b needs") && e.contains("weights 15.0") && e.contains("Fix:"),
            "{e}"
        );
        let exact = d.total() + RESERVE_BYTES;
        assert!(d.check_fits("x", exact, exact).is_ok());
        assert!(d.check_fits("x", exact - 1, exact).is_err());
    }
}
