//! The error a user sees when a model or device file is wrong.

use std::fmt;

use crate::input::FileKind;
pub use crate::ron_error::shorten;

/// A user error in an input file: which file, which field, what is wrong and how to fix it.
///
/// Every variant is a user error (bad input), never an internal bug; the CLI prints it as one
/// paragraph and exits with code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputError {
    /// The file could not be read at all.
    Io {
        /// Path (or embedded name) of the file.
        file: String,
        /// Why, and how to fix it.
        reason: String,
    },
    /// The file is not valid RON for the expected structure.
    Syntax {
        /// Path of the file.
        file: String,
        /// What kind of file it is (decides the README section named).
        kind: FileKind,
        /// Dotted path of the field at the problem, when one could be found.
        field: Option<String>,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What the parser expected or found.
        message: String,
    },
    /// The file parsed, but a field's value is impossible.
    Invalid {
        /// Path of the file.
        file: String,
        /// Dotted path of the offending field, e.g. `geometry.kv_heads`.
        field: String,
        /// What is wrong with the value.
        problem: String,
        /// How to make it right.
        fix: String,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Io { file, reason } => {
                write!(f, "cannot read `{}`: {reason}.", shorten(file))
            }
            InputError::Syntax {
                file,
                kind,
                field,
                line,
                column,
                message,
            } => {
                write!(f, "{}:{line}:{column}: ", shorten(file))?;
                if let Some(field) = field {
                    write!(f, "field `{}`: ", shorten(field))?;
                }
                write!(
                    f,
                    "{message}. Fix the file at that position; README.md (section \"{}\") \
                     lists every field.",
                    kind.readme_section()
                )
            }
            InputError::Invalid {
                file,
                field,
                problem,
                fix,
            } => write!(
                f,
                "{}: field `{}`: {problem}. Fix: {fix}.",
                shorten(file),
                shorten(field)
            ),
        }
    }
}

impl std::error::Error for InputError {}

impl InputError {
    /// Builds an [`InputError::Invalid`] without spelling out the field names at call sites.
    pub fn invalid(
        file: &str,
        field: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        InputError::Invalid {
            file: file.to_string(),
            field: field.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    /// Converts a RON parse error in `text` (a file of `kind` named `file`) into a positioned
    /// syntax error naming the field and what it expects.
    pub fn from_ron(
        kind: FileKind,
        file: &str,
        text: &str,
        err: &ron::error::SpannedError,
    ) -> Self {
        crate::ron_error::describe(kind, file, text, err)
    }
}
