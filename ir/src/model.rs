//! The model file format (RON): geometry, workload and lowering options.
//!
//! These structs are the serialised boundary; [`Model::parse`] checks every value that the
//! lowering relies on, so that lowering itself never meets an impossible model.

use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// RON as model and tuning files are written: optional knobs take a bare value
/// (`consumer_warps: 4`, not `Some(4)`).
fn ron_options() -> ron::Options {
    ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
}

/// A whole model file: what to lower, for which workload, with which options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Human-readable name, carried into schedules and reports.
    pub name: String,
    /// Shapes of the transformer.
    pub geometry: Geometry,
    /// The decode workload the schedule is built and measured for.
    #[serde(default)]
    pub workload: Workload,
    /// How operators are split into tasks (runs of weight pages) and edges into shards.
    #[serde(default)]
    pub lowering: Lowering,
    /// The CUDA backend's tuning knobs (developers' A/B runs); every knob left out keeps the
    /// kernels' measured default. Replaced as a whole by `--tune FILE`.
    #[serde(default, skip_serializing_if = "Tuning::is_default")]
    pub tuning: Tuning,
}

/// The CUDA backend's tuning knobs: how the kernels are built and how many CTAs and how much
/// shared memory their grids get. Data passed with the model to every function that sizes a
/// grid (no environment variable is read), written into schedules and printed by `mkc bench`.
/// Each was measured slower than the default for pdl on the H200 (docs/perf.md); they are
/// here to reproduce those comparisons and to try new ones.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tuning {
    /// Consumer warps of the streaming kernels (1-8; default 8). Fewer warps with a smaller
    /// ring (`stream_smem`) let two streaming CTAs share an SM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_warps: Option<u32>,
    /// Consumer warps of the persistent megakernel (1-8; default 7: with 8 its page loops
    /// spill, measured 52 us slower per step). Its own knob, since the chain's kernels measured
    /// slower with 7.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_warps: Option<u32>,
    /// Page-ring slots of the persistent megakernel (1-16; default: as many as leave
    /// attention's KV chunk the middle step's history, at least one per consumer warp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_slots: Option<u32>,
    /// Weight pages the persistent producer keeps in flight at most while its SM's consumers
    /// are between two instructions (from the end barrier, through the release, the next
    /// counter wait and the staging of its inputs), so that the edge's round trips queue
    /// behind fewer copies (0-16; at least the ring's slots: no limit; default: the device
    /// profile's, else no limit). Measured -58 us per step on an H100 at 1 and +15-20 on an
    /// H200 at 1-3 (docs/perf.md, twenty-seventh and twenty-eighth sessions), so the h100
    /// profile sets 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_boundary_inflight: Option<u32>,
    /// Weight pages the persistent producer keeps in flight at most outside that window
    /// (1-16; at least the ring's slots: no limit; default: the device profile's, else no
    /// limit). Measured -1.7 to -3.3 us per step on an H100 at 4 with the hold at 1 (docs/perf.md,
    /// lease AQ), so the h100 profile sets 4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_stream_inflight: Option<u32>,
    /// Weight pages past the next one to issue that the persistent producer may read into L2
    /// (into a 1 KiB sink, the data dropped) while every page it issued has landed, its next
    /// slot is still held and its consumers are past their staging: HBM streams while the SM
    /// computes with a full ring (0-32; default 0: off; an experiment, docs/perf.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_warm_pages: Option<u32>,
    /// Shared memory a streaming CTA budgets for its ring, bytes (default: the whole SM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_smem: Option<u32>,
    /// Threads per attention CTA (128-1024, a multiple of 128; default 512); another value
    /// caps attention at 72 registers so that it fits beside a streaming CTA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub att_threads: Option<u32>,
    /// KV positions attention stages per chunk (default: what half an SM holds); small values
    /// exercise the multi-chunk path on short prompts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub att_chunk: Option<u32>,
    /// The O-projection runs on at most this many CTAs (default: one per SM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub o_ctas: Option<u32>,
    /// QKV runs on at most this many CTAs (default: one per SM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qkv_ctas: Option<u32>,
    /// Pages of up/gate the O-projection's producer warms L2 with while it waits (default 2;
    /// 0 turns warming off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_depth: Option<u32>,
    /// First page of each CTA's share that warming starts from (default 16).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_skip: Option<u32>,
    /// Pages QKV warms once its own have landed (default 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_qkv: Option<u32>,
    /// First page QKV's warming starts from (default 24).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_qkv_skip: Option<u32>,
    /// 0: the O-projection does not warm (QKV still does); default 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_o: Option<u32>,
    /// A CUDA source to compile instead of the embedded `backend/kernels/mkc.cu`: an edited
    /// copy, to try a change without rebuilding mkc (the figures printed then are that
    /// source's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernels_cu: Option<String>,
}

impl Tuning {
    /// Whether every knob keeps its default (then the section is not written out).
    pub fn is_default(&self) -> bool {
        *self == Tuning::default()
    }

    /// Parses a tuning file (`--tune FILE`: the section's fields, as `Tuning(...)`).
    pub fn parse(file: &str, text: &str) -> Result<Tuning, InputError> {
        let t: Tuning = ron_options()
            .from_str(text)
            .map_err(|e| InputError::from_ron(crate::FileKind::Tuning, file, text, &e))?;
        t.validate(file)?;
        Ok(t)
    }

