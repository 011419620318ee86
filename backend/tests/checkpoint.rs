//! The Hugging Face checkpoint loader on checkpoints these tests write themselves: a valid one
//! loads (q/k rows interleaved for mkc's RoPE), and every way a checkpoint could make mkc
//! compute a silently wrong number is refused with the key or tensor named.

use std::path::{Path, PathBuf};

use mkc_backend::weights::{self, bf2f, f2bf, LayerTensor};
use mkc_ir::embedded::resolve_model;
use mkc_ir::Model;
use safetensors::tensor::{serialize_to_file, Dtype, TensorView};
use serde_json::{json, Value};

/// A tensor: name, shape, bf16 little-endian bytes.
type Tensor = (String, Vec<usize>, Vec<u8>);

/// A scratch checkpoint directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("mkc-ckpt-{tag}-{}", std::process::id()));
        std::fs::remove_dir_all(&d).ok();
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// Every tensor of `m`; each element holds its own row index (as bf16), so permutations show.
fn tensors(m: &Model) -> Vec<Tensor> {
    let g = &m.geometry;
    let (h, i, hd) = (
        g.hidden as usize,
        g.stored_intermediate() as usize,
        g.stored_head_dim() as usize,
    );
    let (heads, kvh) = (g.heads as usize, g.kv_heads as usize);
    let rows = |name: String, r: usize, c: usize| -> Tensor {
        let data = (0..r * c)
            .flat_map(|e| f2bf((e / c) as f32).to_le_bytes())
            .collect();
        let shape = if r == 1 { vec![c] } else { vec![r, c] };
        (name, shape, data)
    };
    let mut t = Vec::new();
    for l in 0..g.layers as usize {
        let p = format!("model.layers.{l}.");
        t.push(rows(format!("{p}self_attn.q_proj.weight"), heads * hd, h));
        t.push(rows(format!("{p}self_attn.k_proj.weight"), kvh * hd, h));
        t.push(rows(format!("{p}self_attn.v_proj.weight"), kvh * hd, h));
        t.push(rows(format!("{p}self_attn.o_proj.weight"), h, heads * hd));
        t.push(rows(format!("{p}mlp.gate_proj.weight"), i, h));
        t.push(rows(format!("{p}mlp.up_proj.weight"), i, h));
        t.push(rows(format!("{p}mlp.down_proj.weight"), h, i));
        t.push(rows(format!("{p}input_layernorm.weight"), 1, h));
        t.push(rows(format!("{p}post_attention_layernorm.weight"), 1, h));
    }
    t.push(rows(
        "model.embed_tokens.weight".into(),
        g.vocab as usize,
        h,
    ));
    t.push(rows("model.norm.weight".into(), 1, h));
    t
}

/// config.json of `m` as Hugging Face writes it for Llama.
fn config(m: &Model) -> Value {
    let g = &m.geometry;
    json!({
        "model_type": "llama", "hidden_act": "silu", "hidden_size": g.hidden,
        "intermediate_size": g.stored_intermediate(), "num_hidden_layers": g.layers,
        "num_attention_heads": g.heads, "num_key_value_heads": g.kv_heads,
        "head_dim": g.stored_head_dim(), "vocab_size": g.vocab, "tie_word_embeddings": true,
        "rope_theta": g.rope_theta, "rms_norm_eps": g.norm_eps, "rope_scaling": null,
        "attention_bias": false, "mlp_bias": false,
    })
}

/// Writes `shards` (one safetensors file each) and `config` into `dir`.
fn write(dir: &Path, config: &Value, shards: &[Vec<Tensor>]) {
    write_as(dir, config, shards, Dtype::BF16)
}

/// [`write`] with the tensors' bytes declared as `dtype`.
fn write_as(dir: &Path, config: &Value, shards: &[Vec<Tensor>], dtype: Dtype) {
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    for (n, shard) in shards.iter().enumerate() {
        let views: Vec<(String, TensorView)> = shard
            .iter()
            .map(|(name, shape, data)| {
                (
                    name.clone(),
                    TensorView::new(dtype, shape.clone(), data).unwrap(),
                )
            })
            .collect();
        serialize_to_file(views, None, &dir.join(format!("model-{n}.safetensors"))).unwrap();
    }
}

/// The loader's error for `config` and `shards` (bf16) under the tiny model, which must name
/// every one of `needles`.
fn refused(tag: &str, config: &Value, shards: &[Vec<Tensor>], needles: &[&str]) {
    let m = resolve_model("tiny").unwrap();
    refused_as(&m, tag, config, shards, Dtype::BF16, needles)
}

