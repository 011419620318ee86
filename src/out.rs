//! Standard output that never panics: `println!` panics when stdout is closed or full
//! (`mkc simulate --json | head -c1`, `> /dev/full`). Every command prints through [`outln!`]
//! and [`out!`] instead; the first failed write is remembered, later writes are skipped, and
//! `main` reports it once the command returns.

use std::io::Write;
use std::sync::Mutex;

/// The first write error, if any.
static FAILED: Mutex<Option<std::io::ErrorKind>> = Mutex::new(None);

/// Writes `text` to stdout unless an earlier write failed; remembers the first failure.
pub fn write(text: std::fmt::Arguments<'_>) {
    let mut failed = FAILED.lock().unwrap_or_else(|p| p.into_inner());
    if failed.is_some() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        *failed = Some(e.kind());
    }
}

/// The first write failure: `None` when every write succeeded.
pub fn failure() -> Option<std::io::ErrorKind> {
    *FAILED.lock().unwrap_or_else(|p| p.into_inner())
}

/// `print!` to stdout without panicking.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::write(format_args!($($arg)*)) };
}

/// `println!` to stdout without panicking.
#[macro_export]
macro_rules! outln {
    () => { $crate::out::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::write(format_args!("{}\n", format_args!($($arg)*))) };
}
