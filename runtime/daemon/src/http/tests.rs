//! The status server on a loopback port, with a board filled by hand:
//! what it serves, what it refuses, and that nothing a request says
//! changes what it serves.

use super::*;
use serde_json::json;
use std::io::{Read, Write};

fn server() -> (Http, Arc<Board>) {
    let board = Board::new();
    board.set_status(json!({
        "daemon": {"pid": 1, "clients": 2},
        "interfaces": [{"name": "eth0"}],
        "clients": [{"client": 1, "uid": 0, "flows": []}, {"client": 2, "uid": 4242, "flows": []}],
    }));
    let client = ClientPoint {
        id: 1,
        pid: 77,
        uid: 0,
        command: "tcpdump",
        name: "t",
    };
    let flow = FlowPoint {
        id: 3,
        client: 1,
        spec: "(iface,eth0)",
        interface: "eth0",
        counts: Counts {
            accepted: 9,
            read: 8,
            dropped: 1,
        },
    };
    board.add_sample(&Sample {
        interfaces: vec![IfacePoint {
            name: "eth0",
            received: 10,
            dropped_by_kernel: 0,
            delivered: 9,
        }],
        clients: vec![client],
        flows: vec![flow],
    });
    (
        Http::start("127.0.0.1:0", false, board.clone()).unwrap(),
        board,
    )
}

/// Send raw bytes, read the whole answer: (status line, headers, body).
fn raw(http: &Http, request: &[u8]) -> (String, String, Vec<u8>) {
    let mut s = TcpStream::connect(http.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete answer");
    let head = String::from_utf8(out[..end].to_vec()).unwrap();
    let (line, headers) = head.split_once("\r\n").unwrap_or((&head, ""));
    (
        line.to_string(),
        headers.to_string(),
        out[end + 4..].to_vec(),
    )
}

fn get(http: &Http, path: &str) -> (String, String, Vec<u8>) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", http.local_addr());
    raw(http, req.as_bytes())
}

#[test]
fn the_page_and_its_data_are_served() {
    let (http, _board) = server();
    let (line, headers, body) = get(&http, "/");
    assert_eq!(line, "HTTP/1.1 200 OK");
    assert!(headers.contains("Content-Type: text/html"), "{headers}");
    assert!(headers.contains("Content-Security-Policy: default-src 'none'"));
    let page = String::from_utf8(body).unwrap();
    assert!(page.contains("<canvas") && page.contains("/sluice.js"));
    // Nothing from elsewhere.
    assert!(!page.contains("http://") && !page.contains("https://"));
    for p in ["/sluice.js", "/sluice.css"] {
        let (line, _, body) = get(&http, p);
        assert_eq!(line, "HTTP/1.1 200 OK", "{p}");
        // (The SVG namespace is a name, not something fetched.)
        let text = String::from_utf8(body)
            .unwrap()
            .replace("'http://www.w3.org/2000/svg'", "");
        assert!(
            !text.contains("http://") && !text.contains("https://"),
            "{p}"
        );
    }
    let (line, headers, body) = get(&http, "/status.json?x=1");
    assert_eq!(line, "HTTP/1.1 200 OK");
    assert!(headers.contains("application/json"));
    let v: Value = serde_json::from_slice(&body).unwrap();
    // This process's own uid asks: it is the daemon's user, so it sees all.
    assert_eq!(v["view"], "all");
    assert_eq!(v["clients"].as_array().unwrap().len(), 2);
    let (_, _, body) = get(&http, "/history.json");
    let h: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(h["clients"][0]["accepted"], json!([9]));
    assert_eq!(h["clients"][0]["dropped"], json!([1]));
    assert_eq!(h["interfaces"][0]["received"], json!([10]));
    // HEAD: headers only, with the body's length.
    let req = format!("HEAD / HTTP/1.1\r\nHost: {}\r\n\r\n", http.local_addr());
    let (line, headers, body) = raw(&http, req.as_bytes());
    assert_eq!(line, "HTTP/1.1 200 OK");
    assert!(headers.contains(&format!("Content-Length: {}", PAGE.len())));
    assert!(body.is_empty());
    // HTTP/1.0 without a Host.
    let (line, _, _) = raw(&http, b"GET /status.json HTTP/1.0\r\n\r\n");
    assert_eq!(line, "HTTP/1.1 200 OK");
}

