//! The error type of the pcap filter compiler (lexer, parser and code
//! generator).
//!
//! ```
//! use sluice_pcap::{ast::Span, error::CompileError};
//! let e = CompileError::new("expected a value", Span::new(5, 6));
//! assert_eq!(e.to_string(), "column 6: expected a value");
//! ```

use crate::ast::Span;
use std::fmt;

/// A compile error: a message and the span of the offending text.
///
/// Displayed as `column N: message`, with the 1-based column of the first
/// byte of the span.
///
/// ```
/// use sluice_pcap::{ast::Span, error::CompileError};
/// let e = CompileError::new("unknown host 'x'", Span::new(0, 1));
/// assert_eq!(e.span.column(), 1);
/// assert!(e.to_string().starts_with("column 1:"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    /// What went wrong.
    pub message: String,
    /// Where it went wrong.
    pub span: Span,
}

impl CompileError {
    /// An error with `message` at `span`.
    ///
    /// ```
    /// use sluice_pcap::{ast::Span, error::CompileError};
    /// let e = CompileError::new(String::from("oops"), Span::new(2, 4));
    /// assert_eq!(e.message, "oops");
    /// ```
    pub fn new(message: impl Into<String>, span: Span) -> CompileError {
        CompileError {
            message: message.into(),
            span,
        }
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.span.column(), self.message)
    }
}

impl std::error::Error for CompileError {}