/// [`refused`] under model `m`, with the tensors' bytes declared as `dtype`.
fn refused_as(
    m: &Model,
    tag: &str,
    config: &Value,
    shards: &[Vec<Tensor>],
    dtype: Dtype,
    needles: &[&str],
) {
    let dir = Dir::new(tag);
    write_as(&dir.0, config, shards, dtype);
    let err = match weights::load_checkpoint(&dir.0, m) {
        Ok(_) => panic!("{tag}: the checkpoint was accepted"),
        Err(e) => e.to_string(),
    };
    for n in needles {
        assert!(err.contains(n), "{tag}: `{n}` not in: {err}");
    }
}

#[test]
fn a_valid_checkpoint_loads_with_q_and_k_rows_interleaved() {
    let m = resolve_model("tiny").unwrap();
    let g = &m.geometry;
    let (h, hd) = (g.hidden as usize, g.head_dim as usize);
    let (heads, kvh) = (g.heads as usize, g.kv_heads as usize);
    let dir = Dir::new("valid");
    let mut t = tensors(&m);
    // Split over two shards, as large checkpoints are.
    let second = t.split_off(t.len() / 2);
    write(&dir.0, &config(&m), &[t, second]);
    let w = weights::load_checkpoint(&dir.0, &m).expect("loads");
    let qkv = w.layer(0, LayerTensor::Qkv);
    let row = |r: usize| bf2f(qkv[r * h]) as usize;
    // Head 0 of q: rows 0, hd/2, 1, hd/2 + 1, ... (rotate-half pairs side by side).
    assert_eq!((row(0), row(1), row(2), row(3)), (0, hd / 2, 1, hd / 2 + 1));
    // k starts after q, with its own interleaving; v is copied as is.
    assert_eq!((row(heads * hd), row(heads * hd + 1)), (0, hd / 2));
    assert_eq!(row((heads + kvh) * hd + 3), 3);
}

/// The CPU reference over `w`, the weights of padded model `m` loaded from `dir`, against the
/// same checkpoint loaded at its own width (`Geometry::as_stored`): finite logits equal bit
/// for bit at each of `tokens` in turn.
fn pads_to_the_checkpoints_logits(m: &Model, w: &weights::HostWeights, dir: &Path, tokens: &[u32]) {
    let mut narrow = m.clone();
    narrow.geometry = m.geometry.as_stored();
    let wn = weights::load_checkpoint(dir, &narrow).expect("loads at its own width");
    let mut padded = mkc_backend::reference::Reference::new(m, w, true);
    let mut own = mkc_backend::reference::Reference::new(&narrow, &wn, true);
    for (pos, &token) in tokens.iter().enumerate() {
        let logits = padded.step(token, pos as u32);
        assert!(logits.iter().all(|x| x.is_finite()), "{logits:?}");
        assert_eq!(logits, own.step(token, pos as u32));
    }
}

/// A model whose heads are wider than its checkpoint's (`geometry.checkpoint_head_dim`) loads
/// each head's q, k and v rows in place (q and k interleaved at the stored width) with zero rows
/// after them, and each head's O-projection columns likewise; the CPU reference over the padded
/// weights computes the checkpoint's logits bit for bit (RoPE's frequencies and the score scale
/// stay the stored width's); a model file of the padded width that does not say so is refused
/// naming the field.
#[test]
fn a_narrower_checkpoint_head_loads_zero_padded() {
    let mut m = resolve_model("tiny").unwrap();
    let (h, hd) = (m.geometry.hidden as usize, m.geometry.head_dim as usize);
    let (heads, kvh) = (m.geometry.heads as usize, m.geometry.kv_heads as usize);
    let stored = hd / 2;
    m.geometry.checkpoint_head_dim = Some(stored as u32);
    m.validate("test").unwrap();
    let dir = Dir::new("head_padded");
    write(&dir.0, &config(&m), &[tensors(&m)]);
    let w = weights::load_checkpoint(&dir.0, &m).expect("loads");
    let qkv = w.layer(1, LayerTensor::Qkv);
    assert_eq!(qkv.len(), (heads + 2 * kvh) * hd * h);
    // Row r of the padded layout holds the marker of the stored row it came from, or zeros.
    let row = |r: usize| &qkv[r * h..(r + 1) * h];
    let marker = |r: usize| bf2f(row(r)[3]) as usize;
    for (block, n) in [(0, heads), (heads, kvh), (heads + kvh, kvh)] {
        for head in 0..n {
            let first = (block + head) * hd;
            let stored_first = head * stored;
            if block == heads + kvh {
                // v: as stored.
                assert_eq!(marker(first + 1), stored_first + 1);
            } else {
                // q, k: rotate-half pairs interleaved at the stored width.
                assert_eq!(
                    (marker(first), marker(first + 1)),
                    (stored_first, stored_first + stored / 2)
                );
            }
            for pad in first + stored..first + hd {
                assert!(row(pad).iter().all(|&b| b == 0), "row {pad}");
            }
        }
    }
    let o = w.layer(1, LayerTensor::O);
    assert_eq!(o.len(), h * heads * hd);
    for r in [0, 5, h - 1] {
        let cols = &o[r * heads * hd..(r + 1) * heads * hd];
        for head in 0..heads {
            let block = &cols[head * hd..(head + 1) * hd];
            assert!(block[..stored].iter().all(|&b| bf2f(b) == r as f32));
            assert!(block[stored..].iter().all(|&b| b == 0));
        }
    }
    // The padded model computes the checkpoint's logits, bit for bit; the narrow heads are a
    // model of their own too.
    let narrow = Model {
        geometry: m.geometry.as_stored(),
        ..m.clone()
    };
    narrow.validate("test").unwrap();
    pads_to_the_checkpoints_logits(&m, &w, &dir.0, &[3, 17, 5, 9]);
    // A model file of the padded width that does not say so: refused, naming the field.
    let mut unsaid = m.clone();
    unsaid.geometry.checkpoint_head_dim = None;
    let field = format!("checkpoint_head_dim: Some({stored})");
    refused_as(
        &unsaid,
        "head_padded_unsaid",
        &config(&m),
        &[tensors(&m)],
        Dtype::BF16,
        &[&field],
    );
}

