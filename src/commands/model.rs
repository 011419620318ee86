//! `mkc model`: a model file for a Hugging Face Llama-family checkpoint nobody has written one
//! for: the geometry its config.json describes (read and refused as `--weights DIR` reads it),
//! the default workload with its KV capacity at most the checkpoint's context (its trained
//! positions, at most its sliding window), and the
//! first lowering the kernels accept (`mkc_catalogue::choose_lowering`).

use super::CommandError;
use crate::cli::ModelArgs;

/// The model `mkc model` writes for checkpoint `dir` (named `name`, else after the directory).
pub fn from_checkpoint(
    dir: &std::path::Path,
    name: Option<&str>,
) -> Result<mkc_ir::Model, CommandError> {
    let shape = mkc_backend::config_shape(dir)?;
    let workload = mkc_ir::model::Workload::within_context(shape.context);
    if workload.prompt_len == 0 || workload.generate == 0 {
        return Err(CommandError::Input(format!(
            "checkpoint {}: config.json: its context (`max_position_embeddings`, or a shorter \
             `sliding_window`) is {}, no room for a prompt and a generated token. Fix: give the \
             checkpoint's trained context and window",
            dir.display(),
            workload.max_seq_len
        )));
    }
    let name = name.map(str::to_string).unwrap_or_else(|| {
        dir.canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "checkpoint".into())
    });
    mkc_catalogue::choose_lowering(&name, &shape.geometry, &workload)
        .map_err(|e| CommandError::Input(format!("checkpoint {}: {e}", dir.display())))
}

/// Runs `mkc model`.
pub fn run(args: ModelArgs) -> Result<(), CommandError> {
    let model = from_checkpoint(&args.checkpoint, args.name.as_deref())?;
    if let Some(stored) = model.geometry.checkpoint_intermediate {
        eprintln!(
            "note: no lowering tiles the checkpoint's MLP width {stored}; the model file pads it \
             with zeros to {} (geometry.checkpoint_intermediate), which leaves the logits as \
             they are and streams {:.1}% more MLP bytes",
            model.geometry.intermediate,
            100.0 * (model.geometry.intermediate - stored) as f64 / stored as f64
        );
    }
    if let Some(stored) = model.geometry.checkpoint_head_dim {
        eprintln!(
            "note: the checkpoint's head width {stored} is not a multiple of 8, which the kernels \
             read rows in; the model file pads each head with zeros to {} \
             (geometry.checkpoint_head_dim), which leaves the logits as they are and streams \
             {:.1}% more attention bytes",
            model.geometry.head_dim,
            100.0 * (model.geometry.head_dim - stored) as f64 / stored as f64
        );
    }
    let body =
        ron::ser::to_string_pretty(&model, ron::ser::PrettyConfig::default().struct_names(true))
            .map_err(|e| CommandError::Internal(format!("cannot write the model as RON: {e}")))?;
    let text = format!(
        "// Written by `mkc model {}`: the geometry of its config.json, the default workload (its\n\
         // KV capacity at most the trained context), and the first lowering the kernels accept,\n\
         // in the order measured fastest on the H200.\n{body}\n",
        args.checkpoint.display()
    );
    // What is written must read back as the model it describes.
    let back = mkc_ir::Model::parse("mkc model's output", &text)?;
    if back != model {
        return Err(CommandError::Internal(
            "the model file does not read back as the model written (a bug in mkc)".into(),
        ));
    }
    match &args.output {
        Some(path) => mkc_ir::input::write_output(path, text).map_err(|e| {
            CommandError::Input(format!(
                "cannot write `{}`: {e}. Fix: choose a writable path for -o.",
                path.display()
            ))
        })?,
        None => out!("{text}"),
    }
    Ok(())
}
