//! `sluice daemon --http ADDR`: the daemon's status over HTTP, read-only:
//! `/status.json` (what `sluice daemon --status --json` prints),
//! `/history.json` (the last ten minutes, one sample a second: see
//! [`History`]) and a live page at `/` that plots them (`/sluice.js`,
//! `/sluice.css`: plain files compiled into the daemon, nothing fetched
//! from elsewhere).
//!
//! The rule: nothing a request says changes anything. The server answers
//! `GET` and `HEAD` of those five paths and nothing else; it reads at most
//! [`MAX_REQUEST`] bytes of a request, serves at most [`MAX_CONNECTIONS`]
//! at once, one request per connection, and gives up on a slow peer after
//! a few seconds. It listens on a loopback address unless the operator
//! says `--http-any`. Who asks is taken from the kernel ([`peer_uid`]):
//! root and the daemon's own user see every client, another local user
//! only its own (as with `--status`), and a peer that cannot be
//! identified sees the interfaces only, unless `--http-any` said that
//! whoever reaches the address may see everything. Requests naming a
//! host other than an address or `localhost` are refused unless
//! `--http-any` (a web page elsewhere cannot read the status through a
//! name it points at 127.0.0.1).
//!
//! The server is a few hundred lines over `std::net::TcpListener`, a
//! thread per connection, rather than an HTTP crate: it needs `GET` of
//! five fixed paths and strict limits, both easier to read and bound
//! here than in a general server.
//!
//! The control thread owns the status: it adds a [`Sample`] to the
//! [`Board`] every second, and builds the whole status when a request has
//! asked for one since it last did; requests read the board only.
//!
//! ```no_run
//! use sluice_daemon::http::{Board, Http};
//! let board = Board::new();
//! let http = Http::start("127.0.0.1:8080", false, board.clone())?;
//! println!("http://{}/", http.local_addr());
//! # Ok::<(), sluice_daemon::DaemonError>(())
//! ```

mod history;
mod viewer;

pub use history::{ClientPoint, Counts, FlowPoint, History, IfacePoint, Sample};
pub use viewer::peer_uid;

use crate::DaemonError;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The most bytes of a request read (request line and headers).
pub const MAX_REQUEST: usize = 8192;
/// The most connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 16;
/// How long a peer may take to send its request, or to take the answer.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a status is fresh enough to serve without asking for another.
const FRESH: Duration = Duration::from_secs(1);
/// How long a request waits for the control thread's next status.
const STATUS_WAIT: Duration = Duration::from_secs(2);

const PAGE: &str = include_str!("http/page.html");
const SCRIPT: &str = include_str!("http/page.js");
const STYLE: &str = include_str!("http/page.css");

/// What the control thread publishes and the server reads.
#[derive(Debug)]
pub struct Board {
    state: Mutex<State>,
    published: Condvar,
    /// A request wants a status newer than the one there.
    wanted: AtomicBool,
    started: Instant,
}

#[derive(Debug, Default)]
struct State {
    status: Option<(Arc<Value>, Instant)>,
    last_sample: Option<Instant>,
    history: History,
}

