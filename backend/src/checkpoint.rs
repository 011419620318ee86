//! Loading a Hugging Face Llama checkpoint into mkc's weight layout.

use std::path::Path;

use mkc_ir::Model;
use safetensors::{Dtype, SafeTensors};
use serde_json::Value;

use crate::weights::{layout, HostWeights};
use crate::BackendError;

fn err(dir: &Path, what: impl std::fmt::Display) -> BackendError {
    BackendError::Weights(format!("checkpoint {}: {what}", dir.display()))
}

/// Checks config.json against the model file; lists every mismatch.
fn check_config(dir: &Path, model: &Model) -> Result<(), BackendError> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| err(dir, format!("cannot read config.json: {e}")))?;
    let c: Value = serde_json::from_str(&text)
        .map_err(|e| err(dir, format!("config.json is not JSON: {e}")))?;
    let g = &model.geometry;
    let int = |k: &str| c.get(k).and_then(Value::as_u64);
    let heads = int("num_attention_heads");
    let expect: Vec<(&str, Option<u64>, u64)> = vec![
        ("hidden_size", int("hidden_size"), g.hidden as u64),
        (
            "intermediate_size",
            int("intermediate_size"),
            g.intermediate as u64,
        ),
        (
            "num_hidden_layers",
            int("num_hidden_layers"),
            g.layers as u64,
        ),
        ("num_attention_heads", heads, g.heads as u64),
        (
            "num_key_value_heads",
            int("num_key_value_heads").or(heads),
            g.kv_heads as u64,
        ),
        (
            "head_dim",
            int("head_dim").or_else(|| Some(int("hidden_size")? / heads?)),
            g.head_dim as u64,
        ),
        ("vocab_size", int("vocab_size"), g.vocab as u64),
    ];
    let mut wrong: Vec<String> = expect
        .iter()
        .filter(|(_, got, want)| *got != Some(*want))
        .map(|(k, got, want)| match got {
            Some(v) => format!("{k} = {v} (model file: {want})"),
            None => format!("{k} is missing (model file: {want})"),
        })
        .collect();
    let tied = c
        .get("tie_word_embeddings")
        .and_then(Value::as_bool)
        .unwrap_or(false);
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

/// Permutes the rows of each head from rotate-half order (i, i + hd/2) to interleaved pairs.
fn interleave_heads(rows: &[u16], n_heads: usize, hd: usize, cols: usize) -> Vec<u16> {
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

/// Loads `dir` into the layout of `model`.
pub fn load(dir: &Path, model: &Model) -> Result<HostWeights, BackendError> {
    check_config(dir, model)?;
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| err(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(err(dir, "no *.safetensors files"));
    }
    let blobs: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).map_err(|e| err(dir, format!("{}: {e}", f.display()))))
        .collect::<Result<_, _>>()?;
    let parsed: Vec<SafeTensors> = blobs
        .iter()
        .zip(&files)
        .map(|(b, f)| {
            SafeTensors::deserialize(b).map_err(|e| err(dir, format!("{}: {e}", f.display())))
        })
        .collect::<Result<_, _>>()?;
    let get = |name: &str, shape: &[usize]| -> Result<Vec<u16>, BackendError> {
        let t = parsed
            .iter()
            .find_map(|st| st.tensor(name).ok())
            .ok_or_else(|| err(dir, format!("tensor `{name}` is missing")))?;
        if t.dtype() != Dtype::BF16 {
            return Err(err(
                dir,
                format!("tensor `{name}` is {:?}; mkc needs bf16", t.dtype()),
            ));
        }
        if t.shape() != shape {
            return Err(err(
                dir,
                format!(
                    "tensor `{name}` has shape {:?}, expected {shape:?}",
                    t.shape()
                ),
            ));
        }
        Ok(t.data()
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect())
    };
    let g = &model.geometry;
    let (h, i) = (g.hidden as usize, g.intermediate as usize);
    let (hd, heads, kvh) = (g.head_dim as usize, g.heads as usize, g.kv_heads as usize);
    let mut tensors = Vec::new();
    for l in 0..g.layers as usize {
        let p = format!("model.layers.{l}.");
        let q = get(&format!("{p}self_attn.q_proj.weight"), &[heads * hd, h])?;
        let k = get(&format!("{p}self_attn.k_proj.weight"), &[kvh * hd, h])?;
        let v = get(&format!("{p}self_attn.v_proj.weight"), &[kvh * hd, h])?;
        let mut qkv = interleave_heads(&q, heads, hd, h);
        qkv.extend(interleave_heads(&k, kvh, hd, h));
        qkv.extend(v);
        tensors.push(qkv);
        tensors.push(get(
            &format!("{p}self_attn.o_proj.weight"),
            &[h, heads * hd],
        )?);
        tensors.push(get(&format!("{p}mlp.gate_proj.weight"), &[i, h])?);
        tensors.push(get(&format!("{p}mlp.up_proj.weight"), &[i, h])?);
        tensors.push(get(&format!("{p}mlp.down_proj.weight"), &[h, i])?);
        tensors.push(get(&format!("{p}input_layernorm.weight"), &[h])?);
        tensors.push(get(&format!("{p}post_attention_layernorm.weight"), &[h])?);
    }
    tensors.push(get("model.embed_tokens.weight", &[g.vocab as usize, h])?);
    if !g.tied_embeddings {
        tensors.push(get("lm_head.weight", &[g.vocab as usize, h])?);
    }
    tensors.push(get("model.norm.weight", &[h])?);
    Ok(HostWeights {
        layers: g.layers as usize,
        tied: g.tied_embeddings,
        specs: layout(model),
        tensors,
    })
}
