//! A checkpoint read tensor by tensor: its safetensors files memory-mapped, every tensor the
//! model needs checked by name, dtype and shape when it is opened, and each built in the
//! runner's layout order when asked for (its values converted to bf16 and checked finite then).
//! A run uploads a checkpoint one tensor at a time, so that one larger than host memory (a
//! 70B's 141 GB on a 128 GiB host) loads; the CPU reference, which needs every weight, builds
//! them all ([`Checkpoint::host_weights`]) where the host holds them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use mkc_ir::Model;
use safetensors::{Dtype, SafeTensors};

use crate::checkpoint::{as_bf16, check_config, err, interleave_heads, pad_columns};
use crate::weights::{layout, HostWeights, LayerTensor, PER_LAYER};
use crate::BackendError;

/// An opened checkpoint: its files mapped and its tensors' names, dtypes and shapes checked.
pub struct Checkpoint {
    dir: PathBuf,
    model: Model,
    files: Vec<PathBuf>,
    maps: Vec<memmap2::Mmap>,
    /// The file holding each tensor.
    owner: BTreeMap<String, usize>,
    /// Each tensor the model needs, with its stored shape ([`expected_shapes`]).
    shapes: BTreeMap<String, Vec<usize>>,
    /// The stored types rounded to bf16 so far (for the note).
    rounded: Mutex<BTreeSet<&'static str>>,
}

