//! `mkc`: compile, simulate and run GPU megakernel schedules for LLM decode.
//!
//! This binary is a thin command-line layer: argument parsing lives in [`cli`], and each
//! subcommand in [`commands`] calls into the workspace crates (`mkc-ir`, `mkc-scheduler`, ...).

#[macro_use]
mod out;
mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = commands::run(cli);
    // A reader that stopped reading (`| head`) wants no more output and no complaint.
    match out::failure() {
        Some(std::io::ErrorKind::BrokenPipe) => return ExitCode::SUCCESS,
        Some(kind) => {
            eprintln!(
                "error: cannot write to standard output ({}). Fix: redirect it to a file or \
                 device with room.",
                std::io::Error::from(kind)
            );
            return ExitCode::from(2);
        }
        None => {}
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
