//! Subcommand implementations and the error type they share.

mod bench;
mod compile;
mod gpu_common;
mod kernels;
mod occupancy;
mod probe;
mod run;
mod simulate;

use crate::cli::{Cli, Command};

/// Why a command failed, and which exit code says so.
#[derive(Debug)]
pub enum CommandError {
    /// Bad input from the user (exit code 2).
    Input(String),
    /// The tool found a fault in its own output (exit code 1).
    Internal(String),
}

impl CommandError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            CommandError::Input(_) => 2,
            CommandError::Internal(_) => 1,
        }
    }
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::Input(m) | CommandError::Internal(m) => f.write_str(m),
        }
    }
}

impl From<mkc_backend::BackendError> for CommandError {
    fn from(e: mkc_backend::BackendError) -> Self {
        use mkc_backend::BackendError as B;
        match e {
            B::NoDevice(_) | B::NoNvrtc | B::Unsupported(_) | B::Weights(_) => {
                CommandError::Input(e.to_string())
            }
            _ => CommandError::Internal(e.to_string()),
        }
    }
}

impl From<mkc_ir::InputError> for CommandError {
    fn from(e: mkc_ir::InputError) -> Self {
        CommandError::Input(e.to_string())
    }
}

impl crate::cli::SetupArgs {
    /// The model and the device (with any `--sms` override) these arguments name.
    fn resolve(&self) -> Result<(mkc_ir::Model, mkc_ir::device::DeviceProfile), CommandError> {
        let model = mkc_ir::embedded::resolve_model(&self.model)?;
        Ok((model, device_with_sms(&self.device, self.sms)?))
    }
}

/// Resolves `--device` and applies an `--sms` override, refusing counts out of range.
fn device_with_sms(
    device: &str,
    sms: Option<u32>,
) -> Result<mkc_ir::device::DeviceProfile, CommandError> {
    let profile = mkc_ir::embedded::resolve_device(device)?;
    match sms {
        None => Ok(profile),
        Some(n) if (1..=4096).contains(&n) => Ok(profile.with_sms(n)),
        Some(n) => Err(CommandError::Input(format!(
            "--sms: {n} SMs is out of range. Fix: pass the number of SMs to use, 1..4096."
        ))),
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), CommandError> {
    match cli.command {
        Command::Compile(args) => compile::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Occupancy(args) => occupancy::run(args),
        Command::Kernels(args) => kernels::run(args),
        Command::Run(args) => run::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Probe(args) => probe::run(args),
    }
}
