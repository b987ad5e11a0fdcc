//! The daemon's status page (`sluice daemon --http`) on the private
//! network, loaded by headless Chromium (Debian's `chromium`): two client
//! processes read flows while frames are sent for a few seconds, and the
//! page must plot each client's packets, list the same counts as
//! `--status --json`, and draw non-blank plots in its screenshot. Another
//! user sees only its own clients; nothing can be changed over HTTP.
//!
//! Chromium must be installed where the live tests must run
//! (`SLUICE_LIVE_REQUIRED`, set by `scripts/test.sh` as root); elsewhere a
//! missing Chromium skips the test with a message.
//! `SLUICE_KEEP_SCREENSHOT=FILE` keeps the screenshot for a person to see.

use super::daemon::{client, daemon, reports, spec, status};
use super::net::{Bg, Net};
use super::{send_slowly, settle, text};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Fetch `url` from inside the capturing namespace with Python's urllib
/// (as `uid` when given, by `setpriv`): the status code and the body.
fn fetch(net: &Net, url: &str, method: &str, uid: Option<u32>) -> (u16, Vec<u8>) {
    const SCRIPT: &str = "import sys, urllib.request, urllib.error\n\
        req = urllib.request.Request(sys.argv[1], method=sys.argv[2], data=b'{}' if sys.argv[2] == 'POST' else None)\n\
        try:\n    r = urllib.request.urlopen(req, timeout=10); code, body = r.status, r.read()\n\
        except urllib.error.HTTPError as e:\n    code, body = e.code, e.read()\n\
        sys.stdout.write(str(code) + '\\n'); sys.stdout.flush(); sys.stdout.buffer.write(body)\n";
    let mut args: Vec<String> = Vec::new();
    if let Some(u) = uid {
        args.extend([
            "setpriv".into(),
            format!("--reuid={u}"),
            format!("--regid={u}"),
            "--clear-groups".into(),
        ]);
    }
    args.extend([
        "/usr/bin/python3".into(),
        "-c".into(),
        SCRIPT.into(),
        url.into(),
        method.into(),
    ]);
    let o = Command::new("ip")
        .args(["netns", "exec", &net.b])
        .args(&args)
        .output()
        .unwrap();
    assert!(o.status.success(), "fetch {url}: {}", text(&o.stderr));
    let nl = o.stdout.iter().position(|b| *b == b'\n').unwrap();
    let code = text(&o.stdout[..nl]).trim().parse().unwrap();
    (code, o.stdout[nl + 1..].to_vec())
}

fn json(net: &Net, url: &str, uid: Option<u32>) -> Value {
    let (code, body) = fetch(net, url, "GET", uid);
    assert_eq!(code, 200, "{url}: {}", text(&body));
    serde_json::from_slice(&body).unwrap()
}

/// Headless Chromium, in the capturing namespace, on `url`, with
/// `what` (`--screenshot=FILE` or `--dump-dom`); its standard output.
fn chromium(net: &Net, url: &str, what: &str) -> Vec<u8> {
    let profile = net.file(&format!("chromium-{}", what.len()));
    let o = Command::new("ip")
        .args(["netns", "exec", &net.b, "chromium"])
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            // Let the page's fetches and drawing finish first.
            "--virtual-time-budget=6000",
            "--window-size=1200,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(what)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(o.status.success(), "chromium {what}: {}", text(&o.stderr));
    o.stdout
}