/// A model whose MLP is wider than its checkpoint's (`geometry.checkpoint_intermediate`) loads
/// the stored rows and columns in place and zeros after them; a checkpoint that stores another
/// width is refused by tensor.
#[test]
fn a_narrower_checkpoint_mlp_loads_zero_padded() {
    let mut m = resolve_model("tiny").unwrap();
    let (h, i) = (m.geometry.hidden as usize, m.geometry.intermediate as usize);
    let stored = i - 24;
    m.geometry.checkpoint_intermediate = Some(stored as u32);
    m.validate("test").unwrap();
    let dir = Dir::new("padded");
    write(&dir.0, &config(&m), &[tensors(&m)]);
    let w = weights::load_checkpoint(&dir.0, &m).expect("loads");
    for t in [LayerTensor::Gate, LayerTensor::Up] {
        let rows = w.layer(1, t);
        assert_eq!(rows.len(), i * h);
        // Row r holds r (the helper's marker) up to the stored width, zeros after.
        assert_eq!(bf2f(rows[(stored - 1) * h + 5]), (stored - 1) as f32);
        assert!(rows[stored * h..].iter().all(|&b| b == 0));
    }
    let down = w.layer(1, LayerTensor::Down);
    assert_eq!(down.len(), h * i);
    for r in [0, 7, h - 1] {
        let row = &down[r * i..(r + 1) * i];
        assert!(row[..stored].iter().all(|&b| bf2f(b) == r as f32));
        assert!(row[stored..].iter().all(|&b| b == 0));
    }
    // The padded model computes the checkpoint's logits.
    pads_to_the_checkpoints_logits(&m, &w, &dir.0, &[3, 17, 5]);
    // A model file of the padded width that does not say so: refused, naming the field.
    let mut unsaid = m.clone();
    unsaid.geometry.checkpoint_intermediate = None;
    let field = format!("checkpoint_intermediate: Some({stored})");
    let c = config(&m);
    refused_as(
        &unsaid,
        "padded_unsaid",
        &c,
        &[tensors(&m)],
        Dtype::BF16,
        &[&field],
    );
    // The same model file over a checkpoint of the full width: refused, config first.
    let mut full = m.clone();
    full.geometry.checkpoint_intermediate = None;
    let full_tensors = [tensors(&full)];
    let bf16 = Dtype::BF16;
    refused_as(
        &m,
        "padded_full",
        &config(&full),
        &full_tensors,
        bf16,
        &["intermediate_size"],
    );
    // A config that matches but tensors of the full width: refused by tensor.
    let needles = ["mlp.gate_proj.weight", "shape"];
    refused_as(&m, "padded_tensors", &c, &full_tensors, bf16, &needles);
}

