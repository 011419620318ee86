//! Loading a Hugging Face Llama checkpoint into mkc's weight layout.

use std::path::Path;

use mkc_ir::model::{Geometry, RopeScaling, RopeType};
use mkc_ir::Model;
use safetensors::Dtype;
use serde_json::Value;

use crate::weights::HostWeights;
use crate::BackendError;

pub(crate) fn err(dir: &Path, what: impl std::fmt::Display) -> BackendError {
    BackendError::Weights(format!("checkpoint {}: {what}", dir.display()))
}

/// A whole-number key of config.json: `Ok(None)` when absent, an error naming the key when it
/// is present but not a whole number (`"64"`, `64.0`).
fn int_key(dir: &Path, c: &Value, key: &str) -> Result<Option<u64>, BackendError> {
    match c.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            err(
                dir,
                format!(
                    "config.json: `{key}` is {}, not a whole number. Fix: write it as an \
                     unquoted integer",
                    mkc_ir::error::shorten(&v.to_string())
                ),
            )
        }),
    }
}

/// A number key of config.json with the default Hugging Face's `LlamaConfig` gives it.
fn float_key(dir: &Path, c: &Value, key: &str, default: f64) -> Result<f64, BackendError> {
    Ok(number_key(dir, c, "", key)?.unwrap_or(default))
}

/// A number key of the object `at` names in config.json (`""`: the top level, else a block's
/// key and a dot): `Ok(None)` when absent, an error naming it when it is not a number.
fn number_key(dir: &Path, obj: &Value, at: &str, key: &str) -> Result<Option<f64>, BackendError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| {
            err(
                dir,
                format!(
                    "config.json: `{at}{key}` is {}, not a number. Fix: write it as a number",
                    mkc_ir::error::shorten(&v.to_string())
                ),
            )
        }),
    }
}

/// The architectures mkc computes exactly: Llama, and Mistral, whose decoder is Llama's but
/// for a sliding attention window (bounded by [`sliding_window`]).
const MODEL_TYPES: [&str; 2] = ["llama", "mistral"];