/// The value of attribute `name` of the element with id `id` in `dom`.
fn attr(dom: &str, id: &str, name: &str) -> String {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id}"));
    let tag_start = dom[..at].rfind('<').unwrap();
    let tag = &dom[tag_start..tag_start + dom[tag_start..].find('>').unwrap()];
    let key = format!("{name}=\"");
    let v = tag
        .find(&key)
        .unwrap_or_else(|| panic!("#{id} has no {name}: {tag}"));
    let rest = &tag[v + key.len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// Pixels of `rgb` (within a small tolerance) in a rectangle of a
/// decoded RGB(A) image, and how many of them are off its bottom edge
/// (where a line at zero lies).
fn pixels(img: &(Vec<u8>, png::OutputInfo), area: [u32; 4], rgb: [u8; 3]) -> (usize, usize) {
    let (buf, info) = img;
    let step = info.color_type.samples();
    let [x0, y0, w, h] = area;
    let (mut all, mut raised) = (0, 0);
    for y in y0..(y0 + h).min(info.height) {
        for x in x0..(x0 + w).min(info.width) {
            let i = y as usize * info.line_size + x as usize * step;
            let p = &buf[i..i + 3];
            if p.iter().zip(rgb).all(|(a, b)| a.abs_diff(b) <= 24) {
                all += 1;
                if y + 4 < y0 + h {
                    raised += 1;
                }
            }
        }
    }
    (all, raised)
}

fn decode(path: &Path) -> (Vec<u8>, png::OutputInfo) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    (buf, info)
}

fn have_chromium() -> bool {
    if Command::new("chromium").arg("--version").output().is_ok() {
        return true;
    }
    if std::env::var_os("SLUICE_LIVE_REQUIRED").is_some() {
        panic!("the status page test needs chromium (scripts/test.sh installs it)");
    }
    eprintln!("SKIPPED daemon-http: chromium is not installed");
    false
}

