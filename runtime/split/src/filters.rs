//! A named filter set: `name<TAB>filter` lines (the `--filters` file of
//! `sluice split`) or name/filter pairs, with names that can be file names.

use std::collections::HashSet;

/// One named filter of a set.
///
/// ```
/// let f = sluice_split::FilterLine { line: 1, name: "web".into(), expression: "tcp port 80".into() };
/// assert_eq!(f.name, "web");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterLine {
    /// Line number in its file, from 1 (for pairs: the position, from 1).
    pub line: usize,
    /// The filter's name (also its output file's name).
    pub name: String,
    /// The filter text in any language, with its prefix (empty: every
    /// packet).
    pub expression: String,
}

/// Parse a filters file: `name<TAB>expression` per line, blank lines and
/// `#` comments ignored (in CSPF text `#` marks literals, so a `cspf:`
/// line keeps it). Returns the filters and one message per bad line (line
/// number, `file:line: what`).
///
/// ```
/// let (f, bad) = sluice_split::parse_filters("web\ttcp port 80 # http\n# note\nbroken\n", "f.txt");
/// assert_eq!(f[0].expression, "tcp port 80");
/// assert_eq!(bad, vec![(3, "f.txt:3: expected name<TAB>expression, found no tab".to_string())]);
/// ```
pub fn parse_filters(text: &str, file: &str) -> (Vec<FilterLine>, Vec<(usize, String)>) {
    let mut filters = Vec::new();
    let mut errors = Vec::new();
    let mut names = HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
            continue;
        }
        let Some((name, expression)) = raw.split_once('\t') else {
            errors.push((
                line,
                format!("{file}:{line}: expected name<TAB>expression, found no tab"),
            ));
            continue;
        };
        let name = name.trim();
        if let Err(why) = check_name(name) {
            errors.push((line, format!("{file}:{line}: bad name '{name}': {why}")));
            continue;
        }
        if !names.insert(name.to_string()) {
            errors.push((line, format!("{file}:{line}: duplicate name '{name}'")));
            continue;
        }
        filters.push(FilterLine {
            line,
            name: name.to_string(),
            expression: match sluice_filter::Language::split(expression).0 {
                sluice_filter::Language::Cspf => expression.trim().to_string(),
                _ => expression
                    .split('#')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            },
        });
    }
    (filters, errors)
}

/// A filter set from `(name, filter)` pairs, in order (line numbers are
/// positions from 1); every bad name is reported, with its position.
///
/// ```
/// let ok = sluice_split::filter_pairs([("web", "tcp port 80"), ("dns", "udp port 53")]).unwrap();
/// assert_eq!(ok[1].line, 2);
/// let bad = sluice_split::filter_pairs([("a/b", "ip"), ("x", "ip"), ("x", "ip")]).unwrap_err();
/// assert_eq!(bad.len(), 2);
/// ```
pub fn filter_pairs<N: AsRef<str>, E: AsRef<str>>(
    pairs: impl IntoIterator<Item = (N, E)>,
) -> Result<Vec<FilterLine>, Vec<(usize, String)>> {
    let mut filters = Vec::new();
    let mut errors = Vec::new();
    let mut names = HashSet::new();
    for (i, (name, expression)) in pairs.into_iter().enumerate() {
        let (name, line) = (name.as_ref(), i + 1);
        if let Err(why) = check_name(name) {
            errors.push((line, format!("bad name '{name}': {why}")));
        } else if !names.insert(name.to_string()) {
            errors.push((line, format!("duplicate name '{name}'")));
        } else {
            filters.push(FilterLine {
                line,
                name: name.to_string(),
                expression: expression.as_ref().trim().to_string(),
            });
        }
    }
    if errors.is_empty() {
        Ok(filters)
    } else {
        Err(errors)
    }
}

/// Names become file names: no path separators, no `.`/`..`, no control
/// characters, not too long.
///
/// ```
/// assert!(sluice_split::check_name("customer-17").is_ok());
/// assert_eq!(sluice_split::check_name("../etc"), Err("contains a path separator"));
/// ```
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("empty")
    } else if name == "." || name == ".." {
        Err("not a file name")
    } else if name.contains(['/', '\\']) {
        Err("contains a path separator")
    } else if name.chars().any(char::is_control) {
        Err("contains a control character")
    } else if name.len() > 200 {
        Err("longer than 200 bytes")
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_and_reports_bad_ones() {
        let text =
            "# comment\n\nweb\ttcp port 80 # http\nall\t\nnotab\n\tip\nweb\tudp\na/b\tip\n..\tip\n";
        let (f, e) = parse_filters(text, "f");
        assert_eq!(
            f,
            vec![
                FilterLine {
                    line: 3,
                    name: "web".into(),
                    expression: "tcp port 80".into()
                },
                FilterLine {
                    line: 4,
                    name: "all".into(),
                    expression: String::new()
                },
            ]
        );
        assert_eq!(e.len(), 5, "{e:?}");
        for ((_, msg), line) in e.iter().zip([5, 6, 7, 8, 9]) {
            assert!(msg.starts_with(&format!("f:{line}: ")), "{msg}");
        }
    }

    #[test]
    fn cspf_lines_keep_their_literals() {
        let (f, _) = parse_filters("c\tcspf: pushlit | eq #6\n", "f");
        assert_eq!(f[0].expression, "cspf: pushlit | eq #6");
    }
}