impl Board {
    /// An empty board.
    ///
    /// ```
    /// let b = sluice_daemon::http::Board::new();
    /// assert!(b.sample_due());
    /// ```
    pub fn new() -> Arc<Board> {
        Arc::new(Board {
            state: Mutex::default(),
            published: Condvar::new(),
            wanted: AtomicBool::new(true),
            started: Instant::now(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a second has passed since the last sample (control side).
    pub fn sample_due(&self) -> bool {
        self.lock()
            .last_sample
            .map_or(true, |t| t.elapsed() >= Duration::from_secs(1))
    }

    /// Add a sample (control side).
    ///
    /// ```
    /// let b = sluice_daemon::http::Board::new();
    /// b.add_sample(&sluice_daemon::http::Sample::default());
    /// assert!(!b.sample_due());
    /// ```
    pub fn add_sample(&self, s: &Sample<'_>) {
        let mut st = self.lock();
        st.last_sample = Some(Instant::now());
        let at = self.started.elapsed().as_secs_f64();
        st.history.add(at, s);
    }

    /// Whether a request asked for a new status since the last one
    /// (control side; the flag is cleared).
    pub fn status_wanted(&self) -> bool {
        self.wanted.swap(false, Ordering::AcqRel)
    }

    /// Publish the whole status (control side).
    pub fn set_status(&self, status: Value) {
        self.lock().status = Some((Arc::new(status), Instant::now()));
        self.published.notify_all();
    }

    /// The status, asking the control thread for a new one and waiting
    /// for it a moment when the one there is not fresh.
    fn status(&self) -> Option<Arc<Value>> {
        let st = self.lock();
        let fresh = |st: &State| {
            st.status
                .as_ref()
                .filter(|(_, at)| at.elapsed() < FRESH)
                .map(|(s, _)| s.clone())
        };
        if let Some(s) = fresh(&st) {
            return Some(s);
        }
        self.wanted.store(true, Ordering::Release);
        let (st, _) = self
            .published
            .wait_timeout_while(st, STATUS_WAIT, |st| fresh(st).is_none())
            .unwrap_or_else(|e| e.into_inner());
        st.status.as_ref().map(|(s, _)| s.clone())
    }

    fn history(&self, view: View) -> Value {
        let st = self.lock();
        match view {
            View::All => st.history.to_json(&|_| true, true),
            View::Uid(u) => st.history.to_json(&|x| x == u, false),
            View::Interfaces => st.history.to_json(&|_| false, false),
        }
    }
}

/// What a viewer may see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    /// Every client.
    All,
    /// This user's clients.
    Uid(u32),
    /// The daemon and its interfaces only.
    Interfaces,
}

impl View {
    fn name(self) -> String {
        match self {
            View::All => "all".into(),
            View::Uid(u) => format!("uid {u}"),
            View::Interfaces => "interfaces".into(),
        }
    }
}

/// The status as `view` may see it, with the view named.
fn status_for(status: &Value, view: View) -> Value {
    let mut s = status.clone();
    if let Some(clients) = s.get_mut("clients").and_then(|c| c.as_array_mut()) {
        clients.retain(|c| match view {
            View::All => true,
            View::Uid(u) => c["uid"].as_u64() == Some(u64::from(u)),
            View::Interfaces => false,
        });
    }
    if let Some(o) = s.as_object_mut() {
        o.insert("view".into(), Value::String(view.name()));
    }
    s
}

/// The running server (see the module documentation); it stops when
/// dropped.
#[derive(Debug)]
pub struct Http {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    active: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Http {
    /// Listen on `addr` (`IP:PORT`; port 0 picks one) and serve `board`.
    /// A non-loopback address needs `any`.
    pub fn start(addr: &str, any: bool, board: Arc<Board>) -> Result<Http, DaemonError> {
        let parsed: SocketAddr = addr.parse().map_err(|_| {
            DaemonError::Config(format!(
                "--http {addr}: not an address and port (e.g. 127.0.0.1:8080 or [::1]:8080)"
            ))
        })?;
        if !parsed.ip().to_canonical().is_loopback() && !any {
            return Err(DaemonError::Config(format!(
                "--http {addr}: not a loopback address; the status page shows every client's filters and counts, so serving it beyond this host takes --http-any"
            )));
        }
        let listener = TcpListener::bind(parsed)
            .map_err(|e| DaemonError::Config(format!("--http {addr}: {e}")))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new(AtomicUsize::new(0));
        let serving = Server {
            board,
            any,
            me: rustix::process::getuid().as_raw(),
            active: active.clone(),
        };
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || serving.accept_loop(listener, &flag))?;
        Ok(Http {
            addr: local,
            stop,
            active,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections being served now.
    pub fn connections(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What every connection's thread shares.
#[derive(Clone)]
struct Server {
    board: Arc<Board>,
    any: bool,
    /// The daemon's own user.
    me: u32,
    active: Arc<AtomicUsize>,
}

/// One response.
struct Response {
    status: &'static str,
    kind: &'static str,
    body: Vec<u8>,
    extra: &'static str,
}

impl Response {
    fn new(status: &'static str, kind: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            kind,
            body: body.into(),
            extra: "",
        }
    }

    fn text(status: &'static str, message: &str) -> Response {
        Response::new(status, "text/plain; charset=utf-8", format!("{message}\n"))
    }

    fn json(v: &Value) -> Response {
        let mut body = serde_json::to_vec(v).unwrap_or_default();
        body.push(b'\n');
        Response::new("200 OK", "application/json", body)
    }
}

/// A request as far as the server cares.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    head: bool,
    path: String,
    host: Option<String>,
}

/// Read a request's line and headers (at most [`MAX_REQUEST`] bytes).
fn read_head(s: &mut impl Read) -> Result<Vec<u8>, Response> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(end);
            return Ok(buf);
        }
        if buf.len() >= MAX_REQUEST {
            return Err(Response::text(
                "431 Request Header Fields Too Large",
                "request too long",
            ));
        }
        let n = s
            .read(&mut chunk)
            .map_err(|_| Response::text("408 Request Timeout", "request not received"))?;
        if n == 0 {
            return Err(Response::text("400 Bad Request", "request cut short"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A request's line and headers as a [`Request`], or the error answer.
fn parse(head: &[u8]) -> Result<Request, Response> {
    let bad = || Response::text("400 Bad Request", "not an HTTP/1 request");
    let text = std::str::from_utf8(head).map_err(|_| bad())?;
    let mut lines = text.split("\r\n");
    let line = lines.next().ok_or_else(bad)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Response::text(
            "505 HTTP Version Not Supported",
            "HTTP/1 only",
        ));
    }
    let head = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            let mut r = Response::text(
                "405 Method Not Allowed",
                "the status page is read-only: GET and HEAD only",
            );
            r.extra = "Allow: GET, HEAD\r\n";
            return Err(r);
        }
    };
    if !target.starts_with('/') {
        return Err(bad());
    }
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    let mut host = None;
    for h in lines {
        let (name, value) = h.split_once(':').ok_or_else(bad)?;
        if name.eq_ignore_ascii_case("host") {
            if host.is_some() {
                return Err(bad());
            }
            host = Some(value.trim().to_string());
        }
    }
    Ok(Request { head, path, host })
}

/// Whether a `Host` header names this server by address or `localhost`
/// (not by a name someone else's DNS could point here).
fn plain_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, port)) => {
                return ip.parse::<std::net::Ipv6Addr>().is_ok()
                    && (port.is_empty()
                        || port
                            .strip_prefix(':')
                            .is_some_and(|p| p.parse::<u16>().is_ok()));
            }
            None => return false,
        },
        None => match host.rsplit_once(':') {
            Some((n, p)) if p.parse::<u16>().is_ok() => n,
            Some(_) => return false,
            None => host,
        },
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok()
}

