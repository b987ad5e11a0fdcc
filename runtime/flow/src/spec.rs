//! The `ffpf-flow` graph notation (FFPF §2.3).
//!
//! A flow specification is a chain of *stages* joined by `->` ("connects
//! to"); a stage is one or more *elements* joined by `|` ("in parallel
//! with"), so `|` binds tighter than `->`:
//!
//! ```text
//! (file,a.pcap) | (file,b.pcap) -> (sampler,2,4) -> (BPF,"tcp") | (BPF,"udp") -> (bytecount,,8)
//! ```
//!
//! reads as `(a | b) -> sampler -> (tcp-filter | udp-filter) -> bytecount`:
//! packets of either file go to the sampler, every sampled packet goes to
//! both filters, and every packet that passes at least one of them goes
//! (once) to the byte counter. The first stage holds the packet sources.
//!
//! An element is `(class,arg,arg,…)`. An argument is either bare text (up
//! to the next `,` or `)`, spaces around it trimmed; it may be empty, as in
//! `(bytecount,,8)`) or a double-quoted string in which `\"` stands for a
//! quote and `\\` for a backslash (other backslash sequences are kept as
//! written, for the classes that give them meaning, such as `\x41` in
//! string search patterns).
//!
//! ```
//! use sluice_flow::spec::parse;
//! let g = parse(r#"(file,in.pcap) -> (sampler,2,4) -> (BPF,"tcp port 80") | (BPF,"udp")"#).unwrap();
//! assert_eq!(g.stages.len(), 3);
//! assert_eq!(g.stages[2].len(), 2);
//! assert_eq!(g.stages[2][0].args, ["tcp port 80"]);
//! let e = parse("(file,in.pcap) -> sampler").unwrap_err();
//! assert_eq!(e.column, 19);
//! ```

use std::fmt;

/// A parse error, with the 1-based column (in characters) where it was found.
///
/// ```
/// let e = sluice_flow::spec::parse("(a,b) ->").unwrap_err();
/// assert!(e.to_string().starts_with("column 9:"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct SpecError {
    /// 1-based column (characters, not bytes).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// One element of a graph: `(class,args…)`.
///
/// ```
/// let g = sluice_flow::spec::parse("(file,x.pcap)").unwrap();
/// assert_eq!(g.stages[0][0].class, "file");
/// assert_eq!(g.stages[0][0].column, 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Element {
    /// The class name as written.
    pub class: String,
    /// The arguments, unquoted.
    pub args: Vec<String>,
    /// 1-based column of the opening parenthesis.
    pub column: usize,
    /// 1-based column of each argument's first character (inside the quotes
    /// for a quoted argument).
    pub arg_columns: Vec<usize>,
}

impl Element {
    /// The element written back in the notation (arguments quoted when they
    /// need it).
    ///
    /// ```
    /// let g = sluice_flow::spec::parse(r#"(BPF, "tcp or udp")"#).unwrap();
    /// assert_eq!(g.stages[0][0].to_string(), r#"(BPF,"tcp or udp")"#);
    /// ```
    pub fn text(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}", self.class)?;
        for a in &self.args {
            let bare = !a.is_empty()
                && a.trim() == a
                && !a.contains([',', ')', '(', '"', '|', '\\'])
                && !a.contains("->")
                && !a.contains(' ');
            if bare || a.is_empty() {
                write!(f, ",{a}")?;
            } else {
                write!(f, ",\"{}\"", a.replace('\\', "\\\\").replace('"', "\\\""))?;
            }
        }
        write!(f, ")")
    }
}

/// A parsed flow specification: stages in order, each a list of parallel
/// elements.
///
/// ```
/// let g = sluice_flow::spec::parse("(file,a) | (file,b) -> (packetcount)").unwrap();
/// assert_eq!(g.to_string(), "(file,a) | (file,b) -> (packetcount)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    /// Stages joined by `->`; each holds at least one element.
    pub stages: Vec<Vec<Element>>,
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.stages.iter().enumerate() {
            if i > 0 {
                write!(f, " -> ")?;
            }
            for (j, e) in s.iter().enumerate() {
                if j > 0 {
                    write!(f, " | ")?;
                }
                write!(f, "{e}")?;
            }
        }
        Ok(())
    }
}