/// Refuses what mkc's kernels and CPU reference do not compute (they would give a silently
/// wrong number): another architecture, another activation, biases, RoPE scaling.
fn check_semantics(dir: &Path, c: &Value) -> Result<(), BackendError> {
    let shown = |v: &Value| mkc_ir::error::shorten(&v.to_string());
    match c.get("model_type") {
        Some(Value::String(t)) if MODEL_TYPES.contains(&t.as_str()) => {}
        Some(v) => {
            return Err(err(
                dir,
                format!(
                    "config.json: `model_type` is {}; mkc runs Llama-family checkpoints \
                     (`\"llama\"`, `\"mistral\"`) only. Fix: use a Llama-family checkpoint",
                    shown(v)
                ),
            ))
        }
        None => {
            return Err(err(
                dir,
                "config.json: `model_type` is missing. Fix: a Llama checkpoint says \
                 \"model_type\": \"llama\"",
            ))
        }
    }
    match c.get("hidden_act") {
        None | Some(Value::Null) => {}
        Some(Value::String(a)) if a == "silu" => {}
        Some(v) => {
            return Err(err(
                dir,
                format!(
                    "config.json: `hidden_act` is {}; mkc's MLP computes SiLU (\"silu\") \
                     only. Fix: use a checkpoint whose MLP is SiLU-gated",
                    shown(v)
                ),
            ))
        }
    }
    for key in ["attention_bias", "mlp_bias"] {
        match c.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {}
            Some(v) => {
                return Err(err(
                    dir,
                    format!(
                        "config.json: `{key}` is {}; mkc's projections have no bias. Fix: use \
                         a checkpoint without biases",
                        shown(v)
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// The attention window config.json sets (`sliding_window`, Mistral's; absent or null: none).
/// mkc's attention attends to every position, which is the windowed attention's result only
/// while positions stay within the window: runs are bounded by it.
fn sliding_window(dir: &Path, c: &Value) -> Result<Option<u32>, BackendError> {
    Ok(int_key(dir, c, "sliding_window")?.map(|w| u32::try_from(w).unwrap_or(u32::MAX)))
}

/// config.json's RoPE blocks, each with its key and its kind (`rope_type`, or the older
/// `type`): newer transformers write `rope_parameters` (`rope_theta`, `rope_type` and the
/// scaling factors), older ones `rope_scaling` beside `rope_theta`.
fn rope_blocks(c: &Value) -> impl Iterator<Item = (&'static str, &Value, Option<&Value>)> {
    ["rope_parameters", "rope_scaling"]
        .into_iter()
        .filter_map(|key| c.get(key).filter(|v| !v.is_null()).map(|v| (key, v)))
        .map(|(key, v)| (key, v, v.get("rope_type").or_else(|| v.get("type"))))
}

/// config.json's dynamic NTK scaling block (rope_type "dynamic"), with its key, if any.
fn dynamic_rope_block(c: &Value) -> Option<(&'static str, &Value)> {
    rope_blocks(c)
        .find(|(_, _, kind)| kind.and_then(Value::as_str) == Some("dynamic"))
        .map(|(key, v, _)| (key, v))
}

/// The RoPE scaling block config.json describes, when it is one mkc computes: (its key, the
/// block, its kind: Llama 3's, linear or YaRN); `None` for plain RoPE, which dynamic NTK scaling is
/// within the trained context (`check_dynamic_context` bounds the run by it). Any other RoPE is
/// refused by key; either block may say "default".
fn rope_block<'c>(
    dir: &Path,
    c: &'c Value,
) -> Result<Option<(&'static str, &'c Value, RopeType)>, BackendError> {
    let shown = |v: &Value| mkc_ir::error::shorten(&v.to_string());
    let mut scaling: Option<(&'static str, &'c Value, RopeType)> = None;
    for (key, v, kind) in rope_blocks(c) {
        let known = [RopeType::Llama3, RopeType::Linear, RopeType::Yarn]
            .into_iter()
            .find(|t| kind.and_then(Value::as_str) == Some(t.config_name()));
        match (kind, known) {
            (Some(Value::String(t)), _) if t == "default" || t == "dynamic" => {}
            // rope_parameters without a type is the plain RoPE.
            (None, _) if key == "rope_parameters" => {}
            (_, Some(t)) if v.is_object() => scaling = Some((key, v, t)),
            _ => {
                return Err(err(
                    dir,
                    format!(
                        "config.json: `{key}` is {}{}; mkc implements plain RoPE, Llama 3's \
                         scaling (rope_type \"llama3\"), linear scaling (\"linear\"), YaRN \
                         (\"yarn\") and dynamic NTK scaling within the trained context \
                         (\"dynamic\") only, \
                         and would compute different logits. Fix: use a checkpoint with one of \
                         those",
                        kind.map(|t| format!("(rope_type {}) ", shown(t)))
                            .unwrap_or_default(),
                        shown(v)
                    ),
                ))
            }
        }
    }
    Ok(scaling)
}

/// Dynamic NTK scaling (rope_type "dynamic") changes RoPE's base only past the trained context
/// (`original_max_position_embeddings`, else `max_position_embeddings`): within it the
/// frequencies are plain RoPE's. A model file whose KV capacity passes it is refused.
fn check_dynamic_context(dir: &Path, c: &Value, model: &Model) -> Result<(), BackendError> {
    let Some((key, v)) = dynamic_rope_block(c) else {
        return Ok(());
    };
    let trained = match int_key(dir, v, "original_max_position_embeddings")? {
        Some(n) => Some(n),
        None => int_key(dir, c, "max_position_embeddings")?,
    };
    let capacity = model.workload.max_seq_len as u64;
    match trained {
        Some(n) if capacity <= n => Ok(()),
        _ => Err(err(
            dir,
            format!(
                "config.json: `{key}` scales RoPE dynamically past the trained context ({}), \
                 and the model file's workload.max_seq_len is {capacity}: mkc computes plain \
                 RoPE, which is the dynamic scaling's only within it. Fix: a \
                 workload.max_seq_len of at most the trained context",
                trained.map_or("not given".to_string(), |n| format!("{n} positions"))
            ),
        )),
    }
}

/// Checks the RoPE config.json describes against the model file's: plain RoPE, or the same
/// scaling with the same parameters (`geometry.rope_scaling`).
fn check_rope(dir: &Path, c: &Value, model: &Model) -> Result<(), BackendError> {
    check_dynamic_context(dir, c, model)?;
    let shown = |v: &Value| mkc_ir::error::shorten(&v.to_string());
    let scaling = config_rope_scaling(dir, c)?;
    let declared = &model.geometry.rope_scaling;
    match (scaling, declared) {
        (None, None) => Ok(()),
        (Some((key, v, got)), None) => Err(err(
            dir,
            format!(
                "config.json: `{key}` scales RoPE (rope_type \"{}\", {}), but the model file \
                 declares no geometry.rope_scaling. Fix: use a model file with the checkpoint's \
                 rope_scaling (`mkc model DIR` writes one; models/llama3.2-1b.ron for \
                 Llama-3.2-1B)",
                got.rope_type.config_name(),
                shown(v)
            ),
        )),
        (None, Some(_)) => Err(err(
            dir,
            "the model file declares geometry.rope_scaling but config.json has plain RoPE. Fix: \
             drop rope_scaling from the model file, or use the checkpoint it was written for",
        )),
        (Some((key, _, got)), Some(s)) if got.rope_type != s.rope_type => Err(err(
            dir,
            format!(
                "config.json's `{key}` is rope_type \"{}\" and the model file's \
                 geometry.rope_scaling is \"{}\". Fix: give the model file the checkpoint's \
                 rope_scaling (`mkc model DIR` writes it)",
                got.rope_type.config_name(),
                s.rope_type.config_name()
            ),
        )),
        (Some((key, _, got)), Some(s)) => {
            // Both resolved (a YaRN field either leaves out takes transformers' default).
            let wrong: Vec<String> = got
                .fields()
                .into_iter()
                .zip(s.fields())
                .filter(|((_, g), (_, w))| (g - w).abs() > 1e-9 * w.abs())
                .map(|((field, g), (_, w))| format!("{key}.{field} = {g} (model file: {w})"))
                .collect();
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(err(
                    dir,
                    format!(
                        "config.json's RoPE scaling does not match the model file's \
                         geometry.rope_scaling: {}. Fix: copy the checkpoint's values into the \
                         model file",
                        wrong.join("; ")
                    ),
                ))
            }
        }
    }
}

/// The RoPE scaling config.json describes, as mkc computes it: (its block's key, the block, the
/// scaling), `None` for plain RoPE. Llama 3's and linear scaling's fields must be given; YaRN's
/// optional ones are kept as given (left out: transformers' defaults, `RopeScaling::yarn`),
/// its attention factor folded from `mscale` and `mscale_all_dim` where both are given without
/// one, and its original context, as transformers takes it, from the config's top level, else
/// the block, else `max_position_embeddings`. A partial rotary factor other than 1 is refused.
fn config_rope_scaling<'c>(
    dir: &Path,
    c: &'c Value,
) -> Result<Option<(&'static str, &'c Value, RopeScaling)>, BackendError> {
    for (key, v, _) in rope_blocks(c).chain([("", c, None)]) {
        let at = if key.is_empty() {
            "partial_rotary_factor".to_string()
        } else {
            format!("{key}.partial_rotary_factor")
        };
        match v.get("partial_rotary_factor") {
            None | Some(Value::Null) => {}
            Some(f) if f.as_f64() == Some(1.0) => {}
            Some(f) => {
                return Err(err(
                    dir,
                    format!(
                        "config.json: `{at}` is {}; mkc rotates every dimension of a head \
                         and would compute different logits. Fix: use a checkpoint whose RoPE \
                         covers whole heads",
                        mkc_ir::error::shorten(&f.to_string())
                    ),
                ))
            }
        }
    }
    let Some((key, block, rope_type)) = rope_block(dir, c)? else {
        return Ok(None);
    };
    let number = |name: &str| number_key(dir, block, &format!("{key}."), name);
    let field = |name: &str| {
        number(name)?.ok_or_else(|| {
            err(
                dir,
                format!(
                    "config.json: `{key}.{name}` is missing. Fix: give the RoPE scaling \
                     (rope_type \"{}\") in full",
                    rope_type.config_name()
                ),
            )
        })
    };
    let context = |n: f64| {
        if n.fract() == 0.0 && (1.0..=u32::MAX as f64).contains(&n) {
            Ok(n as u32)
        } else {
            Err(err(
                dir,
                format!(
                    "config.json: `{key}.original_max_position_embeddings` is {n}, not a \
                     context length. Fix: give the checkpoint's pre-training context"
                ),
            ))
        }
    };
    // As transformers standardises Llama 3's and YaRN's blocks: the config's top-level
    // original_max_position_embeddings, else the block's, else max_position_embeddings.
    let original_context = || {
        let orig = [
            number_key(dir, c, "", "original_max_position_embeddings")?,
            number("original_max_position_embeddings")?,
            number_key(dir, c, "", "max_position_embeddings")?,
        ]
        .into_iter()
        .flatten()
        .next()
        .ok_or_else(|| {
            err(
                dir,
                format!(
                    "config.json: `{key}` scales RoPE by the pre-training context, and \
                         neither original_max_position_embeddings nor max_position_embeddings \
                         is given. Fix: give `{key}.original_max_position_embeddings`"
                ),
            )
        })?;
        context(orig)
    };
    let mut s = RopeScaling {
        rope_type,
        factor: field("factor")?,
        ..RopeScaling::default()
    };
    match rope_type {
        RopeType::Linear => {}
        RopeType::Llama3 => {
            s.low_freq_factor = field("low_freq_factor")?;
            s.high_freq_factor = field("high_freq_factor")?;
            s.original_max_position_embeddings = original_context()?;
        }
        RopeType::Yarn => {
            s.original_max_position_embeddings = original_context()?;
            s.beta_fast = number("beta_fast")?;
            s.beta_slow = number("beta_slow")?;
            s.attention_factor = match (
                number("attention_factor")?,
                number("mscale")?,
                number("mscale_all_dim")?,
            ) {
                (Some(a), _, _) => Some(a),
                (None, Some(m), Some(all)) if m != 0.0 && all != 0.0 => Some(
                    mkc_ir::model::yarn_mscale(s.factor, m)
                        / mkc_ir::model::yarn_mscale(s.factor, all),
                ),
                _ => None,
            };
            s.truncate = match block.get("truncate") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(v) => {
                    return Err(err(
                        dir,
                        format!(
                            "config.json: `{key}.truncate` is {}, not true or false. Fix: \
                             write it as a boolean",
                            mkc_ir::error::shorten(&v.to_string())
                        ),
                    ))
                }
            };
        }
    }
    Ok(Some((key, block, s)))
}

/// The RoPE base config.json describes (`rope_parameters.rope_theta` or `rope_theta`).
fn rope_theta(dir: &Path, c: &Value) -> Result<f64, BackendError> {
    let shown = |v: &Value| mkc_ir::error::shorten(&v.to_string());
    let top = float_key(dir, c, "rope_theta", f64::NAN)?;
    let nested = match c.get("rope_parameters").and_then(|p| p.get("rope_theta")) {
        None | Some(Value::Null) => f64::NAN,
        Some(v) => v.as_f64().ok_or_else(|| {
            err(
                dir,
                format!(
                    "config.json: `rope_parameters.rope_theta` is {}, not a number. Fix: write \
                     it as a number",
                    shown(v)
                ),
            )
        })?,
    };
    match (top.is_nan(), nested.is_nan()) {
        (false, false) if (top - nested).abs() > 1e-6 * nested.abs() => Err(err(
            dir,
            format!(
                "config.json: `rope_theta` = {top:e} and `rope_parameters.rope_theta` = \
                 {nested:e} disagree. Fix: keep one"
            ),
        )),
        (_, false) => Ok(nested),
        (false, true) => Ok(top),
        // Hugging Face's LlamaConfig default.
        (true, true) => Ok(10_000.0),
    }
}

/// config.json of checkpoint `dir`: a JSON object.
fn read_config(dir: &Path) -> Result<Value, BackendError> {
    parse_config(dir, &config_text(dir)?)
}

/// The text of checkpoint `dir`'s config.json.
fn config_text(dir: &Path) -> Result<String, BackendError> {
    mkc_ir::input::read_text(&dir.join("config.json"), mkc_ir::FileKind::CheckpointConfig)
        .map_err(|e| err(dir, e))
}

/// config.json's text as a JSON object.
fn parse_config(dir: &Path, text: &str) -> Result<Value, BackendError> {
    let c: Value = serde_json::from_str(text).map_err(|e| {
        err(
            dir,
            format!("config.json is not JSON: {e}. Fix: use the checkpoint's own config.json"),
        )
    })?;
    if !c.is_object() {
        return Err(err(
            dir,
            "config.json is not a JSON object. Fix: use the checkpoint's own config.json",
        ));
    }
    Ok(c)
}

/// config.json's sizes, keyed as Hugging Face's LlamaConfig names them, in the order of
/// [`geometry_sizes`]: `num_key_value_heads` defaults to the query heads and `head_dim` to
/// hidden_size / num_attention_heads; `None` where a key is absent.
fn config_sizes(dir: &Path, c: &Value) -> Result<[(&'static str, Option<u64>); 7], BackendError> {
    let int = |k: &str| int_key(dir, c, k);
    let heads = int("num_attention_heads")?;
    let hidden = int("hidden_size")?;
    let head_dim = match int("head_dim")? {
        Some(d) => Some(d),
        None => match (hidden, heads) {
            (_, Some(0)) => {
                return Err(err(
                    dir,
                    "config.json: `num_attention_heads` is 0, and head_dim (hidden_size / \
                     num_attention_heads) cannot be derived. Fix: give the checkpoint's head \
                     count",
                ))
            }
            (Some(h), Some(n)) => Some(h / n),
            _ => None,
        },
    };
    Ok([
        ("hidden_size", hidden),
        ("intermediate_size", int("intermediate_size")?),
        ("num_hidden_layers", int("num_hidden_layers")?),
        ("num_attention_heads", heads),
        ("num_key_value_heads", int("num_key_value_heads")?.or(heads)),
        ("head_dim", head_dim),
        ("vocab_size", int("vocab_size")?),
    ])
}

/// A geometry's sizes in the order of [`config_sizes`], as the checkpoint stores them (a
/// padded MLP's or head's stored width).
fn geometry_sizes(g: &Geometry) -> [u32; 7] {
    [
        g.hidden,
        g.stored_intermediate(),
        g.layers,
        g.heads,
        g.kv_heads,
        g.stored_head_dim(),
        g.vocab,
    ]
}

/// `tie_word_embeddings` (Hugging Face's default: false).
fn config_tied(dir: &Path, c: &Value) -> Result<bool, BackendError> {
    match c.get("tie_word_embeddings") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(err(
            dir,
            format!(
                "config.json: `tie_word_embeddings` is {}, not true or false. Fix: write true \
                 or false",
                mkc_ir::error::shorten(&v.to_string())
            ),
        )),
    }
}

/// What a Hugging Face Llama checkpoint's config.json says of its shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigShape {
    /// The geometry (bf16 weights), with Hugging Face's defaults where a key may be absent
    /// (`rope_theta` 10000, `rms_norm_eps` 1e-6, untied embeddings).
    pub geometry: Geometry,
    /// The positions the checkpoint computes as mkc does: those it was trained for
    /// (`max_position_embeddings`), at most its attention window (`sliding_window`); absent:
    /// none said.
    pub context: Option<u32>,
}

/// The shape checkpoint `dir`'s config.json describes; what mkc does not compute is refused by
/// key, as when loading.
pub fn config_shape(dir: &Path) -> Result<ConfigShape, BackendError> {
    parse_config_shape(dir, &config_text(dir)?)
}

/// [`config_shape`] of a config.json's `text` (`dir` names the checkpoint in errors).
pub fn parse_config_shape(dir: &Path, text: &str) -> Result<ConfigShape, BackendError> {
    let c = parse_config(dir, text)?;
    check_semantics(dir, &c)?;
    let sizes = config_sizes(dir, &c)?;
    let mut v = [0u32; 7];
    for (slot, (key, got)) in v.iter_mut().zip(sizes) {
        let got = got.ok_or_else(|| {
            err(
                dir,
                format!("config.json: `{key}` is missing. Fix: give the checkpoint's {key}"),
            )
        })?;
        *slot = u32::try_from(got).map_err(|_| {
            err(
                dir,
                format!(
                    "config.json: `{key}` is {got}, more than mkc's sizes hold (2^32 - 1). Fix: \
                     give the checkpoint's real size"
                ),
            )
        })?;
    }
    let rope_scaling = config_rope_scaling(dir, &c)?.map(|(_, _, s)| s);
    let geometry = Geometry {
        hidden: v[0],
        intermediate: v[1],
        checkpoint_intermediate: None,
        checkpoint_head_dim: None,
        layers: v[2],
        heads: v[3],
        kv_heads: v[4],
        head_dim: v[5],
        vocab: v[6],
        rope_theta: rope_theta(dir, &c)?,
        rope_scaling,
        norm_eps: float_key(dir, &c, "rms_norm_eps", 1e-6)?,
        tied_embeddings: config_tied(dir, &c)?,
        dtype: mkc_ir::model::Dtype::Bf16,
    };
    // A sliding window shorter than the trained context bounds the positions mkc computes
    // exactly (its attention has no window), as a dynamic RoPE scaling's own trained context
    // does (past it the scaling is no longer plain RoPE).
    let dynamic_context = dynamic_rope_block(&c).and_then(|(_, v)| {
        v.get("original_max_position_embeddings")
            .and_then(Value::as_u64)
    });
    let trained = int_key(dir, &c, "max_position_embeddings")?
        .into_iter()
        .chain(dynamic_context)
        .min()
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let context = match (trained, sliding_window(dir, &c)?) {
        (Some(t), Some(w)) => Some(t.min(w)),
        (t, w) => t.or(w),
    };
    Ok(ConfigShape { geometry, context })
}

/// Checks config.json against the model file; lists every mismatch.
pub(crate) fn check_config(dir: &Path, model: &Model) -> Result<(), BackendError> {
    let c = read_config(dir)?;
    check_semantics(dir, &c)?;
    check_rope(dir, &c, model)?;
    let g = &model.geometry;
    let expect: Vec<(&str, Option<u64>, u64)> = config_sizes(dir, &c)?
        .into_iter()
        .zip(geometry_sizes(g))
        .map(|((k, got), want)| (k, got, want as u64))
        .collect();
    // The config keys whose narrower width the model file can declare and pad, where it does
    // not yet: the field that declares it.
    let paddable = |k: &str| match k {
        "intermediate_size" if g.checkpoint_intermediate.is_none() => {
            Some("checkpoint_intermediate")
        }
        "head_dim" if g.checkpoint_head_dim.is_none() => Some("checkpoint_head_dim"),
        _ => None,
    };
    let mut wrong: Vec<String> = expect
        .iter()
        .filter(|(_, got, want)| *got != Some(*want))
        .map(|(k, got, want)| match (got, paddable(k)) {
            // A narrower MLP or head is what the model file can pad.
            (Some(v), Some(field)) if v < want => format!(
                "{k} = {v} (model file: {want}; to load it zero-padded, set \
                 geometry.{field}: Some({v}))"
            ),
            (Some(v), _) => format!("{k} = {v} (model file: {want})"),
            (None, _) => format!("{k} is missing (model file: {want})"),
        })
        .collect();
    // Hugging Face's LlamaConfig defaults: rope_theta 10000, rms_norm_eps 1e-6.
    for (key, got, want, field) in [
        (
            "rope_theta",
            rope_theta(dir, &c)?,
            g.rope_theta,
            "geometry.rope_theta",
        ),
        (
            "rms_norm_eps",
            float_key(dir, &c, "rms_norm_eps", 1e-6)?,
            g.norm_eps,
            "geometry.norm_eps",
        ),
    ] {
        if (got - want).abs() > 1e-6 * want.abs() {
            wrong.push(format!("{key} = {got:e} (model file's {field}: {want:e})"));
        }
    }
    if let Some(w) = sliding_window(dir, &c)? {
        if model.workload.max_seq_len > w {
            return Err(err(
                dir,
                format!(
                    "config.json: `sliding_window` is {w}, and the model file's \
                     workload.max_seq_len {} goes past it; mkc's attention has no window, so \
                     later positions would differ from the checkpoint's. Fix: set \
                     workload.max_seq_len to at most {w}",
                    model.workload.max_seq_len
                ),
            ));
        }
    }
    let tied = config_tied(dir, &c)?;
    if tied != g.tied_embeddings {
        wrong.push(format!(
            "tie_word_embeddings = {tied} (model file: {})",
            g.tied_embeddings
        ));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(err(
            dir,
            format!(
                "config.json does not match the model file: {}. Fix: use a model file with the \
                 checkpoint's geometry",
                wrong.join("; ")
            ),
        ))
    }
}

/// The first non-finite bf16 value of `data`, as (index, bits).
fn first_non_finite(data: &[u16]) -> Option<(usize, u16)> {
    data.iter()
        .position(|&b| b & 0x7F80 == 0x7F80)
        .map(|i| (i, data[i]))
}

/// A tensor's little-endian elements of `dtype` (bf16, f16 or f32) as bf16 bits: bf16 as
/// stored, f16 and f32 rounded to nearest even (every finite f16 is in bf16's range; an f32
/// beyond it rounds to infinity and is refused). Else the first non-finite element: its index
/// and its stored bits in hex.
pub(crate) fn as_bf16(dtype: Dtype, bytes: &[u8]) -> Result<Vec<u16>, (usize, String)> {
    let halves = || {
        bytes
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let data: Vec<u16> = match dtype {
        Dtype::F16 => halves()
            .map(|b| crate::weights::f2bf(half::f16::from_bits(b).to_f32()))
            .collect(),
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|b| crate::weights::f2bf(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
        _ => halves().collect(),
    };
    let Some((i, _)) = first_non_finite(&data) else {
        return Ok(data);
    };
    // The element as stored, most significant byte first.
    let width = bytes.len() / data.len();
    let stored = &bytes[i * width..(i + 1) * width];
    Err((i, stored.iter().rev().map(|b| format!("{b:02x}")).collect()))
}

/// `rows` of `from` columns each, widened to `to` columns with zeros: a padded MLP's down
/// (rows of the stored width), a padded head's block of the O-projection (each head's columns
/// a "row") or of q, k and v (each head's rows, flattened, a "row").
pub(crate) fn pad_columns(rows: &[u16], from: usize, to: usize) -> Vec<u16> {
    if from == to {
        return rows.to_vec();
    }
    let mut out = vec![0u16; rows.len() / from * to];
    for (dst, src) in out.chunks_exact_mut(to).zip(rows.chunks_exact(from)) {
        dst[..from].copy_from_slice(src);
    }
    out
}

/// Permutes the rows of each head from rotate-half order (i, i + hd/2) to interleaved pairs.
pub(crate) fn interleave_heads(rows: &[u16], n_heads: usize, hd: usize, cols: usize) -> Vec<u16> {
    let mut out = vec![0u16; rows.len()];
    for h in 0..n_heads {
        for i in 0..hd / 2 {
            for (dst, src) in [(2 * i, i), (2 * i + 1, i + hd / 2)] {
                let d = (h * hd + dst) * cols;
                let s = (h * hd + src) * cols;
                out[d..d + cols].copy_from_slice(&rows[s..s + cols]);
            }
        }
    }
    out
}

/// Loads `dir` into the layout of `model`: every tensor the model needs, each once, bf16 (f16,
/// f32 rounded to it), finite, of the right shape (a narrower MLP or head zero-padded to the
/// model's), and nothing else (an extra tensor is a bias or a layer mkc would silently drop).
/// The whole checkpoint in host memory: the CPU reference's; a run uploads tensor by tensor
/// from a [`crate::checkpoint_reader::Checkpoint`] instead.
pub fn load(dir: &Path, model: &Model) -> Result<HostWeights, BackendError> {
    let c = crate::checkpoint_reader::Checkpoint::open(dir, model)?;
    let w = c.host_weights()?;
    c.note_rounding();
    Ok(w)
}