    /// Checks every knob that is set against its range (`tuning.<knob>`); `file` names the
    /// file that set them.
    pub fn validate(&self, file: &str) -> Result<(), InputError> {
        crate::validate::check_tuning(self, file)
    }

    /// Every numeric knob by its field name, with its value (`None`: the default): the one
    /// list that validation and reports read.
    pub fn knobs(&self) -> [(&'static str, Option<u32>); 16] {
        [
            ("consumer_warps", self.consumer_warps),
            ("persistent_warps", self.persistent_warps),
            ("persistent_slots", self.persistent_slots),
            (
                "persistent_boundary_inflight",
                self.persistent_boundary_inflight,
            ),
            (
                "persistent_stream_inflight",
                self.persistent_stream_inflight,
            ),
            ("persistent_warm_pages", self.persistent_warm_pages),
            ("stream_smem", self.stream_smem),
            ("att_threads", self.att_threads),
            ("att_chunk", self.att_chunk),
            ("o_ctas", self.o_ctas),
            ("qkv_ctas", self.qkv_ctas),
            ("warm_depth", self.warm_depth),
            ("warm_skip", self.warm_skip),
            ("warm_qkv", self.warm_qkv),
            ("warm_qkv_skip", self.warm_qkv_skip),
            ("warm_o", self.warm_o),
        ]
    }

    /// This tuning with every knob it leaves unset taken from `card` (a device profile's
    /// `tuning`, the knobs measured best on that card): the kernels built for a GPU use it.
    pub fn or_card(&self, card: &Tuning) -> Tuning {
        Tuning {
            consumer_warps: self.consumer_warps.or(card.consumer_warps),
            persistent_warps: self.persistent_warps.or(card.persistent_warps),
            persistent_slots: self.persistent_slots.or(card.persistent_slots),
            persistent_boundary_inflight: self
                .persistent_boundary_inflight
                .or(card.persistent_boundary_inflight),
            persistent_stream_inflight: self
                .persistent_stream_inflight
                .or(card.persistent_stream_inflight),
            persistent_warm_pages: self.persistent_warm_pages.or(card.persistent_warm_pages),
            stream_smem: self.stream_smem.or(card.stream_smem),
            att_threads: self.att_threads.or(card.att_threads),
            att_chunk: self.att_chunk.or(card.att_chunk),
            o_ctas: self.o_ctas.or(card.o_ctas),
            qkv_ctas: self.qkv_ctas.or(card.qkv_ctas),
            warm_depth: self.warm_depth.or(card.warm_depth),
            warm_skip: self.warm_skip.or(card.warm_skip),
            warm_qkv: self.warm_qkv.or(card.warm_qkv),
            warm_qkv_skip: self.warm_qkv_skip.or(card.warm_qkv_skip),
            warm_o: self.warm_o.or(card.warm_o),
            kernels_cu: self.kernels_cu.clone().or(card.kernels_cu.clone()),
        }
    }

    /// The knobs that are set, as `name=value`, for reports.
    pub fn describe(&self) -> Vec<String> {
        self.knobs()
            .iter()
            .filter_map(|(n, v)| v.map(|v| format!("{n}={v}")))
            .chain(self.kernels_cu.iter().map(|f| format!("kernels_cu={f}")))
            .collect()
    }
}

/// Element type of weights and activations. Only bf16 is supported today.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dtype {
    /// bfloat16: 2 bytes per element.
    Bf16,
}

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Bf16 => 2,
        }
    }
}

/// Transformer geometry (a Llama-style decoder).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    /// Width of the residual stream.
    pub hidden: u32,
    /// Width of the MLP's up/gate output, as mkc computes it.
    pub intermediate: u32,
    /// Width the checkpoint's MLP stores, when narrower than `intermediate` (`mkc model` pads a
    /// width no lowering tiles, 11004 to 11008): the loader appends zero rows to
    /// gate and up and zero columns to down, which add silu(0) x 0 = 0, so the logits are the
    /// checkpoint's. Absent: the checkpoint stores `intermediate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_intermediate: Option<u32>,
    /// Number of decoder layers.
    pub layers: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: u32,
    /// Width of one head, as mkc computes it.
    pub head_dim: u32,
    /// Width of one head as the checkpoint stores it, when narrower than `head_dim` (`mkc
    /// model` pads a width the kernels cannot read in 16-byte pieces, 100 to 104): the loader
    /// appends zero rows to each head's q, k and v and zero columns to each head's block of
    /// the O-projection, so the added scores and outputs are zero; RoPE's frequencies and
    /// attention's 1/sqrt(d) scale stay the checkpoint's. Absent: the checkpoint stores
    /// `head_dim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_head_dim: Option<u32>,
    /// Vocabulary size (rows of the LM head).
    pub vocab: u32,
    /// RoPE base frequency.
    pub rope_theta: f64,
    /// RoPE frequency scaling: Llama 3's (Llama 3.1 and 3.2 checkpoints) or linear position
    /// interpolation (long-context Llama 2 fine-tunes); absent for plain RoPE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<RopeScaling>,
    /// RMSNorm epsilon.
    pub norm_eps: f64,
    /// Whether the LM head reuses the embedding table.
    pub tied_embeddings: bool,
    /// Element type of weights and activations.
    pub dtype: Dtype,
}