struct Lexer<'a> {
    chars: Vec<(usize, char)>,
    pos: usize,
    _text: &'a str,
}

impl Lexer<'_> {
    fn column(&self) -> usize {
        self.pos + 1
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).map(|c| c.1)
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn err<T>(&self, column: usize, message: impl Into<String>) -> Result<T, SpecError> {
        Err(SpecError {
            column,
            message: message.into(),
        })
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "the end of the specification".to_string(),
            Some(c) => format!("{c:?}"),
        }
    }

    fn element(&mut self) -> Result<Element, SpecError> {
        self.skip_space();
        let column = self.column();
        if self.peek() != Some('(') {
            let found = self.describe();
            return self.err(
                column,
                format!("expected an element such as (class,arg,...), found {found}"),
            );
        }
        self.pos += 1;
        self.skip_space();
        let class_col = self.column();
        let mut class = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                class.push(c);
                self.pos += 1;
            } else {
                break;
            }
        }
        if class.is_empty() {
            let found = self.describe();
            return self.err(
                class_col,
                format!("expected a class name (letters, digits, '-', '_', '.'), found {found}"),
            );
        }
        self.skip_space();
        let mut args = Vec::new();
        let mut arg_columns = Vec::new();
        loop {
            match self.peek() {
                Some(')') => {
                    self.pos += 1;
                    break;
                }
                Some(',') => {
                    self.pos += 1;
                    let (a, col) = self.arg()?;
                    args.push(a);
                    arg_columns.push(col);
                }
                _ => {
                    let found = self.describe();
                    return self.err(
                        self.column(),
                        format!(
                            "expected ',' or ')' in the element opened at column {column}, found {found}"
                        ),
                    );
                }
            }
        }
        Ok(Element {
            class,
            args,
            column,
            arg_columns,
        })
    }

    /// One argument, after its comma; stops before the next `,` or `)`.
    fn arg(&mut self) -> Result<(String, usize), SpecError> {
        self.skip_space();
        let col = self.column();
        if self.peek() == Some('"') {
            self.pos += 1;
            let mut s = String::new();
            loop {
                match self.peek() {
                    None => return self.err(col, "unterminated quoted argument"),
                    Some('"') => {
                        self.pos += 1;
                        break;
                    }
                    Some('\\') => {
                        self.pos += 1;
                        match self.peek() {
                            Some(c @ ('"' | '\\')) => {
                                s.push(c);
                                self.pos += 1;
                            }
                            Some(c) => {
                                s.push('\\');
                                s.push(c);
                                self.pos += 1;
                            }
                            None => return self.err(col, "unterminated quoted argument"),
                        }
                    }
                    Some(c) => {
                        s.push(c);
                        self.pos += 1;
                    }
                }
            }
            self.skip_space();
            if !matches!(self.peek(), Some(',' | ')')) {
                let found = self.describe();
                return self.err(
                    self.column(),
                    format!("expected ',' or ')' after the quoted argument, found {found}"),
                );
            }
            // Columns inside the argument count from its first character.
            Ok((s, col + 1))
        } else {
            let mut s = String::new();
            while let Some(c) = self.peek() {
                match c {
                    ',' | ')' => break,
                    '"' | '(' => {
                        return self.err(
                            self.column(),
                            format!("{c:?} inside a bare argument: quote the argument (\"...\")"),
                        )
                    }
                    _ => {
                        s.push(c);
                        self.pos += 1;
                    }
                }
            }
            if self.peek().is_none() {
                return self.err(col, "element not closed with ')'");
            }
            Ok((s.trim().to_string(), col))
        }
    }
}