/// f16 (Llama 2's) and f32 checkpoints load rounded to bf16 to nearest even; an infinity is
/// refused with its tensor, element and bits in the stored type, and an f32 beyond bf16's range
/// as well.
#[test]
fn f16_and_f32_checkpoints_load_rounded_to_bf16() {
    let m = resolve_model("tiny").unwrap();
    let c = config(&m);
    // 1 + 2^-8 + 2^-9: f16 and f32 hold it; bf16's 7 fraction bits round it up to 1 + 2^-7.
    let odd = 1.0f32 + 1.0 / 256.0 + 1.0 / 512.0;
    for dtype in [Dtype::F16, Dtype::F32] {
        let bytes = |v: f32| -> Vec<u8> {
            match dtype {
                Dtype::F16 => half::f16::from_f32(v).to_bits().to_le_bytes().to_vec(),
                _ => v.to_le_bytes().to_vec(),
            }
        };
        let t: Vec<Tensor> = tensors(&m)
            .iter()
            .map(|(name, shape, data)| {
                let v = if name.contains("norm") { odd } else { 0.5 };
                let n = data.len() / 2;
                (
                    name.clone(),
                    shape.clone(),
                    (0..n).flat_map(|_| bytes(v)).collect(),
                )
            })
            .collect();
        let dir = Dir::new(&format!("{dtype:?}"));
        write_as(&dir.0, &c, std::slice::from_ref(&t), dtype);
        let w = weights::load_checkpoint(&dir.0, &m).expect("loads rounded to bf16");
        assert_eq!(bf2f(w.layer(0, LayerTensor::Gate)[3]), 0.5);
        assert_eq!(bf2f(w.layer(0, LayerTensor::Norm1)[1]), 1.0 + 1.0 / 128.0);
        let inf = bytes(f32::INFINITY);
        let bits = match dtype {
            Dtype::F16 => "f16 bits 0x7c00",
            _ => "f32 bits 0x7f800000",
        };
        // `t` with element `at` of the final norm's weights set to `value`'s bytes.
        let with_norm = |at: usize, value: &[u8]| {
            let mut bad = t.clone();
            let norm = bad.iter_mut().find(|x| x.0 == "model.norm.weight").unwrap();
            norm.2[at * value.len()..(at + 1) * value.len()].copy_from_slice(value);
            [bad]
        };
        let tag = format!("{dtype:?}_inf");
        let needles = ["model.norm.weight", "element 2", bits];
        refused_as(&m, &tag, &c, &with_norm(2, &inf), dtype, &needles);
        if dtype == Dtype::F32 {
            // Finite in f32, beyond bf16: refused, not turned into an infinity.
            let big = with_norm(1, &f32::MAX.to_le_bytes());
            let needles = ["beyond bf16's range", "element 1"];
            refused_as(&m, "f32_big", &c, &big, dtype, &needles);
        }
    }
}