#[test]
fn the_status_page_plots_each_clients_packets_in_chromium() {
    let Some(net) = Net::new("daemon-http") else {
        return;
    };
    if !have_chromium() {
        return;
    }
    // The page listens on the namespace's own loopback.
    let up = Command::new("ip")
        .args(["-n", &net.b, "link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(up.success());
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &["--http", "127.0.0.1:0"]);
    let said = d.stderr_now();
    let base = said
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in: {said}"))
        .trim_end_matches('/')
        .to_string();
    // Two client processes: two flows, and one.
    let a = client(&sock, &net.file("a"), &[spec("tcp"), spec("")], None);
    let b = client(&sock, &net.file("b"), &[spec("not tcp")], None);
    // Frames for about five seconds, so the history has rates to plot.
    let s1 = send_slowly(&net, "mptcp-v0.pcap", "200", "4");
    let s2 = send_slowly(&net, "various_gre.pcap", "100", "4");
    assert!(s1.wait().status.success() && s2.wait().status.success());
    settle();
    // A sample after the last frame.
    std::thread::sleep(Duration::from_millis(1500));

    // /status.json is --status --json's status.
    let web = json(&net, &format!("{base}/status.json"), None);
    let cli = status(&sock);
    assert_eq!(web["view"], "all");
    let flows = |s: &Value, pid: u64| -> Value {
        s["clients"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["pid"] == pid)
            .map(|c| c["flows"].clone())
            .unwrap_or(Value::Null)
    };
    let clients: Vec<(u64, u64)> = web["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let acc = c["flows"].as_array().unwrap().iter();
            let sum = acc.map(|f| f["accepted"].as_u64().unwrap()).sum();
            (c["pid"].as_u64().unwrap(), sum)
        })
        .collect();
    assert_eq!(clients.len(), 2, "{web}");
    for (pid, accepted) in &clients {
        let strip = |v: Value| -> Value {
            let mut v = v;
            for f in v.as_array_mut().unwrap() {
                f.as_object_mut().unwrap().remove("waiting");
            }
            v
        };
        assert_eq!(
            strip(flows(&web, *pid)),
            strip(flows(&cli, *pid)),
            "pid {pid}"
        );
        assert!(*accepted > 100, "pid {pid}: {accepted} accepted");
    }
    // The history holds the same totals.
    let h = json(&net, &format!("{base}/history.json"), None);
    for c in h["clients"].as_array().unwrap() {
        let want = clients.iter().find(|(p, _)| c["pid"] == *p).unwrap().1;
        assert_eq!(c["accepted"].as_array().unwrap().last().unwrap(), want);
    }

    // The page, rendered.
    let url = format!("{base}/");
    let dom = text(&chromium(&net, &url, "--dump-dom"));
    assert_eq!(
        attr(&dom, "plot-packets", "data-lines"),
        "3",
        "two clients and the interface"
    );
    assert!(
        attr(&dom, "plot-packets", "data-points")
            .parse::<u32>()
            .unwrap()
            >= 6
    );
    for (pid, accepted) in &clients {
        let line = format!(
            "pid {pid} sluice (sluice flow), uid 0: {} accepted",
            fmt_thousands(*accepted)
        );
        assert!(dom.contains(&line), "no '{line}' in the legend: {dom}");
    }
    assert!(dom.contains("The daemon runs no hashcount filters"));
    assert!(
        dom.contains("(iface,vb) -&gt; (BPF,\"tcp\")")
            || dom.contains("(iface,vb) -&gt; (BPF,&quot;tcp&quot;)")
    );
    assert!(!dom.contains("not answering"), "{dom}");
    let area: Vec<u32> = attr(&dom, "plot-packets", "data-area")
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let shot = net.file("page.png");
    chromium(&net, &url, &format!("--screenshot={}", shot.display()));
    if let Some(keep) = std::env::var_os("SLUICE_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
    let img = decode(&shot);
    assert_eq!((img.1.width, img.1.height), (1200, 900));
    let area = [area[0], area[1], area[2], area[3]];
    for (color, rgb) in [("blue", [0x1f, 0x77, 0xb4]), ("red", [0xd6, 0x27, 0x28])] {
        let (all, raised) = pixels(&img, area, rgb);
        assert!(
            all >= 30 && raised >= 15,
            "the {color} client's line: {all} pixels, {raised} above the bottom in {area:?}"
        );
    }
    // Not blank: plenty of the plot is neither white nor grid.
    let (white, _) = pixels(&img, area, [255, 255, 255]);
    assert!(white < (area[2] * area[3]) as usize, "the plot is blank");

    // Another user sees none of root's clients; nothing can be changed.
    let nobody = json(&net, &format!("{base}/status.json"), Some(65534));
    assert_eq!(nobody["view"], "uid 65534");
    assert_eq!(nobody["clients"], serde_json::json!([]));
    assert!(!nobody.to_string().contains("tcp"), "{nobody}");
    let nh = json(&net, &format!("{base}/history.json"), Some(65534));
    assert_eq!(nh["clients"], serde_json::json!([]));
    assert_eq!(nh["flows"], serde_json::json!([]));
    for method in ["POST", "PUT", "DELETE"] {
        let (code, _) = fetch(&net, &format!("{base}/status.json"), method, None);
        assert_eq!(code, 405, "{method}");
    }
    let (code, _) = fetch(&net, &format!("{base}/close"), "GET", None);
    assert_eq!(code, 404);

    let (oa, ob) = (a.interrupt(), b.interrupt());
    assert!(oa.status.success() && ob.status.success());
    // The clients' own reports agree with what the page showed.
    let sums: Vec<u64> = clients.iter().map(|c| c.1).collect();
    for out in [&oa.stdout, &ob.stdout] {
        let got: u64 = reports(out).iter().map(|r| r.2).sum();
        assert!(sums.contains(&got), "{got} accepted, the page: {sums:?}");
    }
    let o = d.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// `1234567` as `1,234,567` (the page's `toLocaleString('en-US')`).
fn fmt_thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A non-loopback address needs `--http-any`: refused before anything
/// is captured, with one line saying so.
#[test]
fn a_page_beyond_loopback_needs_http_any() {
    let Some(net) = Net::new("daemon-http-any") else {
        return;
    };
    let sock = net.file("d.sock");
    let o = net
        .sluice(&[
            "daemon",
            "-i",
            "vb",
            "--socket",
            sock.to_str().unwrap(),
            "--http",
            "10.231.0.2:0",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("--http-any"), "{err}");
    assert!(!sock.exists());
    let mut d = Bg::start(net.sluice(&[
        "daemon",
        "-i",
        "vb",
        "--socket",
        sock.to_str().unwrap(),
        "--http",
        "10.231.0.2:0",
        "--http-any",
    ]));
    d.listening();
    assert!(d.stderr_now().contains("status page at http://10.231.0.2:"));
    assert!(d.interrupt().status.success());
}