impl Server {
    fn accept_loop(&self, listener: TcpListener, stop: &AtomicBool) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        // Wait in poll (not accept) so that a stop is seen within a
        // moment whatever the network lets through.
        let tick = Timespec {
            tv_sec: 0,
            tv_nsec: 200_000_000,
        };
        while !stop.load(Ordering::Acquire) {
            let mut fds = [PollFd::new(&listener, PollFlags::IN)];
            if !matches!(poll(&mut fds, Some(&tick)), Ok(n) if n > 0) {
                continue;
            }
            let stream = match listener.accept() {
                Ok((s, _)) if s.set_nonblocking(false).is_ok() => s,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => {
                    // Out of descriptors or the like: do not spin on it.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if self.active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                self.active.fetch_sub(1, Ordering::AcqRel);
                continue; // closed unanswered
            }
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("http peer".into())
                .spawn(move || {
                    me.serve(stream);
                    me.active.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                self.active.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Who the peer is allowed to be.
    fn view(&self, s: &TcpStream) -> View {
        let uid = match (s.peer_addr(), s.local_addr()) {
            (Ok(p), Ok(l)) => peer_uid(p, l),
            _ => None,
        };
        match uid {
            Some(u) if u == 0 || u == self.me => View::All,
            Some(u) => View::Uid(u),
            None if self.any => View::All,
            None => View::Interfaces,
        }
    }

    fn serve(&self, mut s: TcpStream) {
        let _ = s.set_read_timeout(Some(PEER_TIMEOUT));
        let _ = s.set_write_timeout(Some(PEER_TIMEOUT));
        let view = self.view(&s);
        let (r, head) = match read_head(&mut s).and_then(|h| parse(&h)) {
            Ok(req) => (self.answer(&req, view), req.head),
            Err(r) => (r, false),
        };
        let _ = respond(&mut s, &r, head);
        let _ = s.shutdown(std::net::Shutdown::Both);
    }

    fn answer(&self, req: &Request, view: View) -> Response {
        if !self.any && !req.host.as_deref().map_or(true, plain_host) {
            return Response::text(
                "421 Misdirected Request",
                "ask for the status page by address (127.0.0.1, [::1]) or localhost",
            );
        }
        match req.path.as_str() {
            "/" | "/index.html" => Response::new("200 OK", "text/html; charset=utf-8", PAGE),
            "/sluice.js" => Response::new("200 OK", "text/javascript; charset=utf-8", SCRIPT),
            "/sluice.css" => Response::new("200 OK", "text/css; charset=utf-8", STYLE),
            "/status.json" => match self.board.status() {
                Some(s) => Response::json(&status_for(&s, view)),
                None => Response::text(
                    "503 Service Unavailable",
                    "the daemon has not published its status yet",
                ),
            },
            "/history.json" => {
                let mut h = self.board.history(view);
                if let Some(o) = h.as_object_mut() {
                    o.insert("view".into(), Value::String(view.name()));
                }
                Response::json(&h)
            }
            _ => Response::text("404 Not Found", "no such page"),
        }
    }
}

/// Write a response (its headers only for `HEAD`).
fn respond(s: &mut impl Write, r: &Response, head: bool) -> std::io::Result<()> {
    let headers = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n\
         Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n\
         {}Connection: close\r\n\r\n",
        r.status,
        r.kind,
        r.body.len(),
        r.extra
    );
    s.write_all(headers.as_bytes())?;
    if !head {
        s.write_all(&r.body)?;
    }
    s.flush()
}

#[cfg(test)]
mod tests;
