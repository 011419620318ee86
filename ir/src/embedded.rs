//! Model files and device profiles compiled into the binary, so that mkc runs its main job
//! with no files at hand. A command-line argument names either a file or an embedded entry.

use crate::device::DeviceProfile;
use crate::error::InputError;
use crate::model::Model;

/// Embedded model files: (name, RON text).
pub const MODELS: &[(&str, &str)] = &[
    ("llama1b", include_str!("../../models/llama1b.ron")),
    ("llama3b", include_str!("../../models/llama3b.ron")),
    ("llama8b", include_str!("../../models/llama8b.ron")),
    ("tiny", include_str!("../../models/tiny.ron")),
];

/// Embedded device profiles: (name, RON text).
pub const DEVICES: &[(&str, &str)] = &[
    ("h200", include_str!("../../devices/h200.ron")),
    ("h100", include_str!("../../devices/h100.ron")),
    ("a100", include_str!("../../devices/a100.ron")),
    ("b200", include_str!("../../devices/b200.ron")),
];

/// The model used when none is named.
pub const DEFAULT_MODEL: &str = "llama1b";

/// Loads `arg` as a model file path if such a file exists, else as an embedded model name.
pub fn resolve_model(arg: &str) -> Result<Model, InputError> {
    resolve_model_named(arg).map(|(model, _)| model)
}

/// [`resolve_model`], also returning how errors name the model file (its path, or
/// `<embedded NAME>`).
pub fn resolve_model_named(arg: &str) -> Result<(Model, String), InputError> {
    let path = std::path::Path::new(arg);
    if path.exists() {
        return Ok((Model::load(path)?, path.display().to_string()));
    }
    match MODELS.iter().find(|(name, _)| *name == arg) {
        Some((name, text)) => {
            let file = format!("<embedded {name}>");
            Ok((Model::parse(&file, text)?, file))
        }
        None => Err(InputError::Io {
            file: arg.to_string(),
            reason: format!(
                "no such file, and not an embedded model. Fix: give a model file's path or one \
                 of {}",
                names(MODELS)
            ),
        }),
    }
}

/// Loads `arg` as a device profile file if such a file exists, else as an embedded name.
pub fn resolve_device(arg: &str) -> Result<DeviceProfile, InputError> {
    let path = std::path::Path::new(arg);
    if path.exists() {
        let text = crate::input::read_text(path, crate::FileKind::Device)?;
        return DeviceProfile::parse(&path.display().to_string(), &text);
    }
    match DEVICES.iter().find(|(name, _)| *name == arg) {
        Some((name, text)) => DeviceProfile::parse(&format!("<embedded {name}>"), text),
        None => Err(InputError::invalid(
            "<command line>",
            "--device",
            format!("`{arg}` is neither a device profile file nor a known device"),
            format!("use one of {} or a profile RON file", names(DEVICES)),
        )),
    }
}

/// The embedded profile of the GPU the driver calls `gpu_name` ("NVIDIA H100 80GB HBM3" is
/// `h100`): the first embedded profile whose name is a word of it, case-insensitively; None for
/// a GPU with no profile. `mkc run` and `bench` compile and predict with it, so that the
/// prediction printed beside a measurement is the measured card's.
pub fn device_for_gpu(gpu_name: &str) -> Option<DeviceProfile> {
    let words: Vec<String> = gpu_name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let (name, _) = DEVICES.iter().find(|(n, _)| words.iter().any(|w| w == n))?;
    resolve_device(name).ok()
}

fn names(list: &[(&str, &str)]) -> String {
    list.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}