/// Parse a flow specification. Errors give the column and what was
/// expected; nothing panics on any input.
///
/// ```
/// use sluice_flow::spec::parse;
/// assert!(parse("(file,a.pcap) -> (BPF,\"ip\") -> (packetcount,,8)").is_ok());
/// assert_eq!(parse("").unwrap_err().column, 1);
/// assert_eq!(parse("(file,a) -> (x,\"y)").unwrap_err().column, 16);
/// ```
pub fn parse(text: &str) -> Result<Graph, SpecError> {
    let mut lx = Lexer {
        chars: text.char_indices().collect(),
        pos: 0,
        _text: text,
    };
    let mut stages = Vec::new();
    loop {
        let mut stage = vec![lx.element()?];
        loop {
            lx.skip_space();
            if lx.peek() == Some('|') {
                lx.pos += 1;
                stage.push(lx.element()?);
            } else {
                break;
            }
        }
        stages.push(stage);
        lx.skip_space();
        match lx.peek() {
            None => break,
            Some('-') if lx.chars.get(lx.pos + 1).map(|c| c.1) == Some('>') => lx.pos += 2,
            _ => {
                let found = lx.describe();
                return lx.err(
                    lx.column(),
                    format!("expected '->', '|' or the end, found {found}"),
                );
            }
        }
    }
    Ok(Graph { stages })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seed_example_parses_with_pipe_binding_tighter() {
        let g = parse(
            r#"(device,eth0) | (device,eth1) -> (sampler,2,4) -> (FPL-2,"...") | (BPF,"...") -> (bytecount,,8)"#,
        )
        .unwrap();
        let shape: Vec<usize> = g.stages.iter().map(Vec::len).collect();
        assert_eq!(shape, [2, 1, 2, 1]);
        assert_eq!(g.stages[3][0].args, ["", "8"]);
        assert_eq!(g.stages[2][0].class, "FPL-2");
        assert_eq!(g.stages[1][0].args, ["2", "4"]);
    }

    #[test]
    fn quotes_and_escapes() {
        let g = parse(r#"(strsearch,"a\"b","c\\d","\x41", "x,y)")"#).unwrap();
        assert_eq!(g.stages[0][0].args, ["a\"b", "c\\d", "\\x41", "x,y)"]);
        // Round trip through Display.
        let again = parse(&g.to_string()).unwrap();
        assert_eq!(again.stages[0][0].args, g.stages[0][0].args);
    }

    #[test]
    fn bad_specs_say_where() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 1, "expected an element"),
            ("(file,a) ->", 12, "expected an element"),
            ("(file,a) -> (", 14, "class name"),
            ("(file,a", 7, "not closed"),
            ("(file,a) (x)", 10, "expected '->'"),
            ("(file,a) -> (x,\"abc", 16, "unterminated"),
            ("(file,a) -> (x,\"a\"b)", 19, "after the quoted"),
            ("(file,a(b))", 8, "inside a bare argument"),
            ("(file a)", 7, "expected ',' or ')'"),
            ("(file,a) - (b)", 10, "expected '->'"),
            ("(file,a) | | (b)", 12, "expected an element"),
            ("(é,a)", 2, "class name"),
            ("(file,é) -> x", 13, "expected an element"),
        ];
        for (text, col, msg) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.column, *col, "{text}: {e}");
            assert!(e.message.contains(msg), "{text}: {e}");
        }
    }

    #[test]
    fn columns_of_elements_and_args() {
        let g = parse("(file, a.pcap)  ->  (sampler,2,4)").unwrap();
        assert_eq!(g.stages[0][0].arg_columns, [8]);
        assert_eq!(g.stages[1][0].column, 21);
        assert_eq!(g.stages[1][0].arg_columns, [30, 32]);
    }

    proptest! {
        #[test]
        fn random_text_never_panics(s in ".{0,80}") {
            if let Err(e) = parse(&s) {
                prop_assert!(e.column >= 1 && e.column <= s.chars().count() + 1);
            }
        }

        #[test]
        fn random_notation_never_panics(s in "[(),|\\->\"a-z0-9 \\\\]{0,60}") {
            match parse(&s) {
                Ok(g) => {
                    // Printing and parsing again gives the same graph.
                    let again = parse(&g.to_string()).unwrap();
                    prop_assert_eq!(
                        again.stages.iter().map(|s| s.iter().map(|e| (&e.class, &e.args)).collect::<Vec<_>>()).collect::<Vec<_>>(),
                        g.stages.iter().map(|s| s.iter().map(|e| (&e.class, &e.args)).collect::<Vec<_>>()).collect::<Vec<_>>()
                    );
                }
                Err(e) => prop_assert!(e.column >= 1 && e.column <= s.chars().count() + 1),
            }
        }
    }
}