#[test]
fn nothing_a_request_says_changes_anything() {
    let (http, board) = server();
    let before = get(&http, "/status.json").2;
    for method in [
        "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
    ] {
        let req = format!(
            "{method} /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{{}}"
        );
        let (line, headers, _) = raw(&http, req.as_bytes());
        assert_eq!(line, "HTTP/1.1 405 Method Not Allowed", "{method}");
        assert!(headers.contains("Allow: GET, HEAD"));
    }
    for (req, want) in [
        (&b"GET /nothing HTTP/1.1\r\n\r\n"[..], "404"),
        (b"GET /../etc/passwd HTTP/1.1\r\n\r\n", "404"),
        (b"GET http://x/ HTTP/1.1\r\n\r\n", "400"),
        (b"GET / HTTP/2.0\r\n\r\n", "505"),
        (b"GET  / HTTP/1.1\r\n\r\n", "400"),
        (b"\xff\xfe\r\n\r\n", "400"),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", "400"),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"),
        // A name that is not an address: refused (DNS rebinding).
        (
            b"GET /status.json HTTP/1.1\r\nHost: evil.example:80\r\n\r\n",
            "421",
        ),
        (
            b"GET /status.json HTTP/1.1\r\nHost: localhost:1\r\n\r\n",
            "200",
        ),
        (
            b"GET /status.json HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
            "200",
        ),
    ] {
        let (line, _, _) = raw(&http, req);
        assert!(
            line.starts_with(&format!("HTTP/1.1 {want}")),
            "{:?}: {line}",
            String::from_utf8_lossy(req)
        );
    }
    let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_REQUEST));
    assert!(raw(&http, long.as_bytes()).0.contains("431"));
    // A request cut short.
    let mut s = TcpStream::connect(http.local_addr()).unwrap();
    s.write_all(b"GET / HT").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    assert_eq!(get(&http, "/status.json").2, before);
    assert_eq!(board.lock().history.samples(), 1);
}

#[test]
fn connections_beyond_the_limit_are_closed_and_the_server_goes_on() {
    let (http, _board) = server();
    let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(http.local_addr()).unwrap())
        .collect();
    // Let the server take them all.
    let start = Instant::now();
    while http.connections() < MAX_CONNECTIONS && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut more = TcpStream::connect(http.local_addr()).unwrap();
    more.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = more.write_all(b"GET / HTTP/1.1\r\n\r\n");
    let mut out = Vec::new();
    let _ = more.read_to_end(&mut out);
    assert!(out.is_empty(), "answered past the limit");
    drop(idle);
    let start = Instant::now();
    loop {
        let mut s = TcpStream::connect(http.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(b"GET /status.json HTTP/1.0\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        if out.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not serving again"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn addresses_beyond_loopback_need_http_any() {
    let board = Board::new();
    let e = Http::start("0.0.0.0:0", false, board.clone()).unwrap_err();
    assert!(e.to_string().contains("--http-any"), "{e}");
    assert!(Http::start("localhost", false, board.clone()).is_err());
    assert!(Http::start("[::ffff:127.0.0.1]:0", false, board.clone()).is_ok());
    let any = Http::start("0.0.0.0:0", true, board).unwrap();
    assert_ne!(any.local_addr().port(), 0);
}

#[test]
fn hosts_are_plain_addresses_or_localhost() {
    for ok in [
        "127.0.0.1",
        "127.0.0.1:80",
        "localhost",
        "LOCALHOST:1",
        "[::1]",
        "[::1]:8080",
    ] {
        assert!(plain_host(ok), "{ok}");
    }
    for bad in [
        "evil.example",
        "127.0.0.1.nip.io",
        "[::1",
        "[x]:1",
        "localhost:x",
        "",
    ] {
        assert!(!plain_host(bad), "{bad}");
    }
}

#[test]
fn views_hide_other_users() {
    let s = json!({"daemon": {}, "clients": [{"uid": 0}, {"uid": 5}, {"uid": 6}]});
    assert_eq!(status_for(&s, View::Uid(5))["clients"], json!([{"uid": 5}]));
    assert_eq!(status_for(&s, View::Interfaces)["clients"], json!([]));
    assert_eq!(
        status_for(&s, View::All)["clients"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn a_stale_status_is_asked_for_and_waited_for() {
    let board = Board::new();
    assert!(board.status_wanted());
    assert!(!board.status_wanted());
    let b = board.clone();
    let control = std::thread::spawn(move || {
        // The control thread's loop: publish when asked.
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if b.status_wanted() {
                b.set_status(json!({"n": 1}));
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    });
    assert_eq!(board.status().as_deref(), Some(&json!({"n": 1})));
    assert!(control.join().unwrap());
}