impl Geometry {
    /// The MLP width the checkpoint stores: `checkpoint_intermediate`, else `intermediate`.
    pub fn stored_intermediate(&self) -> u32 {
        self.checkpoint_intermediate.unwrap_or(self.intermediate)
    }

    /// The head width the checkpoint stores: `checkpoint_head_dim`, else `head_dim`.
    pub fn stored_head_dim(&self) -> u32 {
        self.checkpoint_head_dim.unwrap_or(self.head_dim)
    }

    /// The width a head of `head_dim` is zero-padded to for the kernels, which read rows in
    /// 16-byte pieces (8 bf16): the next multiple of 8 for an even width that is none (100 →
    /// 104); None for a multiple of 8 (no padding needed) and for an odd width (RoPE rotates
    /// pairs, so none can help).
    pub fn padded_head_dim(&self) -> Option<u32> {
        let hd = self.head_dim;
        (hd.is_multiple_of(2) && !hd.is_multiple_of(8)).then(|| hd.next_multiple_of(8))
    }

    /// The geometry as the checkpoint describes it: its stored MLP and head widths, unpadded.
    pub fn as_stored(&self) -> Geometry {
        Geometry {
            intermediate: self.stored_intermediate(),
            checkpoint_intermediate: None,
            head_dim: self.stored_head_dim(),
            checkpoint_head_dim: None,
            ..self.clone()
        }
    }
}

/// RoPE frequency scaling (`rope_scaling` in a checkpoint's config). Llama 3's (`rope_type:
/// "llama3"`, the default): frequencies whose wavelength exceeds
/// `original_max_position_embeddings / low_freq_factor` are divided by `factor`, those shorter
/// than `original_max_position_embeddings / high_freq_factor` kept, and those between
/// interpolated. Linear (`rope_type: "linear"`): every frequency divided by `factor` (positions
/// interpolated), the other three fields unused. YaRN (`rope_type: "yarn"`): the pairs below
/// the correction range that `beta_fast` and `beta_slow` rotations over the original context
/// bound keep their frequency, those above it are divided by `factor`, a linear ramp between;
/// the scores are scaled by `attention_factor` squared (transformers scales RoPE's cos and sin
/// by it). YaRN's optional fields left out take transformers' defaults
/// ([`RopeScaling::yarn`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RopeScaling {
    /// Which scaling: Llama 3's unless the file says `rope_type: Linear`.
    #[serde(default, skip_serializing_if = "RopeType::is_llama3")]
    pub rope_type: RopeType,
    /// Divisor of the (low) frequencies.
    pub factor: f64,
    /// Llama 3: below this fraction of the original context, wavelengths are scaled fully.
    #[serde(default)]
    pub low_freq_factor: f64,
    /// Llama 3: above this fraction, wavelengths are kept.
    #[serde(default)]
    pub high_freq_factor: f64,
    /// Llama 3 and YaRN: the context length the model was pre-trained with.
    #[serde(default)]
    pub original_max_position_embeddings: u32,
    /// YaRN: rotations over the original context that bound the kept (fast) pairs; 32 if
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_fast: Option<f64>,
    /// YaRN: rotations that bound the fully interpolated (slow) pairs; 1 if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_slow: Option<f64>,
    /// YaRN: the factor on RoPE's cos and sin (so on q and k); `0.1 ln(factor) + 1` if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_factor: Option<f64>,
    /// YaRN: whether the correction range's bounds are rounded out to whole pairs; true if
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate: Option<bool>,
}

/// YaRN's parameters with transformers' defaults filled in (`RopeScaling::yarn`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// See [`RopeScaling::beta_fast`].
    pub beta_fast: f64,
    /// See [`RopeScaling::beta_slow`].
    pub beta_slow: f64,
    /// See [`RopeScaling::attention_factor`].
    pub attention_factor: f64,
    /// See [`RopeScaling::truncate`].
    pub truncate: bool,
}

impl RopeScaling {
    /// YaRN's parameters as transformers resolves them (`_compute_yarn_parameters`): a beta left
    /// out (or 0) is 32 (fast) or 1 (slow), the attention factor `0.1 ln(factor) + 1` (1 for a
    /// factor of at most 1), truncation on. `None` for the other kinds.
    pub fn yarn(&self) -> Option<Yarn> {
        if self.rope_type != RopeType::Yarn {
            return None;
        }
        let or = |v: Option<f64>, d: f64| v.filter(|&b| b != 0.0).unwrap_or(d);
        Some(Yarn {
            beta_fast: or(self.beta_fast, 32.0),
            beta_slow: or(self.beta_slow, 1.0),
            attention_factor: self
                .attention_factor
                .unwrap_or_else(|| yarn_mscale(self.factor, 1.0)),
            truncate: self.truncate.unwrap_or(true),
        })
    }

