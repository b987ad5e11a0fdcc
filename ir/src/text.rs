//! Where in a program's text an error is: the one positioned error of the
//! languages whose programs are text with lines (classic BPF's
//! `-d`/`-dd`/`-ddd` forms, CSPF's assembler, DPF's atoms), shared here,
//! beside the form they all compile to.
//!
//! The rule: positions are 1-based; a column counts characters, not
//! bytes, from the start of its line; an offset past the text's end is
//! the end. The message says what is wrong and quotes at most the token
//! at fault.
//!
//! ```
//! use sluice_ir::TextError;
//! let e = TextError::at("ld [12]\nfrob", 8, "unknown mnemonic");
//! assert_eq!(e.to_string(), "line 2, column 1: unknown mnemonic");
//! ```

/// A syntax (or type) error in a program's text, with its 1-based line
/// and column (in characters).
///
/// ```
/// use sluice_ir::TextError;
/// let e = TextError { line: 3, column: 7, message: "bad jump target".into() };
/// assert_eq!(e.to_string(), "line 3, column 7: bad jump target");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextError {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl TextError {
    /// The error at byte `at` of `text` (its end if `at` is past it, or
    /// not at a character's start).
    ///
    /// ```
    /// use sluice_ir::TextError;
    /// let e = TextError::at("(12:16 ==\n  é 0x800)", 14, "a number");
    /// assert_eq!((e.line, e.column), (2, 4));
    /// assert_eq!(TextError::at("ab", 99, "end").column, 3);
    /// ```
    pub fn at(text: &str, at: usize, message: impl Into<String>) -> TextError {
        let mut at = at.min(text.len());
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let before = &text[..at];
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        TextError {
            line: before.matches('\n').count() + 1,
            column: before[start..].chars().count() + 1,
            message: message.into(),
        }
    }

    /// The error on line `line` (from 1), at byte `at` of that line's
    /// text `text` (its end if `at` is past it).
    ///
    /// ```
    /// use sluice_ir::TextError;
    /// let e = TextError::in_line(4, "{ 0x6, 0, 0 ", 12, "missing `}`");
    /// assert_eq!(e.to_string(), "line 4, column 13: missing `}`");
    /// ```
    pub fn in_line(line: usize, text: &str, at: usize, message: impl Into<String>) -> TextError {
        let e = TextError::at(text, at, message);
        TextError { line, ..e }
    }
}

impl std::fmt::Display for TextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for TextError {}
