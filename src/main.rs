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

/// Keeps large allocations on the heap and freed memory in the process: a compile makes
/// dozens of task-sized vectors (10^5 entries each), and glibc's default maps each one fresh and
/// unmaps it when freed, so every one paid its page faults again (a tenth of the persistent
/// target's compile time).
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

fn main() -> ExitCode {
    keep_freed_memory();
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
