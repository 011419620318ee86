//! `mkc model`: a model file for a Hugging Face Llama checkpoint nobody has written one for:
//! the geometry its config.json describes (read and refused as `--weights DIR` reads it), the
//! default workload, and the first lowering the kernels accept
//! (`mkc_catalogue::choose_lowering`).

use super::CommandError;
use crate::cli::ModelArgs;

/// Runs `mkc model`.
pub fn run(args: ModelArgs) -> Result<(), CommandError> {
    let geometry = mkc_backend::config_geometry(&args.checkpoint)?;
    let name = args.name.clone().unwrap_or_else(|| {
        args.checkpoint
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "checkpoint".into())
    });
    let model =
        mkc_catalogue::choose_lowering(&name, &geometry, &mkc_ir::model::Workload::default())
            .map_err(|e| {
                CommandError::Input(format!("checkpoint {}: {e}", args.checkpoint.display()))
            })?;
    let body =
        ron::ser::to_string_pretty(&model, ron::ser::PrettyConfig::default().struct_names(true))
            .map_err(|e| CommandError::Internal(format!("cannot write the model as RON: {e}")))?;
    let text = format!(
        "// Written by `mkc model {}`: the geometry of its config.json, the default workload, and\n\
         // the first lowering the kernels accept, in the order measured fastest on the H200.\n{body}\n",
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
