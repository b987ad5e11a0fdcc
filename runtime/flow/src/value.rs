//! What filters report: a small JSON-like value.

use std::fmt::Write;

/// A result value: numbers, text, lists and maps (keys in order).
///
/// ```
/// use sluice_flow::value::Value;
/// let v = Value::map([("packets", Value::U64(3)), ("name", Value::Str("a\"b".into()))]);
/// assert_eq!(v.to_json(), r#"{"packets": 3, "name": "a\"b"}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// Nothing to report.
    Null,
    /// A count.
    U64(u64),
    /// Text.
    Str(String),
    /// A list.
    List(Vec<Value>),
    /// Named values, in order.
    Map(Vec<(String, Value)>),
}

impl Value {
    /// A map from `(key, value)` pairs.
    ///
    /// ```
    /// let v = sluice_flow::value::Value::map([("a", sluice_flow::value::Value::Null)]);
    /// assert_eq!(v.get("a"), Some(&sluice_flow::value::Value::Null));
    /// ```
    pub fn map<'a>(pairs: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
        Value::Map(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// The value under `key` of a map.
    ///
    /// ```
    /// use sluice_flow::value::Value;
    /// assert_eq!(Value::U64(1).get("x"), None);
    /// ```
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The number, if it is one.
    ///
    /// ```
    /// assert_eq!(sluice_flow::value::Value::U64(7).as_u64(), Some(7));
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::U64(n) => Some(*n),
            _ => None,
        }
    }

    /// As JSON text.
    ///
    /// ```
    /// use sluice_flow::value::Value;
    /// assert_eq!(Value::List(vec![Value::U64(1), Value::Null]).to_json(), "[1, null]");
    /// ```
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        self.write_json(&mut s);
        s
    }

    fn write_json(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::U64(n) => {
                let _ = write!(out, "{n}");
            }
            Value::Str(s) => out.push_str(&json_string(s)),
            Value::List(l) => {
                out.push('[');
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write_json(out);
                }
                out.push(']');
            }
            Value::Map(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&json_string(k));
                    out.push_str(": ");
                    v.write_json(out);
                }
                out.push('}');
            }
        }
    }
}

impl std::fmt::Display for Value {
    /// Plain text: numbers and strings as they are, lists and maps compact.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Null => write!(f, "-"),
            Value::U64(n) => write!(f, "{n}"),
            Value::Str(s) => write!(f, "{s}"),
            Value::List(l) => {
                write!(f, "[")?;
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, "]")
            }
            Value::Map(m) => {
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        write!(f, " ")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                Ok(())
            }
        }
    }
}

/// A JSON string literal.
///
/// ```
/// assert_eq!(sluice_flow::value::json_string("a\nb"), "\"a\\nb\"");
/// ```
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
