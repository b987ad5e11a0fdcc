//! The FPL lexer: numbers, names, strings, operators, with line and column.

use crate::Error;

/// One token and where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: Tok,
    pub line: u32,
    pub col: u32,
}

/// Token kinds. Names keep their spelling; the parser compares keywords
/// without regard to case (the paper writes both `HASH` and `Hash`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    Num(u32),
    Name(String),
    Str(String),
    Op(&'static str),
    Eof,
}

/// Operators, longest first so that the first match is the longest.
const OPS: &[&str] = &[
    "<<=", ">>=", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=", "==", "!=", "<=",
    ">=", "&&", "||", "<<", ">>", "+", "-", "*", "/", "%", "&", "|", "^", "~", "!", "<", ">", "=",
    "(", ")", "[", "]", ";", ",", ".",
];

/// Split `src` into tokens, ending with [`Tok::Eof`].
pub(crate) fn lex(src: &str) -> Result<Vec<Token>, Error> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    // Advance over `n` chars, keeping line and column.
    let step = |i: &mut usize, line: &mut u32, col: &mut u32, n: usize| {
        for _ in 0..n {
            if chars[*i] == '\n' {
                *line += 1;
                *col = 1;
            } else {
                *col += 1;
            }
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let (tl, tc) = (line, col);
        if c.is_whitespace() {
            step(&mut i, &mut line, &mut col, 1);
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                step(&mut i, &mut line, &mut col, 1);
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            step(&mut i, &mut line, &mut col, 2);
            loop {
                if i >= chars.len() {
                    return Err(Error::new(tl, tc, "comment not closed (missing */)"));
                }
                if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    step(&mut i, &mut line, &mut col, 2);
                    break;
                }
                step(&mut i, &mut line, &mut col, 1);
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                step(&mut i, &mut line, &mut col, 1);
            }
            let text: String = chars[start..i].iter().collect();
            let parsed =
                if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                    u32::from_str_radix(h, 16)
                } else {
                    text.parse::<u32>()
                };
            let v = parsed.map_err(|_| {
                Error::new(
                    tl,
                    tc,
                    format!("`{text}` is not a number from 0 to 4294967295"),
                )
            })?;
            out.push(Token {
                kind: Tok::Num(v),
                line: tl,
                col: tc,
            });
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                step(&mut i, &mut line, &mut col, 1);
            }
            out.push(Token {
                kind: Tok::Name(chars[start..i].iter().collect()),
                line: tl,
                col: tc,
            });
        } else if c == '"' {
            step(&mut i, &mut line, &mut col, 1);
            let start = i;
            while i < chars.len() && chars[i] != '"' && chars[i] != '\n' {
                step(&mut i, &mut line, &mut col, 1);
            }
            if i >= chars.len() || chars[i] != '"' {
                return Err(Error::new(tl, tc, "string not closed (missing \")"));
            }
            let s: String = chars[start..i].iter().collect();
            step(&mut i, &mut line, &mut col, 1);
            out.push(Token {
                kind: Tok::Str(s),
                line: tl,
                col: tc,
            });
        } else {
            let op = OPS.iter().find(|op| {
                op.chars()
                    .enumerate()
                    .all(|(k, oc)| chars.get(i + k) == Some(&oc))
            });
            match op {
                Some(op) => {
                    step(&mut i, &mut line, &mut col, op.len());
                    out.push(Token {
                        kind: Tok::Op(op),
                        line: tl,
                        col: tc,
                    });
                }
                None => {
                    return Err(Error::new(tl, tc, format!("unexpected character `{c}`")));
                }
            }
        }
    }
    out.push(Token {
        kind: Tok::Eof,
        line,
        col,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_positions() {
        let t = lex("IF (x<<=0x1F) // c\n  R[1]++; /* a\n b */ \"s\"").unwrap();
        let kinds: Vec<_> = t.iter().map(|t| t.kind.clone()).collect();
        assert_eq!(kinds[0], Tok::Name("IF".into()));
        assert_eq!(kinds[3], Tok::Op("<<="));
        assert_eq!(kinds[4], Tok::Num(31));
        assert_eq!((t[6].line, t[6].col), (2, 3));
        assert_eq!(kinds[kinds.len() - 2], Tok::Str("s".into()));
        assert_eq!(kinds.last(), Some(&Tok::Eof));
    }

    #[test]
    fn bad_input_is_an_error_with_position() {
        let e = lex("R[0] = 4294967296;").unwrap_err();
        assert_eq!((e.line, e.col), (1, 8));
        let e = lex("\n  @").unwrap_err();
        assert_eq!((e.line, e.col), (2, 3));
        assert!(lex("/* open").is_err());
        assert!(lex("\"open").is_err());
    }
}