    /// The fields of this kind of scaling, resolved, by their config.json names: what a
    /// checkpoint's config must give the same values for (truncate as 1 or 0), and the only
    /// ones a model file may set for this kind (validation refuses another kind's).
    pub fn fields(&self) -> Vec<(&'static str, f64)> {
        let orig = (
            "original_max_position_embeddings",
            self.original_max_position_embeddings as f64,
        );
        match self.rope_type {
            RopeType::Linear => vec![("factor", self.factor)],
            RopeType::Llama3 => vec![
                ("factor", self.factor),
                ("low_freq_factor", self.low_freq_factor),
                ("high_freq_factor", self.high_freq_factor),
                orig,
            ],
            RopeType::Yarn => {
                let y = self.yarn().expect("a YaRN scaling resolves");
                vec![
                    ("factor", self.factor),
                    orig,
                    ("beta_fast", y.beta_fast),
                    ("beta_slow", y.beta_slow),
                    ("attention_factor", y.attention_factor),
                    ("truncate", if y.truncate { 1.0 } else { 0.0 }),
                ]
            }
        }
    }

    /// YaRN's pair range `[low, high]` over which frequencies ramp from kept to divided by
    /// `factor`, for heads of `dim` dimensions and RoPE base `theta` (transformers'
    /// `find_correction_range`, in f64 as Python computes it).
    fn yarn_range(&self, y: &Yarn, dim: f64, theta: f64) -> (f64, f64) {
        let orig = self.original_max_position_embeddings as f64;
        let at = |rotations: f64| {
            dim * (orig / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * theta.ln())
        };
        let (mut low, mut high) = (at(y.beta_fast), at(y.beta_slow));
        if y.truncate {
            (low, high) = (low.floor(), high.ceil());
        }
        let (low, mut high) = (low.max(0.0), high.min(dim - 1.0));
        if low == high {
            high += 0.001;
        }
        (low, high)
    }
}

/// YaRN's `mscale`: `0.1 mscale ln(factor) + 1`, 1 for a factor of at most 1 (transformers'
/// `yarn_get_mscale`); a checkpoint's `mscale` and `mscale_all_dim` give the attention factor
/// as the ratio of two.
pub fn yarn_mscale(factor: f64, mscale: f64) -> f64 {
    if factor <= 1.0 {
        1.0
    } else {
        0.1 * mscale * factor.ln() + 1.0
    }
}

/// The kinds of RoPE scaling mkc computes (`RopeScaling::rope_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RopeType {
    /// Llama 3's frequency-dependent scaling (config.json `"llama3"`).
    #[default]
    Llama3,
    /// Linear position interpolation (config.json `"linear"`).
    Linear,
    /// YaRN (config.json `"yarn"`).
    Yarn,
}

impl RopeType {
    /// Whether this is the default, Llama 3's (then the field is not written out).
    pub fn is_llama3(&self) -> bool {
        *self == RopeType::Llama3
    }

    /// Its name in a checkpoint's config.json (`rope_type`).
    pub fn config_name(&self) -> &'static str {
        match self {
            RopeType::Llama3 => "llama3",
            RopeType::Linear => "linear",
            RopeType::Yarn => "yarn",
        }
    }
}

/// The decode workload: a prompt, then `generate` tokens, one decode step each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    /// Tokens in the prompt (prefilled before decoding).
    pub prompt_len: u32,
    /// Tokens generated by decode steps.
    pub generate: u32,
    /// Capacity of the KV cache in tokens.
    pub max_seq_len: u32,
}

impl Workload {
    /// The KV length of the run's middle decode step: the one a step is simulated at, and the
    /// history the persistent kernel's attention chunk is sized for.
    pub fn typical_kv_len(&self) -> u32 {
        self.prompt_len.saturating_add(self.generate / 2)
    }

    /// The KV length of the run's last decode step (its prompt and generated tokens): the
    /// longest history any step's attention reads, which the split-KV parts are chosen for.
    pub fn longest_kv_len(&self) -> u32 {
        self.prompt_len.saturating_add(self.generate)
    }

    /// The default workload with its KV capacity lowered to `context` (a checkpoint's
    /// `max_position_embeddings`) where that is shorter, and its tokens to what fits: positions
    /// past the trained context are not a run anyone would measure.
    pub fn within_context(context: Option<u32>) -> Workload {
        let mut w = Workload::default();
        if let Some(c) = context.filter(|&c| c < w.max_seq_len) {
            w.max_seq_len = c;
            w.prompt_len = w.prompt_len.min(c / 4);
            w.generate = w.generate.min(c - w.prompt_len);
        }
        w
    }
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            prompt_len: 32,
            generate: 128,
            max_seq_len: 2048,
        }
    }
}

