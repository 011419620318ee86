//! Turning a RON parse error into one that names the field: the parser only knows a position
//! and a terse code ("Integer is out of bounds"), so the field path is recovered by scanning
//! the text up to that position, and the code is restated as what the field expects.

use ron::error::{Error as RonError, SpannedError};

use crate::error::InputError;
use crate::input::FileKind;

/// Longest piece of user text echoed back in a message.
const ECHO_MAX: usize = 60;

/// `text` cut to [`ECHO_MAX`] characters, saying how long it was when cut.
pub fn shorten(text: &str) -> String {
    let count = text.chars().count();
    if count <= ECHO_MAX {
        return text.to_string();
    }
    let head: String = text.chars().take(ECHO_MAX).collect();
    format!("{head}... ({count} characters)")
}

/// The dotted path of the field whose value is at or before 1-based `line:column` of `text`
/// (`geometry.hidden`), if any.
pub fn field_path_at(text: &str, line: usize, column: usize) -> Option<String> {
    let end = offset_of(text, line, column);
    let bytes = &text.as_bytes()[..end];
    let mut stack: Vec<Option<String>> = Vec::new();
    let mut key: Option<String> = None;
    let mut ident = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b':' => key = Some(std::mem::take(&mut ident)),
            b'(' | b'[' | b'{' => stack.push(key.take()),
            b')' | b']' | b'}' => {
                stack.pop();
                key = None;
            }
            b',' => key = None,
            _ if c.is_ascii_alphanumeric() || c == b'_' => {
                if i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
                    ident.clear();
                }
                ident.push(c as char);
            }
            _ => {}
        }
        i += 1;
    }
    let parts: Vec<String> = stack.into_iter().flatten().chain(key).collect();
    (!parts.is_empty()).then(|| parts.join("."))
}

/// Byte offset of 1-based `line:column` (columns count characters), clamped to the text.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (n, l) in text.split_inclusive('\n').enumerate() {
        if n + 1 == line {
            let within: usize = l
                .chars()
                .take(column.saturating_sub(1))
                .map(char::len_utf8)
                .sum();
            return offset + within;
        }
        offset += l.len();
    }
    text.len()
}

/// The value written after `field:` on the error's line, for echoing.
fn value_on_line(text: &str, line: usize, field: &str) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let last = field.rsplit('.').next()?;
    let at = l.find(&format!("{last}:"))? + last.len() + 1;
    let value: String = l[at..]
        .trim_start()
        .chars()
        .take_while(|&c| c != ',' && c != ')' && c != '/')
        .collect();
    let value = value.trim_end().to_string();
    (!value.is_empty()).then(|| shorten(&value))
}

/// What the parser's complaint means for a field value.
fn restate(code: &RonError) -> Option<&'static str> {
    Some(match code {
        RonError::IntegerOutOfBounds => "the number is out of range",
        RonError::ExpectedInteger => "expected a whole number",
        RonError::ExpectedFloat => "expected a number",
        RonError::ExpectedBoolean => "expected true or false",
        RonError::ExpectedString | RonError::ExpectedStringEnd => {
            "expected a string in double quotes"
        }
        RonError::SuggestRawIdentifier(_) | RonError::ExpectedIdentifier => {
            "expected a name (an identifier such as Bf16), not a number or a quoted string"
        }
        RonError::ExpectedComma => "unexpected text after the value (a whole number is written without a decimal point; values are separated by commas)",
        _ => return None,
    })
}

/// Converts a RON error in `text` (a file of `kind` named `file`) into an [`InputError`] that
/// names the field, restates what it expects and points at the README section.
pub fn describe(kind: FileKind, file: &str, text: &str, err: &SpannedError) -> InputError {
    let (line, column) = (err.position.line, err.position.col);
    let field = field_path_at(text, line, column);
    let mut message = match (&field, restate(&err.code)) {
        (Some(f), Some(what)) => {
            let mut m = what.to_string();
            if let Some(v) = value_on_line(text, line, f) {
                m += &format!(", found `{v}`");
            }
            if let Some(range) = crate::validate::expects(kind, f) {
                m += &format!("; it takes {range}");
            }
            m
        }
        _ => shorten_quoted(&err.code.to_string()),
    };
    if message.is_empty() {
        message = "malformed text".into();
    }
    InputError::Syntax {
        file: file.to_string(),
        kind,
        line,
        column,
        field,
        message,
    }
}

/// `message` with every backtick-quoted or double-quoted piece of user text shortened.
fn shorten_quoted(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(start) = rest.find(['`', '"']) {
        let quote = rest.as_bytes()[start] as char;
        out += &rest[..=start];
        rest = &rest[start + 1..];
        match rest.find(quote) {
            Some(end) => {
                out += &shorten(&rest[..end]);
                out.push(quote);
                rest = &rest[end + 1..];
            }
            None => {
                out += &shorten(rest);
                rest = "";
            }
        }
    }
    out + rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_follow_nesting() {
        let text = "Model(\n  name: \"x\",\n  geometry: (\n    hidden: -64,\n";
        assert_eq!(
            field_path_at(text, 4, 16).as_deref(),
            Some("geometry.hidden")
        );
        assert_eq!(field_path_at(text, 2, 12).as_deref(), Some("name"));
        let text = "Model( // a: (\n geometry: (a: 1), lowering: (kernel: (threads: 9";
        assert_eq!(
            field_path_at(text, 2, 50).as_deref(),
            Some("lowering.kernel.threads")
        );
    }

    #[test]
    fn long_echoes_are_cut() {
        let long = "x".repeat(10_000);
        let s = shorten_quoted(&format!("Unexpected field named `{long}` in `Geometry`"));
        assert!(s.len() < 200 && s.contains("10000 characters"), "{s}");
    }
}