/// Llama 3's RoPE scaling is honoured when the model file declares the same parameters, and
/// refused by key when they differ.
#[test]
fn llama3_rope_scaling_loads_when_the_model_file_declares_it() {
    let mut m = resolve_model("tiny").unwrap();
    m.geometry.rope_scaling = Some(mkc_ir::model::RopeScaling {
        rope_type: mkc_ir::model::RopeType::Llama3,
        factor: 32.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
        ..Default::default()
    });
    let dir = Dir::new("llama3_rope");
    let mut c = config(&m);
    c.as_object_mut().unwrap().remove("rope_scaling");
    c.as_object_mut().unwrap().remove("rope_theta");
    c["rope_parameters"] = json!({"rope_theta": m.geometry.rope_theta, "rope_type": "llama3",
        "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192});
    write(&dir.0, &c, &[tensors(&m)]);
    weights::load_checkpoint(&dir.0, &m).expect("the declared scaling loads");
    c["rope_parameters"]["factor"] = json!(8.0);
    let bf16 = Dtype::BF16;
    let needles = ["rope_parameters.factor = 8", "model file: 32"];
    refused_as(&m, "llama3_factor", &c, &[tensors(&m)], bf16, &needles);
    // The model file declares scaling, the checkpoint has none.
    let plain = config(&m);
    write(&dir.0, &plain, &[tensors(&m)]);
    let Err(err) = weights::load_checkpoint(&dir.0, &m) else {
        panic!("accepted")
    };
    let err = err.to_string();
    assert!(err.contains("geometry.rope_scaling"), "{err}");
}

/// Linear RoPE scaling (long-context Llama 2 fine-tunes) loads when the model file declares
/// the same factor, and is refused, naming both, when the factor or the kind differs; its
/// config reads back as the geometry `mkc model` writes.
#[test]
fn linear_rope_scaling_loads_when_the_model_file_declares_it() {
    let mut m = resolve_model("tiny").unwrap();
    let linear = mkc_ir::model::RopeScaling {
        rope_type: mkc_ir::model::RopeType::Linear,
        factor: 4.0,
        ..Default::default()
    };
    m.geometry.rope_scaling = Some(linear.clone());
    m.validate("linear").unwrap();
    let dir = Dir::new("linear_rope");
    let mut c = config(&m);
    c["rope_scaling"] = json!({"type": "linear", "factor": 4.0});
    write(&dir.0, &c, &[tensors(&m)]);
    weights::load_checkpoint(&dir.0, &m).expect("the declared scaling loads");
    let shape = mkc_backend::config_shape(&dir.0).unwrap();
    assert_eq!(shape.geometry.rope_scaling, Some(linear));
    c["rope_scaling"]["factor"] = json!(2.0);
    let needles = ["rope_scaling.factor = 2", "model file: 4"];
    refused_as(
        &m,
        "linear_factor",
        &c,
        &[tensors(&m)],
        Dtype::BF16,
        &needles,
    );
    c["rope_scaling"] = json!({"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
    let needles = ["\"llama3\"", "\"linear\""];
    refused_as(&m, "linear_kind", &c, &[tensors(&m)], Dtype::BF16, &needles);
}

/// YaRN (long-context Llama fine-tunes): config.json's block reads back as the scaling `mkc
/// model` writes (optional fields kept as given, an attention factor folded from `mscale` and
/// `mscale_all_dim`, the original context from the top level, else the block, else
/// `max_position_embeddings`); it loads where the model file declares the same values
/// resolved (a left-out beta is transformers' default), and is refused by key where one
/// differs; a partial rotary factor is refused.
#[test]
fn yarn_rope_scaling_loads_when_the_model_file_declares_it() {
    let mut m = resolve_model("tiny").unwrap();
    let dir = Dir::new("yarn_rope");
    let mut c = config(&m);
    c["max_position_embeddings"] = json!(8192);
    c["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 2048});
    write(&dir.0, &c, &[tensors(&m)]);
    let yarn = mkc_backend::config_shape(&dir.0)
        .unwrap()
        .geometry
        .rope_scaling
        .expect("YaRN");
    assert_eq!(yarn.rope_type, mkc_ir::model::RopeType::Yarn);
    assert_eq!(
        (yarn.factor, yarn.original_max_position_embeddings),
        (4.0, 2048)
    );
    assert_eq!(
        (yarn.beta_fast, yarn.attention_factor, yarn.truncate),
        (None, None, None)
    );
    // The declared scaling with the defaults written out is the same scaling.
    m.geometry.rope_scaling = Some(mkc_ir::model::RopeScaling {
        beta_fast: Some(32.0),
        beta_slow: Some(1.0),
        truncate: Some(true),
        ..yarn.clone()
    });
    m.validate("yarn").unwrap();
    weights::load_checkpoint(&dir.0, &m).expect("the declared scaling loads");
    c["rope_scaling"]["beta_fast"] = json!(16.0);
    let needles = ["rope_scaling.beta_fast = 16", "model file: 32"];
    refused_as(&m, "yarn_beta", &c, &[tensors(&m)], Dtype::BF16, &needles);
    // mscale over mscale_all_dim, DeepSeek-style, and the context from max_position_embeddings.
    let read_back = |c: &Value| {
        write(&dir.0, c, &[tensors(&m)]);
        mkc_backend::config_shape(&dir.0).map(|shape| shape.geometry.rope_scaling.unwrap())
    };
    c["rope_scaling"] = json!({"type": "yarn", "factor": 8.0, "mscale": 0.707,
        "mscale_all_dim": 1.0});
    let s = read_back(&c).unwrap();
    assert_eq!(s.original_max_position_embeddings, 8192);
    let want = (0.1 * 0.707 * 8f64.ln() + 1.0) / (0.1 * 8f64.ln() + 1.0);
    assert!((s.attention_factor.unwrap() - want).abs() < 1e-12);
    c["original_max_position_embeddings"] = json!(4096);
    assert_eq!(
        read_back(&c).unwrap().original_max_position_embeddings,
        4096
    );
    c["rope_scaling"]["partial_rotary_factor"] = json!(0.5);
    let e = read_back(&c).unwrap_err().to_string();
    assert!(
        e.contains("rope_scaling.partial_rotary_factor") && e.contains("Fix"),
        "{e}"
    );
}

/// Dynamic NTK scaling is plain RoPE within the trained context: a checkpoint with it loads
/// where the model file's KV capacity stays within that context, and is refused, naming both,
/// where it passes it.
#[test]
fn dynamic_rope_scaling_loads_within_the_trained_context() {
    let m = resolve_model("tiny").unwrap();
    let capacity = m.workload.max_seq_len;
    let dir = Dir::new("dynamic_rope");
    let mut c = config(&m);
    c["max_position_embeddings"] = json!(capacity);
    c["rope_scaling"] = json!({"type": "dynamic", "factor": 2.0});
    write(&dir.0, &c, &[tensors(&m)]);
    weights::load_checkpoint(&dir.0, &m).expect("plain RoPE within the context");
    c["rope_scaling"] = json!({"rope_type": "dynamic", "factor": 2.0,
        "original_max_position_embeddings": capacity - 1});
    write(&dir.0, &c, &[tensors(&m)]);
    let e = weights::load_checkpoint(&dir.0, &m)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dynamically") && e.contains(&format!("{}", capacity - 1)),
        "{e}"
    );
    // The model `mkc model` writes for it keeps its KV capacity within that context.
    let shape = mkc_backend::config_shape(&dir.0).unwrap();
    assert_eq!(shape.context, Some(capacity - 1));
    assert_eq!(shape.geometry.rope_scaling, None);
}

#[test]
fn newer_configs_with_rope_parameters_load() {
    let m = resolve_model("tiny").unwrap();
    let dir = Dir::new("rope_parameters");
    let mut c = config(&m);
    c.as_object_mut().unwrap().remove("rope_theta");
    c.as_object_mut().unwrap().remove("rope_scaling");
    c["rope_parameters"] = json!({"rope_theta": m.geometry.rope_theta, "rope_type": "default"});
    write(&dir.0, &c, &[tensors(&m)]);
    weights::load_checkpoint(&dir.0, &m).expect("plain RoPE under rope_parameters loads");
}

#[test]
fn config_values_mkc_would_not_honour_are_refused_by_key() {
    let m = resolve_model("tiny").unwrap();
    let t = vec![tensors(&m)];
    let with = |key: &str, v: Value| {
        let mut c = config(&m);
        c[key] = v;
        c
    };
    let llama3 = json!({"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "scaling",
            with("rope_scaling", llama3),
            vec!["rope_scaling", "llama3"],
        ),
        (
            "theta",
            with("rope_theta", json!(500000.0)),
            vec!["rope_theta", "geometry.rope_theta"],
        ),
        (
            "eps",
            with("rms_norm_eps", json!(1e-6)),
            vec!["rms_norm_eps", "geometry.norm_eps"],
        ),
        (
            "act",
            with("hidden_act", json!("gelu")),
            vec!["hidden_act", "gelu"],
        ),
        (
            "type",
            with("model_type", json!("qwen2")),
            vec!["model_type", "qwen2"],
        ),
        (
            "attn_bias",
            with("attention_bias", json!(true)),
            vec!["attention_bias"],
        ),
        ("mlp_bias", with("mlp_bias", json!(true)), vec!["mlp_bias"]),
        (
            "string",
            with("hidden_size", json!("64")),
            vec!["hidden_size", "\"64\"", "not a whole number"],
        ),
        (
            "float",
            with("hidden_size", json!(64.0)),
            vec!["hidden_size", "64.0", "not a whole number"],
        ),
        (
            "layers",
            with("num_hidden_layers", json!(3)),
            vec!["num_hidden_layers = 3"],
        ),
        (
            "tied",
            with("tie_word_embeddings", json!(false)),
            vec!["tie_word_embeddings"],
        ),
    ];
    for (tag, c, needles) in &cases {
        refused(tag, c, &t, needles);
    }
    // Newer transformers: RoPE under rope_parameters, plain or scaled.
    let mut c = config(&m);
    c.as_object_mut().unwrap().remove("rope_theta");
    c.as_object_mut().unwrap().remove("rope_scaling");
    c["rope_parameters"] = json!({"rope_theta": 500000.0, "rope_type": "default"});
    refused(
        "params_theta",
        &c,
        &t,
        &["rope_theta = 5e5", "geometry.rope_theta"],
    );
    c["rope_parameters"] = json!({"rope_theta": 10000.0, "rope_type": "llama3", "factor": 32.0});
    refused("params_llama3", &c, &t, &["rope_parameters", "llama3"]);
    c["rope_parameters"] = json!({"rope_theta": 10000.0, "rope_type": "default"});
    c["rope_theta"] = json!(500000.0);
    refused("params_disagree", &c, &t, &["disagree"]);
    // No head count and no head_dim: head_dim cannot be derived (it divided by zero once).
    let mut c = with("num_attention_heads", json!(0));
    c.as_object_mut().unwrap().remove("head_dim");
    refused("zero_heads", &c, &t, &["num_attention_heads", "is 0"]);
    let mut c = config(&m);
    c.as_object_mut().unwrap().remove("model_type");
    refused("no_type", &c, &t, &["model_type", "missing"]);
}

/// A directory without safetensors is refused with the fix: PyTorch's pickled weights are named
/// and the conversion given; an empty one names what it should hold.
#[test]
fn a_checkpoint_without_safetensors_names_the_fix() {
    let m = resolve_model("tiny").unwrap();
    let dir = Dir::new("pickled");
    std::fs::write(dir.0.join("config.json"), config(&m).to_string()).unwrap();
    let e = weights::load_checkpoint(&dir.0, &m)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no *.safetensors") && e.contains("Fix:"), "{e}");
    std::fs::write(dir.0.join("pytorch_model.bin"), b"not read").unwrap();
    let e = weights::load_checkpoint(&dir.0, &m)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pytorch_model.bin") && e.contains("safe_serialization=True"),
        "{e}"
    );
}

#[test]
fn tensors_mkc_would_drop_or_misread_are_refused_by_name() {
    let m = resolve_model("tiny").unwrap();
    let c = config(&m);
    let h = m.geometry.hidden as usize;
    let bias = (
        "model.layers.0.self_attn.q_proj.bias".to_string(),
        vec![h],
        vec![0u8; 2 * h],
    );
    let mut t = tensors(&m);
    t.push(bias);
    refused("bias", &c, &[t], &["q_proj.bias"]);

    let mut t = tensors(&m);
    let mut extra_layer: Vec<Tensor> = t
        .iter()
        .filter(|(n, _, _)| n.starts_with("model.layers.0."))
        .map(|(n, s, d)| (n.replace("layers.0.", "layers.9."), s.clone(), d.clone()))
        .collect();
    t.append(&mut extra_layer);
    refused("layer", &c, &[t], &["model.layers.9."]);

    // A tied checkpoint that also stores a different head.
    let mut t = tensors(&m);
    let embed = t
        .iter()
        .find(|x| x.0 == "model.embed_tokens.weight")
        .unwrap()
        .clone();
    let mut head = embed.clone();
    head.0 = "lm_head.weight".into();
    head.2[0] ^= 1;
    t.push(head);
    refused("head", &c, &[t], &["lm_head.weight", "tie_word_embeddings"]);
    // The same head, bit for bit, is the tie itself and loads.
    let mut t = tensors(&m);
    let mut same = embed;
    same.0 = "lm_head.weight".into();
    t.push(same);
    let dir = Dir::new("same_head");
    write(&dir.0, &c, &[t]);
    weights::load_checkpoint(&dir.0, &m).expect("an identical tied head loads");

    // One tensor in two shards.
    let t = tensors(&m);
    let dup = vec![t[0].clone()];
    refused("dup", &c, &[t, dup], &["in both", "q_proj.weight"]);

    // NaN and infinity.
    for (tag, bits) in [("nan", 0x7FC0u16), ("inf", 0xFF80u16)] {
        let mut t = tensors(&m);
        let norm = t.iter_mut().find(|x| x.0 == "model.norm.weight").unwrap();
        norm.2[6..8].copy_from_slice(&bits.to_le_bytes());
        refused(
            tag,
            &c,
            &[t],
            &["model.norm.weight", "NaN or infinity", "element 3"],
        );
    }
}

/// `config_shape` (what `mkc model` writes a model file from) reads a config.json back into the
/// geometry it was written from, Llama 3's RoPE scaling included, and names a missing key.
#[test]
fn config_shape_reads_back_the_geometry_a_config_describes() {
    let dir = Dir::new("geometry");
    let m = resolve_model("llama1b").unwrap();
    std::fs::write(dir.0.join("config.json"), config(&m).to_string()).unwrap();
    let shape = mkc_backend::config_shape(&dir.0).unwrap();
    assert_eq!((shape.geometry, shape.context), (m.geometry.clone(), None));
    let mut scaled = m.clone();
    scaled.geometry.rope_scaling = Some(mkc_ir::model::RopeScaling {
        rope_type: mkc_ir::model::RopeType::Llama3,
        factor: 32.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
        ..Default::default()
    });
    let mut c = config(&scaled);
    c["rope_scaling"] = json!({"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
    std::fs::write(dir.0.join("config.json"), c.to_string()).unwrap();
    c["max_position_embeddings"] = json!(131072);
    std::fs::write(dir.0.join("config.json"), c.to_string()).unwrap();
    let shape = mkc_backend::config_shape(&dir.0).unwrap();
    assert_eq!(
        (shape.geometry, shape.context),
        (scaled.geometry, Some(131072))
    );
    // Hugging Face's defaults where a key may be absent; an error naming a size that may not.
    c.as_object_mut().unwrap().remove("rope_scaling");
    c.as_object_mut().unwrap().remove("num_key_value_heads");
    c.as_object_mut().unwrap().remove("head_dim");
    std::fs::write(dir.0.join("config.json"), c.to_string()).unwrap();
    let g = mkc_backend::config_shape(&dir.0).unwrap().geometry;
    assert_eq!((g.kv_heads, g.head_dim), (g.heads, g.hidden / g.heads));
    c.as_object_mut().unwrap().remove("intermediate_size");
    std::fs::write(dir.0.join("config.json"), c.to_string()).unwrap();
    let err = mkc_backend::config_shape(&dir.0).unwrap_err().to_string();
    assert!(
        err.contains("`intermediate_size` is missing") && err.contains("Fix"),
        "{err}"
    );
}

/// A Mistral checkpoint is Llama's decoder with a sliding attention window: it loads as a
/// Llama one while no run goes past its window, which bounds the context `mkc model` reads, and
/// a model file whose KV capacity goes past the window is refused by key with the fix.
#[test]
fn mistral_checkpoints_load_within_their_sliding_window() {
    let m = resolve_model("tiny").unwrap();
    let dir = Dir::new("mistral");
    let mut c = config(&m);
    c["model_type"] = json!("mistral");
    c["sliding_window"] = json!(null);
    write(&dir.0, &c, &[tensors(&m)]);
    weights::load_checkpoint(&dir.0, &m).expect("a Mistral checkpoint without a window loads");
    // A window at least the model file's KV capacity changes nothing mkc computes.
    c["sliding_window"] = json!(m.workload.max_seq_len);
    write(&dir.0, &c, &[tensors(&m)]);
    weights::load_checkpoint(&dir.0, &m).expect("a window past every position loads");
    c["sliding_window"] = json!(m.workload.max_seq_len - 1);
    refused(
        "mistral_window",
        &c,
        &[tensors(&m)],
        &["sliding_window", "workload.max_seq_len", "Fix"],
    );
    // The context config_shape reads: the trained positions, at most the window.
    c["max_position_embeddings"] = json!(32768);
    c["sliding_window"] = json!(4096);
    std::fs::write(dir.0.join("config.json"), c.to_string()).unwrap();
    assert_eq!(
        mkc_backend::config_shape(&dir.0).unwrap().context,
        Some(4096)
    );
    c["sliding_window"] = json!(null);
    std::fs::write(dir.0.join("config.json"), c.to_string()).unwrap();
    assert_eq!(
        mkc_backend::config_shape(&dir.0).unwrap().context,
        Some(32768)
    );
}

/// A checkpoint is read tensor by tensor, as a run uploads it: opening it checks every tensor's
/// name, dtype and shape (a wrong shape is refused before any value is read), each tensor of the
/// layout comes out as the whole load's, and a bad value is refused, naming its tensor, when
/// that tensor is read.
#[test]
fn a_checkpoint_reads_tensor_by_tensor_as_the_whole_load() {
    use mkc_backend::checkpoint_reader::Checkpoint;
    let m = resolve_model("tiny").unwrap();
    let c = config(&m);
    let dir = Dir::new("streamed");
    let mut t = tensors(&m);
    let second = t.split_off(t.len() / 3);
    write(&dir.0, &c, &[t, second]);
    let whole = weights::load_checkpoint(&dir.0, &m).expect("loads");
    let ckpt = Checkpoint::open(&dir.0, &m).expect("opens");
    assert_eq!(ckpt.tensor_count(), whole.tensors.len());
    for (i, w) in whole.tensors.iter().enumerate() {
        assert_eq!(&ckpt.tensor(i).unwrap(), w, "tensor {i}");
        assert_eq!(
            w.len() as u64,
            whole.specs[i].len(),
            "tensor {i}'s layout size"
        );
    }
    // A NaN in the final norm: the checkpoint opens, the norm's tensor is refused by name.
    let mut t = tensors(&m);
    let norm = t.iter_mut().find(|x| x.0 == "model.norm.weight").unwrap();
    norm.2[0..2].copy_from_slice(&0x7FC0u16.to_le_bytes());
    let dir = Dir::new("streamed_nan");
    write(&dir.0, &c, &[t]);
    let ckpt = Checkpoint::open(&dir.0, &m).expect("values are read later");
    assert!(ckpt.tensor(0).is_ok());
    let last = ckpt.tensor_count() - 1;
    let e = ckpt.tensor(last).unwrap_err().to_string();
    assert!(e.contains("model.norm.weight") && e.contains("NaN"), "{e}");
    // A wrong shape is refused on opening.
    let mut t = tensors(&m);
    let up = t
        .iter_mut()
        .find(|x| x.0.ends_with("1.mlp.up_proj.weight"))
        .unwrap();
    up.1.swap(0, 1);
    let dir = Dir::new("streamed_shape");
    write(&dir.0, &c, &[t]);
    let e = Checkpoint::open(&dir.0, &m)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("up_proj.weight") && e.contains("shape"), "{e}");
}
