//! Reading input files safely: only regular files, never more than a bound, UTF-8 checked with
//! a position, so that a FIFO, `/dev/zero` or a binary file is refused instead of hanging,
//! exhausting memory or failing without saying where.

use std::io::Read;
use std::path::Path;

use crate::error::InputError;

/// What kind of file a text is: it decides which README section an error points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A model file (`models/*.ron`).
    Model,
    /// A device profile (`devices/*.ron`).
    Device,
    /// A sweep spec (`sweeps/*.ron`).
    Sweep,
    /// A compiled schedule (`mkc compile -o`).
    Schedule,
    /// A checkpoint's `config.json`.
    CheckpointConfig,
    /// A tuning file (`--tune FILE`).
    Tuning,
    /// A record of measured steps (`measured/steps.ron`, `mkc calibrate`).
    Measured,
}

impl FileKind {
    /// The README section that documents this kind of file.
    pub fn readme_section(self) -> &'static str {
        match self {
            FileKind::Model => "Model file format",
            FileKind::Device => "Device profile format",
            FileKind::Sweep => "Sweep spec format",
            FileKind::Schedule => "Schedule file format",
            FileKind::CheckpointConfig => "Checkpoints",
            FileKind::Tuning => "Tuning knobs",
            FileKind::Measured => "Measured steps",
        }
    }

    /// What the file is called in messages.
    pub fn noun(self) -> &'static str {
        match self {
            FileKind::Model => "model file",
            FileKind::Device => "device profile",
            FileKind::Sweep => "sweep spec",
            FileKind::Schedule => "schedule",
            FileKind::CheckpointConfig => "checkpoint config",
            FileKind::Tuning => "tuning file",
            FileKind::Measured => "measurements record",
        }
    }

    /// The largest file of this kind mkc reads (a schedule embeds its whole task graph).
    pub fn max_bytes(self) -> u64 {
        match self {
            FileKind::Schedule => 1 << 30,
            _ => 1 << 20,
        }
    }
}

/// Reads `path` as UTF-8 text of kind `kind`, refusing anything but a regular file of at most
/// [`FileKind::max_bytes`].
pub fn read_text(path: &Path, kind: FileKind) -> Result<String, InputError> {
    let file = path.display().to_string();
    let io = |reason: String| InputError::Io {
        file: file.clone(),
        reason,
    };
    let os = |e: std::io::Error| io(format!("{e}. Fix: check the path and permissions"));
    // `metadata` does not open the file, so a FIFO cannot block us here.
    let meta = std::fs::metadata(path).map_err(os)?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a FIFO, socket or device)"
        };
        return Err(io(format!(
            "it is {what}; mkc reads regular files only. Fix: save the {} to a file and pass \
             its path",
            kind.noun()
        )));
    }
    let max = kind.max_bytes();
    if meta.len() > max {
        return Err(io(format!(
            "it holds {} bytes, more than the {max} a {} may have. Fix: pass the right \
             file (README.md, section \"{}\")",
            meta.len(),
            kind.noun(),
            kind.readme_section()
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
        .map_err(os)?;
    if bytes.len() as u64 > max {
        return Err(io(format!(
            "it grew past {max} bytes while being read. Fix: pass a file that is not being \
             written"
        )));
    }
    utf8(&file, bytes)
}

/// `bytes` as a string, or an error naming the line and column of the first invalid byte.
pub fn utf8(file: &str, bytes: Vec<u8>) -> Result<String, InputError> {
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = good.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        let column = String::from_utf8_lossy(&good[line_start..]).chars().count() + 1;
        InputError::Io {
            file: format!("{file}:{line}:{column}"),
            reason: format!(
                "byte 0x{:02x} there is not UTF-8 text. Fix: save the file as UTF-8",
                e.as_bytes()[good.len()]
            ),
        }
    })
}

/// Opens `path` to write an output (a schedule, a trace, a CSV), refusing a FIFO that nothing
/// reads: opening one for writing would block forever. `/dev/stdout` and a FIFO with a reader
/// work as before.
pub fn create_output(path: &Path) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        if meta.file_type().is_fifo() {
            // Without a reader, a non-blocking open for writing fails (ENXIO) instead of
            // waiting for one.
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(|_| {
                    std::io::Error::other(
                        "it is a FIFO that nothing reads, so writing it would block forever",
                    )
                })?;
        }
    }
    std::fs::File::create(path)
}

/// Writes `bytes` to the output `path` ([`create_output`]).
pub fn write_output(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::io::Write;
    create_output(path)?.write_all(bytes.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_names_line_and_column() {
        let err = utf8("m.ron", b"Model(\n  na\xffme".to_vec()).unwrap_err();
        assert!(err.to_string().contains("m.ron:2:5"), "{err}");
    }

    #[test]
    fn devices_and_directories_are_refused_without_reading() {
        for path in ["/dev/zero", "/"] {
            let err = read_text(Path::new(path), FileKind::Model).unwrap_err();
            assert!(
                err.to_string().contains("regular file") || err.to_string().contains("directory"),
                "{err}"
            );
        }
    }
}