/// Options of the lowering from operators to tasks, shards and kernels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Lowering {
    /// Bytes of one weight page, the unit the kernels' producer copies into shared memory:
    /// a page holds whole rows of one K chunk (`mkc_ir::work`).
    pub page_bytes: u32,
    /// Pages per task of the matvec operators (QKV, O-proj, up/gate, down): a task is a run
    /// of pages of one K chunk, and a chain CTA runs a contiguous range of tasks.
    pub matvec_task_pages: u32,
    /// Pages per LM-head task.
    pub lm_head_task_pages: u32,
    /// Attention tasks per KV head (each takes a share of that head's query heads).
    pub attention_split: u32,
    /// Parts each attention task's KV history is dealt over (split-KV): each part is a task of
    /// its own, writing a partial output with its softmax maximum and sum
    /// ([`crate::work::attention_part_record`]), which the O-projection merges as it stages its
    /// input. More parts shorten a long history's dependent chunk passes and spread them over
    /// more SMs; each costs a partial record and a merge. Unset (the default), `mkc` chooses it
    /// from the run's workload before anything is compiled (`mkc_catalogue::kv_parts_for`);
    /// what reads the lowering before that takes one part ([`Lowering::kv_parts`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention_kv_split: Option<u32>,
    /// Attention computed inside the O-projection, its rows dealt over this many tasks per
    /// attention task: an O-projection task takes one attention task's query heads (its K
    /// chunk) and 1/N of the output rows, computes those heads' attention itself (so each
    /// head's attention runs N times) and adds its products into one vector with reductions
    /// ([`crate::graph::Task::accumulates`]; QKV zeroes it). No attention operator, no
    /// attention -> O-projection edge, one KV part. The persistent kernel runs it; the chain
    /// targets lower the model without it ([`Model::for_chain`]). Unset: attention and the
    /// O-projection are operators of their own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention_in_o_proj: Option<u32>,
    /// VTP shard count of each operator edge.
    pub vtp_shards: VtpShards,
    /// Declared CTA resources of every kernel, used until compiled values exist.
    pub kernel: KernelResources,
}

impl Default for Lowering {
    fn default() -> Self {
        Lowering {
            page_bytes: 16384,
            matvec_task_pages: 2,
            lm_head_task_pages: 4,
            attention_split: 1,
            attention_kv_split: None,
            attention_in_o_proj: None,
            vtp_shards: VtpShards::default(),
            kernel: KernelResources::default(),
        }
    }
}

impl Lowering {
    /// Split-KV parts: the model's `attention_kv_split`, or one where it is still unset.
    pub fn kv_parts(&self) -> u32 {
        self.attention_kv_split.unwrap_or(1)
    }

    /// Whether this lowering has options only the persistent target takes: attention inside
    /// the O-projection (`attention_in_o_proj`), for which the chain targets' grids have no
    /// kernel.
    pub fn persistent_only(&self) -> bool {
        self.attention_in_o_proj.is_some()
    }

    /// Operators a layer lowers to: QKV, attention, O-projection, up/gate and down, or four
    /// where attention runs inside the O-projection. A plan whose graph has another count was
    /// lowered from another model.
    pub fn ops_per_layer(&self) -> u32 {
        if self.attention_in_o_proj.is_some() {
            4
        } else {
            5
        }
    }
}

/// Number of VTP shards (separate ready counters) on each edge between fused operators.
///
/// A consumer on a split-K operator (O-proj, down) takes one K chunk per shard, so it waits
/// only for the shard it reads; consumers that normalise the whole vector wait on all shards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VtpShards {
    /// QKV output -> attention.
    pub qkv_attention: u32,
    /// Attention output -> O-proj (also O-proj's split-K factor).
    pub attention_o_proj: u32,
    /// O-proj output (residual) -> up/gate.
    pub o_proj_up_gate: u32,
    /// Up/gate output -> down (also down's split-K factor).
    pub up_gate_down: u32,
    /// Down output (residual) -> next layer's QKV.
    pub down_qkv: u32,
    /// Last down output -> LM head.
    pub down_lm_head: u32,
}

impl Default for VtpShards {
    fn default() -> Self {
        VtpShards {
            qkv_attention: 1,
            attention_o_proj: 1,
            o_proj_up_gate: 1,
            up_gate_down: 4,
            down_qkv: 1,
            down_lm_head: 1,
        }
    }
}

/// CTA resources a kernel is declared to need (threads, registers, shared memory).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelResources {
    /// Threads per CTA.
    pub threads: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Dynamic shared memory per CTA in bytes.
    pub dynamic_smem_bytes: u32,
}

impl Default for KernelResources {
    fn default() -> Self {
        // The anchors' megakernel: 640 threads, ~88 registers, 13 pages of 16 KiB + bookkeeping.
        KernelResources {
            threads: 640,
            registers: 88,
            dynamic_smem_bytes: 216_504,
        }
    }
}

