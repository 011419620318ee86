//! `mkc`: compile, simulate and run GPU megakernel schedules for LLM decode.
//!
//! This binary is a thin command-line layer: argument parsing lives in [`cli`], and each
//! subcommand in [`commands`] calls into the workspace crates (`mkc-ir`, `mkc-scheduler`, ...).

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