impl Checkpoint {
    /// Opens `dir` for `model`: its config.json checked against the model, every
    /// `*.safetensors` file mapped, each tensor in one file only, none the model does not
    /// compute with, every one it needs present with its dtype and shape, and a tied head the
    /// same table as the embedding. Values are read later, tensor by tensor.
    pub fn open(dir: &Path, model: &Model) -> Result<Checkpoint, BackendError> {
        check_config(dir, model)?;
        let files = safetensors_files(dir)?;
        let maps = files
            .iter()
            .map(|f| {
                if !std::fs::metadata(f).is_ok_and(|m| m.is_file()) {
                    return Err(err(dir, format!("{} is not a regular file", f.display())));
                }
                let file = std::fs::File::open(f)
                    .map_err(|e| err(dir, format!("{}: {e}", f.display())))?;
                // SAFETY: the map is read-only and lives as long as the checkpoint; mkc never
                // writes these files, and one changed underneath a run is the user's to avoid,
                // as for any reader of a checkpoint.
                unsafe { memmap2::Mmap::map(&file) }
                    .map_err(|e| err(dir, format!("{}: {e}", f.display())))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut c = Checkpoint {
            dir: dir.to_path_buf(),
            model: model.clone(),
            files,
            maps,
            owner: BTreeMap::new(),
            shapes: expected_shapes(model).into_iter().collect(),
            rounded: Mutex::new(BTreeSet::new()),
        };
        c.index()?;
        if model.geometry.tied_embeddings && c.owner.contains_key("lm_head.weight") {
            // A tied checkpoint may store the head too; it is honoured only as the same table.
            let embed = c.get("model.embed_tokens.weight")?;
            let head = c.checked(
                "lm_head.weight",
                &c.shapes["model.embed_tokens.weight"],
                |d, b| c.bf16("lm_head.weight", d, b),
            )?;
            if head != embed {
                return Err(err(
                    dir,
                    "`lm_head.weight` differs from `model.embed_tokens.weight`, but \
                     tie_word_embeddings is true, so the head would be ignored. Fix: set \
                     tie_word_embeddings to false (and tied_embeddings in the model file), or \
                     drop lm_head.weight",
                ));
            }
        }
        Ok(c)
    }

    /// File `i` parsed (its header, each time: the map is the data).
    fn parsed(&self, i: usize) -> Result<SafeTensors<'_>, BackendError> {
        SafeTensors::deserialize(&self.maps[i])
            .map_err(|e| err(&self.dir, format!("{}: {e}", self.files[i].display())))
    }

    /// Which file holds each tensor (each in one only), no tensor the model does not compute
    /// with, and every one it needs present with its dtype and shape.
    fn index(&mut self) -> Result<(), BackendError> {
        let dir = &self.dir;
        for i in 0..self.maps.len() {
            let names: Vec<String> = self
                .parsed(i)?
                .names()
                .into_iter()
                .map(String::from)
                .collect();
            for name in names {
                if let Some(&first) = self.owner.get(&name) {
                    return Err(err(
                        dir,
                        format!(
                            "tensor `{}` is in both {} and {}. Fix: keep one copy",
                            mkc_ir::error::shorten(&name),
                            self.files[first].display(),
                            self.files[i].display()
                        ),
                    ));
                }
                self.owner.insert(name, i);
            }
        }
        let tied = self.model.geometry.tied_embeddings;
        let extra: Vec<&String> = self
            .owner
            .keys()
            .filter(|n| !self.shapes.contains_key(*n))
            .filter(|n| !(tied && n.as_str() == "lm_head.weight"))
            .collect();
        if !extra.is_empty() {
            let shown: Vec<String> = extra
                .iter()
                .take(5)
                .map(|n| format!("`{}`", mkc_ir::error::shorten(n)))
                .collect();
            return Err(err(
                dir,
                format!(
                    "{} tensor(s) mkc does not compute with, e.g. {}: a bias, a layer or a head \
                     the model file does not have. Fix: use a model file and checkpoint of the \
                     same architecture",
                    extra.len(),
                    shown.join(", ")
                ),
            ));
        }
        // In layout order, so that the first tensor refused is the first the model reads.
        for (name, shape) in expected_shapes(&self.model) {
            self.checked(&name, &shape, |_, _| Ok(()))?;
        }
        Ok(())
    }

    /// Runs `f` on tensor `name`'s stored type and bytes once it is found, of a type mkc
    /// reads and of `shape`.
    fn checked<R>(
        &self,
        name: &str,
        shape: &[usize],
        f: impl FnOnce(Dtype, &[u8]) -> Result<R, BackendError>,
    ) -> Result<R, BackendError> {
        let dir = &self.dir;
        let file = *self
            .owner
            .get(name)
            .ok_or_else(|| err(dir, format!("tensor `{name}` is missing")))?;
        let st = self.parsed(file)?;
        let t = st
            .tensor(name)
            .map_err(|_| err(dir, format!("tensor `{name}` is missing")))?;
        if !matches!(t.dtype(), Dtype::BF16 | Dtype::F16 | Dtype::F32) {
            return Err(err(
                dir,
                format!(
                    "tensor `{name}` is {:?}; mkc reads bf16, or f16 and f32 rounded to bf16. \
                     Fix: save the checkpoint in bf16",
                    t.dtype()
                ),
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
        f(t.dtype(), t.data())
    }

    /// Tensor `name`, one the model needs, of its stored shape, in bf16 (f16 and f32 rounded),
    /// every value finite.
    fn get(&self, name: &str) -> Result<Vec<u16>, BackendError> {
        let shape = self.shapes.get(name).ok_or_else(|| {
            err(
                &self.dir,
                format!("tensor `{name}` is not one the model reads"),
            )
        })?;
        self.checked(name, shape, |dtype, bytes| self.bf16(name, dtype, bytes))
    }

    /// Tensor `name`'s stored `bytes` of `dtype` in bf16 (f16 and f32 rounded, noted), every
    /// value finite.
    fn bf16(&self, name: &str, dtype: Dtype, bytes: &[u8]) -> Result<Vec<u16>, BackendError> {
        let stored_as = match dtype {
            Dtype::F16 => "f16",
            Dtype::F32 => "f32",
            _ => "bf16",
        };
        let range = if stored_as == "f32" {
            " (or a value beyond bf16's range)"
        } else {
            ""
        };
        let data = as_bf16(dtype, bytes).map_err(|(i, bits)| {
            let what =
                format!("a NaN or infinity{range} at element {i} ({stored_as} bits 0x{bits})");
            err(
                &self.dir,
                format!("tensor `{name}` holds {what}. Fix: repair or re-export the checkpoint"),
            )
        })?;
        if stored_as != "bf16" {
            self.rounded
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(stored_as);
        }
        Ok(data)
    }

    /// How many tensors the model's layout has ([`crate::weights::layout`]).
    pub fn tensor_count(&self) -> usize {
        layout(&self.model).len()
    }

    /// The layout's tensor `i` ([`crate::weights::layout`] order: each layer's QKV (q and k
    /// rows interleaved for RoPE, heads zero-padded to the model's width), O (its columns
    /// padded alike), gate and up (rows padded to the model's MLP width), down (columns
    /// padded), the two norms; then the embedding, the head where untied, the final norm).
    pub fn tensor(&self, i: usize) -> Result<Vec<u16>, BackendError> {
        let g = &self.model.geometry;
        let (h, inter) = (g.hidden as usize, g.intermediate as usize);
        let stored = g.stored_intermediate() as usize;
        let (hd, heads, kvh) = (g.head_dim as usize, g.heads as usize, g.kv_heads as usize);
        let shd = g.stored_head_dim() as usize;
        let pad_heads = |rows: Vec<u16>| pad_columns(&rows, shd * h, hd * h);
        let layers = g.layers as usize;
        if i >= layers * PER_LAYER {
            return match (i - layers * PER_LAYER, g.tied_embeddings) {
                (0, _) => self.get("model.embed_tokens.weight"),
                (1, false) => self.get("lm_head.weight"),
                _ => self.get("model.norm.weight"),
            };
        }
        let p = format!("model.layers.{}.", i / PER_LAYER);
        let get = |t: &str| self.get(&format!("{p}{t}"));
        Ok(match LayerTensor::ALL[i % PER_LAYER] {
            LayerTensor::Qkv => {
                let mut qkv = pad_heads(interleave_heads(
                    &get("self_attn.q_proj.weight")?,
                    heads,
                    shd,
                    h,
                ));
                qkv.extend(pad_heads(interleave_heads(
                    &get("self_attn.k_proj.weight")?,
                    kvh,
                    shd,
                    h,
                )));
                qkv.extend(pad_heads(get("self_attn.v_proj.weight")?));
                qkv
            }
            LayerTensor::O => pad_columns(&get("self_attn.o_proj.weight")?, shd, hd),
            t @ (LayerTensor::Gate | LayerTensor::Up) => {
                let which = if t == LayerTensor::Gate {
                    "gate_proj"
                } else {
                    "up_proj"
                };
                let mut rows = get(&format!("mlp.{which}.weight"))?;
                rows.resize(inter * h, 0);
                rows
            }
            LayerTensor::Down => pad_columns(&get("mlp.down_proj.weight")?, stored, inter),
            LayerTensor::Norm1 => get("input_layernorm.weight")?,
            LayerTensor::Norm2 => get("post_attention_layernorm.weight")?,
        })
    }

    /// Every tensor in host memory, for the CPU reference: refused where the host's available
    /// memory cannot hold them (a 70B's are 131 GiB).
    pub fn host_weights(&self) -> Result<HostWeights, BackendError> {
        crate::memory::check_host_fits(
            "the checkpoint's weights in bf16 (for the CPU reference)",
            crate::memory::weight_bytes(&self.model),
            crate::memory::host_available(),
            "run without the check (--no-check: a run uploads the checkpoint tensor by \
             tensor), or on a machine with more memory",
        )
        .map_err(|e| err(&self.dir, e))?;
        let g = &self.model.geometry;
        Ok(HostWeights {
            layers: g.layers as usize,
            tied: g.tied_embeddings,
            specs: layout(&self.model),
            tensors: (0..self.tensor_count())
                .map(|i| self.tensor(i))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Says on stderr which stored types were rounded to bf16 so far, if any.
    pub fn note_rounding(&self) {
        let rounded = self.rounded.lock().unwrap_or_else(|e| e.into_inner());
        if !rounded.is_empty() {
            eprintln!(
                "note: checkpoint {}: {} weights rounded to bf16, the kernels' type (as \
                 transformers' torch_dtype=bfloat16 loads them)",
                self.dir.display(),
                rounded.iter().copied().collect::<Vec<_>>().join(" and ")
            );
        }
    }
}

/// The `*.safetensors` files of `dir`, sorted; refused where there are none, naming pickled
/// weights where those are what the directory holds.
fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>, BackendError> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| err(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if !files.is_empty() {
        return Ok(files);
    }
    // PyTorch's pickled checkpoints (pytorch_model*.bin, *.pt, *.pth) are not read: a pickle
    // is a program, and transformers converts one to safetensors in two lines.
    let pickled = std::fs::read_dir(dir)
        .map_err(|e| err(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".bin") || n.ends_with(".pt") || n.ends_with(".pth"))
        .min();
    Err(err(
        dir,
        match pickled {
            Some(name) => format!(
                "no *.safetensors files, only PyTorch's pickled weights ({name}), which mkc \
                 does not read. Fix: convert them with transformers: \
                 `AutoModelForCausalLM.from_pretrained(DIR, torch_dtype=\"auto\")\
                 .save_pretrained(DIR, safe_serialization=True)`"
            ),
            None => "no *.safetensors files. Fix: give the checkpoint's directory, which holds \
                     config.json and its model*.safetensors"
                .to_string(),
        },
    ))
}

/// Every tensor a checkpoint of `model` must hold, with its stored shape.
fn expected_shapes(model: &Model) -> Vec<(String, Vec<usize>)> {
    let g = &model.geometry;
    let h = g.hidden as usize;
    let stored = g.stored_intermediate() as usize;
    let (heads, kvh, shd) = (
        g.heads as usize,
        g.kv_heads as usize,
        g.stored_head_dim() as usize,
    );
    let mut out = Vec::new();
    for l in 0..g.layers {
        let p = format!("model.layers.{l}.");
        for (t, shape) in [
            ("self_attn.q_proj.weight", vec![heads * shd, h]),
            ("self_attn.k_proj.weight", vec![kvh * shd, h]),
            ("self_attn.v_proj.weight", vec![kvh * shd, h]),
            ("self_attn.o_proj.weight", vec![h, heads * shd]),
            ("mlp.gate_proj.weight", vec![stored, h]),
            ("mlp.up_proj.weight", vec![stored, h]),
            ("mlp.down_proj.weight", vec![h, stored]),
            ("input_layernorm.weight", vec![h]),
            ("post_attention_layernorm.weight", vec![h]),
        ] {
            out.push((format!("{p}{t}"), shape));
        }
    }
    out.push((
        "model.embed_tokens.weight".into(),
        vec![g.vocab as usize, h],
    ));
    out.push(("model.norm.weight".into(), vec![h]));
    if !g.tied_embeddings {
        out.push(("lm_head.weight".into(), vec![g.vocab as usize, h]));
    }
    out
}