impl Model {
    /// Parses and validates a model file's text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Model, InputError> {
        let model: Model = ron_options()
            .from_str(text)
            .map_err(|e| InputError::from_ron(crate::FileKind::Model, file, text, &e))?;
        model.validate(file)?;
        Ok(model)
    }

    /// Reads and parses a model file from disk.
    pub fn load(path: &std::path::Path) -> Result<Model, InputError> {
        let text = crate::input::read_text(path, crate::FileKind::Model)?;
        Model::parse(&path.display().to_string(), &text)
    }

    /// Checks every constraint lowering relies on; the first violation is returned.
    pub fn validate(&self, file: &str) -> Result<(), InputError> {
        crate::validate::validate(self, file)
    }

    /// Checks the geometry's sizes alone (each positive and within its range; the lowering,
    /// workload and tuning unread): what no lowering or padding can fix, so that a search over
    /// lowerings refuses it once.
    pub fn validate_geometry_sizes(&self, file: &str) -> Result<(), InputError> {
        crate::validate::check_geometry_sizes(self, file)
    }

    /// Width of the query projection (`heads * head_dim`).
    pub fn q_dim(&self) -> u32 {
        self.geometry.heads * self.geometry.head_dim
    }

    /// Width of the key (or value) projection (`kv_heads * head_dim`).
    pub fn kv_dim(&self) -> u32 {
        self.geometry.kv_heads * self.geometry.head_dim
    }

    /// Rows of the fused QKV output (q, then k, then v).
    pub fn qkv_rows(&self) -> u32 {
        self.q_dim() + 2 * self.kv_dim()
    }

    /// Weight bytes one decode step reads, computed directly from the geometry: every
    /// projection matrix, every RMSNorm weight and the LM head (the embedding row gathered
    /// by layer 0 is an activation read, not a weight stream).
    pub fn weight_bytes(&self) -> u64 {
        let g = &self.geometry;
        let (h, i) = (g.hidden as u64, g.intermediate as u64);
        let (q, kv) = (self.q_dim() as u64, self.kv_dim() as u64);
        let per_layer = h * (q + 2 * kv) + q * h + 2 * i * h + h * i + 2 * h;
        let lm_head = g.vocab as u64 * h + h;
        (g.layers as u64 * per_layer + lm_head) * g.dtype.bytes()
    }

    /// The RoPE frequency (radians per position) of pair `pair` of a head, in f32 as the
    /// kernels and the CPU reference compute it: `theta^(-2 pair / d)` with `d` the
    /// checkpoint's head width (pairs past it are padding: zeros, whatever their frequency),
    /// then the geometry's scaling. The one description of RoPE's frequencies.
    pub fn rope_freq(&self, pair: u32) -> f32 {
        let g = &self.geometry;
        let log2_theta = (g.rope_theta as f32).log2();
        let freq = (-2.0 * pair as f32 / g.stored_head_dim() as f32 * log2_theta).exp2();
        let Some(s) = &g.rope_scaling else {
            return freq;
        };
        if s.rope_type == RopeType::Linear {
            return freq / s.factor as f32;
        }
        if let Some(y) = s.yarn() {
            let (low, high) = s.yarn_range(&y, g.stored_head_dim() as f64, g.rope_theta);
            let ramp = ((pair as f32 - low as f32) / (high - low) as f32).clamp(0.0, 1.0);
            return freq / s.factor as f32 * ramp + freq * (1.0 - ramp);
        }
        let (factor, low, high) = (
            s.factor as f32,
            s.low_freq_factor as f32,
            s.high_freq_factor as f32,
        );
        let orig = s.original_max_position_embeddings as f32;
        let wavelen = 2.0 * std::f32::consts::PI / freq;
        if wavelen < orig / high {
            freq
        } else if wavelen > orig / low {
            freq / factor
        } else {
            let smooth = (orig / wavelen - low) / (high - low);
            (1.0 - smooth) * freq / factor + smooth * freq
        }
    }

    /// Attention's score scale, `1/sqrt(d)` with `d` the checkpoint's head width (a padded
    /// head's zero dimensions add nothing to a score, so the scale stays the checkpoint's),
    /// times YaRN's attention factor squared (transformers scales q and k by it through RoPE's
    /// cos and sin; mkc's KV history holds k unscaled), in f32 as the kernels (generated) and
    /// the CPU reference use it.
    pub fn attention_scale(&self) -> f32 {
        let plain = 1.0 / (self.geometry.stored_head_dim() as f32).sqrt();
        match self.geometry.rope_scaling.as_ref().and_then(|s| s.yarn()) {
            Some(y) => (y.attention_factor * y.attention_factor * plain as f64) as f32,
            None => plain,
        }
    }

    /// The model the chain targets (pdl, graph) lower and build kernels for: this one without
    /// the lowering options only the persistent kernel runs (`Lowering::persistent_only`), as
    /// their grids ignore the persistent kernel's tuning.
    pub fn for_chain(&self) -> Model {
        let mut m = self.clone();
        m.lowering.attention_in_o_proj = None;
        m
    }

    /// Query heads served by one attention task.
    pub fn heads_per_attention_task(&self) -> u32 {
        self.geometry.heads / self.geometry.kv_heads / self.lowering.attention_split
    }

    /// Rows of attention's output tensor each query head owns: its `head_dim` outputs, or with
    /// split-KV one partial record per part (`crate::work::attention_part_row`). The tensor is
    /// head-major either way.
    pub fn attention_rows_per_head(&self) -> u32 {
        let parts = self.lowering.kv_parts();
        if parts <= 1 {
            self.geometry.head_dim
        } else {
            parts * crate::work::attention_part_record(self.geometry.head_dim)
        }
    }

    /// Rows of attention's output tensor: the output vector (`q_dim`), or with split-KV one
    /// partial record per query head and part.
    pub fn attention_out_rows(&self) -> u64 {
        self.geometry.heads as u64 * self.attention_rows_per_head() as u64
    }

    /// The most positions of a `len`-position KV history one attention task reads: its first
    /// (longest) part under split-KV (`crate::work::kv_part`), else all of it.
    pub fn attention_part_len(&self, len: u32) -> u32 {
        let (lo, hi) = crate::work::kv_part(len, 0, self.lowering.kv_parts());
        hi - lo
    }
}

#[cfg(test)]
mod tests {
    use super::{Tuning, Workload};

