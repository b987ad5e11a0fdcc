//! Fuzzes the daemon's message parsers: any bytes a client sends must
//! give a request or a refusal that quotes nothing of them (only one of
//! the parser's fixed messages), never a panic; a request parsed, written
//! again and parsed again is the same request. Replies (the client side)
//! likewise parse or fail, and round-trip when they parse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sluice_daemon::proto::{parse_reply, parse_request, request_bytes, Reply, MAX_NAME, MAX_SPEC};

fuzz_target!(|data: &[u8]| {
    match parse_request(data) {
        Ok(r) => {
            let again = parse_request(&request_bytes(&r)).expect("a request written again parses");
            assert_eq!(again, r);
        }
        Err(e) => {
            let m = e.0.as_str();
            assert!(
                (m.starts_with("not a request (") && m.contains(" error at line "))
                    || m == "message too long"
                    || m == format!("name longer than {MAX_NAME} bytes")
                    || m == format!("flow specification longer than {MAX_SPEC} bytes"),
                "a refusal that is not one of the fixed messages: {m}"
            );
        }
    }
    if let Ok(r) = parse_reply(data) {
        let again = parse_reply(&r.to_bytes()).expect("a reply written again parses");
        match (&r, &again) {
            // serde_json reads long decimal numbers to within a unit in
            // the last place, not always exactly: the status is the same
            // up to that.
            (Reply::Status { status: a }, Reply::Status { status: b }) => {
                assert!(close(a, b), "{a} != {b}")
            }
            _ => assert_eq!(again, r),
        }
    }
});

/// The same JSON, numbers equal to within a few units in the last place.
fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => {
                x == y || (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
            }
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
        }
        _ => a == b,
    }
}
