//! Error messages about text that came from a file say where and what, but
//! never repeat the file.
//!
//! A parser's message quotes the text it stopped at (`bad operand
//! \`:$6$…\` for \`root\``), which is right for a filter typed on the
//! command line and wrong for a file: a filter file may be a file the
//! user should not see through sluice (a shadow file given to a program
//! running with more rights). [`redact`] keeps the message's own words
//! and takes out everything of the file's:
//!
//! * every word or number of the message that is also a word of the file
//!   (compared without case) becomes `…`;
//! * every number becomes `…`, except one that follows `line`, `column`,
//!   `instruction`, `word` or `offset` (a position);
//! * every quoted part (`` `…` ``, `'…'`, `"…"`) becomes `…` unless it is
//!   one plain word (letters only) that the file does not contain, such as
//!   a keyword the parser expected.
//!
//! The front ends put the file's name, line and column in front, so the
//! user still knows where to look.
//!
//! ```
//! let shadow = "root:$6$salt$hash:19000:0:99999:7:::\n";
//! let msg = "bad operand `:$6$salt$hash:19000:0:99999:7:::` for `root`";
//! assert_eq!(sluice_filter::redact(msg, shadow), "bad operand `…` for `…`");
//! let expr = "tcp prot 80";
//! let msg = "expected 'and', 'or' or the end of the expression after 'tcp', found name 'prot'";
//! assert_eq!(
//!     sluice_filter::redact(msg, expr),
//!     "expected 'and', 'or' or the end of the expression after '…', found name '…'"
//! );
//! ```

use std::collections::HashSet;

const QUOTES: [char; 3] = ['`', '\'', '"'];
const POSITION_WORDS: [&str; 5] = ["line", "column", "instruction", "word", "offset"];

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The words of a text, lower case.
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !is_word_char(c))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Where the quoted part opened at `open` (a quote character) closes: the
/// same character followed by the end, a blank or punctuation.
fn closing(chars: &[char], open: usize) -> Option<usize> {
    let q = chars[open];
    (open + 1..chars.len()).find(|&i| {
        chars[i] == q
            && chars
                .get(i + 1)
                .map_or(true, |c| c.is_whitespace() || ",.;:)]}".contains(*c))
    })
}

fn push_elided(out: &mut String) {
    if !out.ends_with('…') {
        out.push('…');
    }
}

/// The last word written to `out` (letters only), lower case.
fn last_word(out: &str) -> String {
    out.trim_end()
        .rsplit(|c: char| !c.is_alphabetic())
        .next()
        .unwrap_or("")
        .to_lowercase()
}

/// `message` (an error about `text`, which came from a file) with every
/// word, number and quoted part of the file taken out, as the module
/// documentation says.
///
/// ```
/// let text = "ld [12]\njeq #0x800 jt 2 jf 3\nfrob\n";
/// assert_eq!(
///     sluice_filter::redact("line 3, column 1: unknown mnemonic `frob`", text),
///     "line 3, column 1: unknown mnemonic `…`"
/// );
/// assert_eq!(sluice_filter::redact("number 4294967296 overflows 32 bits", "4294967296"), "number … overflows … bits");
/// ```
pub fn redact(message: &str, text: &str) -> String {
    let file_words = words(text);
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::with_capacity(message.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let opens = QUOTES.contains(&c)
            && (i == 0 || chars[i - 1].is_whitespace() || "([{,".contains(chars[i - 1]));
        if opens {
            if let Some(end) = closing(&chars, i) {
                let inside: String = chars[i + 1..end].iter().collect();
                out.push(c);
                let plain = !inside.is_empty() && inside.chars().all(char::is_alphabetic);
                if plain && !file_words.contains(&inside.to_lowercase()) {
                    out.push_str(&inside);
                } else {
                    push_elided(&mut out);
                }
                out.push(c);
                i = end + 1;
                continue;
            }
        }
        if is_word_char(c) {
            let start = i;
            while i < chars.len() && is_word_char(chars[i]) {
                i += 1;
            }
            let w: String = chars[start..i].iter().collect();
            let number = w.chars().any(|c| c.is_ascii_digit());
            let keep = if number {
                POSITION_WORDS.contains(&last_word(&out).as_str())
                    && w.chars().all(|c| c.is_ascii_digit())
            } else {
                !file_words.contains(&w.to_lowercase())
            };
            if keep {
                out.push_str(&w);
            } else {
                push_elided(&mut out);
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_of_the_file_survives() {
        // Random secrets in a file, and messages quoting them in the ways
        // the parsers do: no word of the file is left, whatever the message.
        let file = "user:Xq7ZpL0w$Secret:deadbeef\nother line here\n";
        for msg in [
            "bad operand `:Xq7ZpL0w$Secret:deadbeef` for `user`",
            "unknown word 'Secret' (the only keyword is SHIFT)",
            "unknown PF reason \"deadbeef\"",
            "expected a number, found Xq7ZpL0w",
            "{kind} number deadbeef overflows",
            "found user:Xq7ZpL0w (unterminated 'quote",
        ] {
            let r = redact(msg, file);
            for secret in ["Xq7ZpL0w", "Secret", "deadbeef", "user"] {
                assert!(!r.contains(secret), "{msg} -> {r}");
            }
        }
    }

    #[test]
    fn positions_and_the_parser_s_own_words_stay() {
        let r = redact(
            "line 2, column 7: `jeq` needs `jt <target> jf <target>`",
            "ld [12]\njeq #1\n",
        );
        assert_eq!(r, "line 2, column 7: `…` needs `…`");
        assert_eq!(
            redact("instruction 3: division by constant 0", "x"),
            "instruction 3: division by constant …"
        );
        assert_eq!(redact("can't parse", "can"), "…'t parse");
    }
}