    /// Every knob a model leaves unset comes from the card, every knob it sets stays its own:
    /// a card setting every knob fills an empty tuning completely, and a full tuning ignores it.
    #[test]
    fn a_card_fills_only_the_knobs_left_unset() {
        let full = |v: u32| Tuning {
            consumer_warps: Some(v),
            persistent_warps: Some(v + 1),
            persistent_slots: Some(v + 2),
            persistent_boundary_inflight: Some(v + 3),
            persistent_stream_inflight: Some(v + 14),
            persistent_warm_pages: Some(v + 15),
            stream_smem: Some(v + 4),
            att_threads: Some(v + 5),
            att_chunk: Some(v + 6),
            o_ctas: Some(v + 7),
            qkv_ctas: Some(v + 8),
            warm_depth: Some(v + 9),
            warm_skip: Some(v + 10),
            warm_qkv: Some(v + 11),
            warm_qkv_skip: Some(v + 12),
            warm_o: Some(v + 13),
            kernels_cu: Some(format!("{v}.cu")),
        };
        let (card, own) = (full(100), full(1));
        assert_eq!(Tuning::default().or_card(&card), card);
        assert_eq!(own.or_card(&card), own);
        let partial = Tuning {
            warm_depth: Some(0),
            ..Tuning::default()
        };
        let merged = partial.or_card(&card);
        assert_eq!(merged.warm_depth, Some(0));
        assert_eq!(merged.persistent_boundary_inflight, Some(103));
    }

    #[test]
    fn a_workload_within_a_context_fits_it() {
        let d = Workload::default();
        assert_eq!(Workload::within_context(None), d);
        assert_eq!(Workload::within_context(Some(131_072)), d);
        let w = Workload::within_context(Some(100));
        assert_eq!((w.prompt_len, w.generate, w.max_seq_len), (25, 75, 100));
        for c in [1, 2, 3, 7, 160, 2047] {
            let w = Workload::within_context(Some(c));
            assert!(w.prompt_len + w.generate <= w.max_seq_len && w.max_seq_len == c);
        }
    }
}

#[cfg(test)]
mod rope_tests {
    use super::{Model, RopeType};

    /// Llama-3.2-1B's geometry with the RoPE scaling `scaling` (RON) in its file.
    fn with_scaling(scaling: &str) -> Result<Model, crate::error::InputError> {
        let text = crate::embedded::MODELS
            .iter()
            .find(|(n, _)| *n == "llama1b")
            .unwrap()
            .1
            .replace(
                "tied_embeddings:",
                &format!("rope_scaling: {scaling},\n        tied_embeddings:"),
            );
        Model::parse("scaled.ron", &text)
    }

    /// Linear scaling divides every frequency by its factor (transformers' "linear": the
    /// positions interpolated), and a file that gives it Llama 3's fields is refused by field.
    #[test]
    fn linear_scaling_divides_every_frequency() {
        let plain = with_scaling("None").unwrap();
        let linear = with_scaling("Some((rope_type: Linear, factor: 4.0))").unwrap();
        let s = linear.geometry.rope_scaling.as_ref().unwrap();
        assert_eq!((s.rope_type, s.factor), (RopeType::Linear, 4.0));
        for pair in 0..plain.geometry.head_dim / 2 {
            assert_eq!(
                linear.rope_freq(pair),
                plain.rope_freq(pair) / 4.0,
                "{pair}"
            );
        }
        // Written out and read back as itself; Llama 3's stays without a rope_type.
        let ron = |m: &Model| {
            ron::ser::to_string_pretty(m, ron::ser::PrettyConfig::default().struct_names(true))
                .unwrap()
        };
        let again = Model::parse("again.ron", &ron(&linear)).unwrap();
        assert_eq!(again.geometry.rope_scaling, linear.geometry.rope_scaling);
        let llama3 = with_scaling(
            "Some((factor: 32.0, low_freq_factor: 1.0, high_freq_factor: 4.0, \
             original_max_position_embeddings: 8192))",
        )
        .unwrap();
        assert!(!ron(&llama3).contains("rope_type"));
        let e = with_scaling("Some((rope_type: Linear, factor: 4.0, low_freq_factor: 1.0))")
            .unwrap_err()
            .to_string();
        assert!(e.contains("geometry.rope_scaling.low_freq_factor"), "{e}");
    }

    /// YaRN as transformers computes it (`_compute_yarn_parameters`), on Llama-3.2-1B's heads
    /// (64 wide, theta 500,000) with factor 8 over an original context of 8,192: the correction
    /// range is pairs 9.04 to 17.49 (Python's `math`: `64 ln(8192 / (beta 2 pi)) / (2 ln
    /// 500000)` at beta 32 and 1), rounded out to 9 and 18. Pairs up to 9 keep plain RoPE's
    /// frequency, pairs from 18 are divided by 8, the ones between ramp linearly; the scores
    /// take the attention factor (0.1 ln 8 + 1) squared.
    #[test]
    fn yarn_ramps_from_kept_to_interpolated_frequencies() {
        let plain = with_scaling("None").unwrap();
        let yarn = with_scaling(
            "Some((rope_type: Yarn, factor: 8.0, original_max_position_embeddings: 8192))",
        )
        .unwrap();
        let ramp =
            |pair: u32, low: f32, high: f32| ((pair as f32 - low) / (high - low)).clamp(0.0, 1.0);
        for pair in 0..32 {
            let p = plain.rope_freq(pair);
            let want = p / 8.0 * ramp(pair, 9.0, 18.0) + p * (1.0 - ramp(pair, 9.0, 18.0));
            assert_eq!(yarn.rope_freq(pair), want, "pair {pair}");
        }
        assert_eq!(yarn.rope_freq(9), plain.rope_freq(9));
        assert_eq!(yarn.rope_freq(18), plain.rope_freq(18) / 8.0);
        let factor = 0.1 * 8f64.ln() + 1.0;
        let scale = (factor * factor * plain.attention_scale() as f64) as f32;
        assert_eq!(yarn.attention_scale(), scale);
        assert!(yarn.attention_scale() > plain.attention_scale() * 1.4);
        // Without truncation the range keeps its fractions; betas and the factor as given.
        let exact = with_scaling(
            "Some((rope_type: Yarn, factor: 8.0, original_max_position_embeddings: 8192, \
             truncate: Some(false), attention_factor: Some(1.0)))",
        )
        .unwrap();
        for pair in 0..32 {
            let p = plain.rope_freq(pair);
            let r = ramp(pair, 9.040_568, 17.492_06);
            let want = p / 8.0 * r + p * (1.0 - r);
            assert!(
                (exact.rope_freq(pair) - want).abs() <= 1e-6 * p,
                "pair {pair}"
            );
        }
        assert_eq!(exact.attention_scale(), plain.attention_scale());
        // Written out and read back as itself.
        let ron = ron::ser::to_string_pretty(
            &exact,
            ron::ser::PrettyConfig::default().struct_names(true),
        )
        .unwrap();
        let again = Model::parse("again.ron", &ron).unwrap();
        assert_eq!(again.geometry.rope_scaling, exact.geometry.rope_scaling);
    }

    /// transformers' own YaRN frequencies and attention factor (5.25.0's
    /// `_compute_yarn_parameters` on `LlamaConfig(head_dim=64, rope_theta=10000.0,
    /// max_position_embeddings=8192, rope_scaling={"rope_type": "yarn", "factor": 4.0,
    /// "original_max_position_embeddings": 2048})`, evaluated in float32 over numpy, printed
    /// to 10 digits): an independent implementation of the formula, which mkc's f32 tables
    /// match to a few ulps.
    #[test]
    fn yarn_matches_transformers_frequencies() {
        const TRANSFORMERS: [f64; 32] = [
            1.000000000e+00,
            7.498942018e-01,
            5.623413324e-01,
            4.216965139e-01,
            3.162277639e-01,
            2.371373922e-01,
            1.778279394e-01,
            1.333521456e-01,
            1.000000015e-01,
            7.066310197e-02,
            4.974557459e-02,
            3.487105668e-02,
            2.432521433e-02,
            1.687323488e-02,
            1.162721217e-02,
            7.949839346e-03,
            5.384615157e-03,
            3.605260747e-03,
            2.379136393e-03,
            1.540814061e-03,
            9.730085731e-04,
            5.928434548e-04,
            4.445698578e-04,
            3.333803616e-04,
            2.500000119e-04,
            1.874735462e-04,
            1.405853254e-04,
            1.054241366e-04,
            7.905694656e-05,
            5.928434621e-05,
            4.445698505e-05,
            3.333803761e-05,
        ];
        let m = with_scaling(
            "Some((rope_type: Yarn, factor: 4.0, original_max_position_embeddings: 2048))",
        )
        .map(|mut m| {
            m.geometry.rope_theta = 10000.0;
            m
        })
        .unwrap();
        for (pair, want) in TRANSFORMERS.iter().enumerate() {
            let got = m.rope_freq(pair as u32) as f64;
            assert!(
                (got - want).abs() <= 1e-6 * want,
                "pair {pair}: {got} against {want}"
            );
        }
        // transformers' attention factor 1.138629436111989, on cos and sin: squared on scores.
        let want = 1.138629436111989f64.powi(2) / 8.0;
        assert!((m.attention_scale() as f64 - want).abs() <= 1e-7 * want);
    }

    /// A YaRN file is refused by field where its betas are not ordered, its attention factor is
    /// out of range or it gives Llama 3's fields; Llama 3's scaling refuses YaRN's fields.
    #[test]
    fn yarn_fields_are_checked_by_name() {
        for (fields, field) in [
            ("beta_fast: Some(1.0), beta_slow: Some(2.0)", "beta_fast"),
            ("beta_slow: Some(-1.0)", "beta_slow"),
            ("attention_factor: Some(0.0)", "attention_factor"),
            ("low_freq_factor: 1.0", "low_freq_factor"),
        ] {
            let e = with_scaling(&format!(
                "Some((rope_type: Yarn, factor: 8.0, original_max_position_embeddings: 8192, \
                 {fields}))"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(&format!("geometry.rope_scaling.{field}")), "{e}");
        }
        let e = with_scaling("Some((rope_type: Yarn, factor: 8.0))")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("geometry.rope_scaling.original_max_position_embeddings"),
            "{e}"
        );
        let e = with_scaling(
            "Some((factor: 32.0, low_freq_factor: 1.0, high_freq_factor: 4.0, \
             original_max_position_embeddings: 8192, beta_fast: Some(32.0)))",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("geometry.rope_scaling.beta_fast"), "{e}");
    }
}
