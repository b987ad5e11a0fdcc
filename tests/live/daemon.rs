//! The sluice daemon on the private network: clients in other processes
//! keep exactly the frames libpcap keeps with their filters, a client
//! killed halfway changes nothing for the others and gives its memory
//! back, the policy refuses another user by its line, endpoints get each
//! frame once by priority, and garbage, idle and short-lived clients do
//! not take the daemon down or make it grow.

use super::net::{frames, libpcap_filter, Bg, Net};
use super::{replay_all, settle, tcpdump, text};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// `sluice daemon -i vb --socket SOCK EXTRA...` in the capturing namespace.
pub(super) fn daemon(net: &Net, sock: &Path, extra: &[&str]) -> Bg {
    let mut args = vec!["daemon", "-i", "vb", "--socket", sock.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut bg = Bg::start(net.sluice(&args));
    bg.listening();
    bg
}

/// A daemon on `vb` under a policy file of `rules`, with `extra`
/// options: the daemon, its socket and the policy's path.
pub(super) fn daemon_with_policy(net: &Net, rules: &str, extra: &[&str]) -> (Bg, PathBuf, PathBuf) {
    let policy = net.file("daemon.policy");
    std::fs::write(&policy, rules).unwrap();
    let sock = net.file("d.sock");
    let mut args = vec!["--policy", policy.to_str().unwrap()];
    args.extend_from_slice(extra);
    (daemon(net, &sock, &args), sock, policy)
}

/// `sluice flow --daemon SOCK -w DIR SPECS...` (a client process),
/// listening; `setpriv` runs it as another user when `uid` is given.
pub(super) fn client(sock: &Path, dir: &Path, specs: &[String], uid: Option<u32>) -> Bg {
    std::fs::create_dir_all(dir).unwrap();
    let mut args: Vec<String> = vec![
        "flow".into(),
        "--daemon".into(),
        sock.to_str().unwrap().into(),
        "--json".into(),
        "-w".into(),
        dir.to_str().unwrap().into(),
    ];
    args.extend(specs.iter().cloned());
    let cmd = match uid {
        None => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
            c.args(&args);
            c
        }
        Some(u) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={u}"),
                &format!("--regid={u}"),
                "--clear-groups",
                env!("CARGO_BIN_EXE_sluice"),
            ])
            .args(&args);
            c
        }
    };
    let mut bg = Bg::start(cmd);
    bg.listening();
    bg
}

pub(super) fn spec(expr: &str) -> String {
    match expr {
        "" => "(iface,vb)".into(),
        e => format!("(iface,vb) -> (BPF,\"{e}\")"),
    }
}

/// The daemon's status as JSON.
pub(super) fn status(sock: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "daemon",
            "--status",
            "--json",
            "--socket",
            sock.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The daemon's status once `done` holds of it (it closes a gone
/// client's flows when it next looks), or after five seconds, whichever
/// comes first.
pub(super) fn status_when(
    sock: &Path,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    settled(|| status(sock), done)
}

/// `look()` again and again until `done` holds of what it saw, or five
/// seconds have passed: the last look.
fn settled<T>(mut look: impl FnMut() -> T, done: impl Fn(&T) -> bool) -> T {
    let start = std::time::Instant::now();
    loop {
        let seen = look();
        if done(&seen) || start.elapsed() > Duration::from_secs(5) {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each flow's report from a client's JSON: (packets, lost, accepted).
pub(super) fn reports(out: &[u8]) -> Vec<(u64, u64, u64)> {
    let v: serde_json::Value = serde_json::from_slice(out).unwrap();
    v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["packets"].as_u64().unwrap(),
                f["lost"].as_u64().unwrap(),
                f["accepted"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// What a process's descriptors point at, one per line, but for the
/// memory files of its code arena: the merged classifier keeps compiled
/// functions for filters to come (a bounded cache shared by every
/// client), so they are not any one client's.
fn fd_targets(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut v: Vec<String> = dir
        .flatten()
        .map(|e| {
            let t = std::fs::read_link(e.path()).unwrap_or_default();
            format!("{} -> {}", e.file_name().to_string_lossy(), t.display())
        })
        .filter(|l| !l.contains("/memfd:sluice-code"))
        .collect();
    v.sort();
    v
}

/// Descriptors a process has open (as [`fd_targets`] counts them).
fn fds(pid: u32) -> usize {
    fd_targets(pid).len()
}

/// Wait up to five seconds for a process to have at most `most`
/// descriptors (it closes a gone client's when it next looks): how many
/// it has then, and what they are.
fn fds_settle(pid: u32, most: usize) -> (usize, String) {
    let now = settled(|| fd_targets(pid), |t| t.len() <= most);
    (now.len(), now.join("\n"))
}

/// A process's resident memory in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The daemon's pid (the namespace's `ip netns exec` execs it).
fn daemon_pid(sock: &Path) -> u32 {
    status(sock)["daemon"]["pid"].as_u64().unwrap() as u32
}

#[test]
fn daemon_clients_keep_exactly_what_libpcap_keeps() {
    let Some(net) = Net::new("daemon-monitor") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let exprs = ["tcp", "vlan and ip", "udp or icmp", "not arp", ""];
    let specs: Vec<String> = exprs.iter().map(|e| spec(e)).collect();
    // Two client processes: one with four flows, one with the rest and
    // a repeat, so a group holds several readers of one buffer.
    let one = client(&sock, &net.file("one"), &specs[..4], None);
    let two = client(
        &sock,
        &net.file("two"),
        &[specs[4].clone(), specs[0].clone()],
        None,
    );
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let sent = replay_all(&net);
    settle();
    assert!(dump.interrupt().status.success());
    assert_eq!(frames(&all).len() as u64, sent);
    let s = status(&sock);
    assert_eq!(s["clients"].as_array().unwrap().len(), 3, "{s}");
    let (o1, o2) = (one.interrupt(), two.interrupt());
    assert!(
        o1.status.success() && o2.status.success(),
        "{}",
        text(&o1.stderr)
    );
    let check = |dir: &str, i: usize, expr: &str, r: (u64, u64, u64)| {
        let got = frames(&net.file(&format!("{dir}/flow{}.pcap", i + 1)));
        let want = libpcap_filter(&all, expr, &net.file(&format!("{dir}-w{i}.pcap")));
        assert!(!want.is_empty(), "'{expr}': the captures exercise it");
        assert_eq!(got, want, "'{expr}' ({dir})");
        assert_eq!(r, (got.len() as u64, 0, got.len() as u64), "'{expr}'");
    };
    for (i, r) in reports(&o1.stdout).into_iter().enumerate() {
        check("one", i, exprs[i], r);
    }
    for (i, r) in reports(&o2.stdout).into_iter().enumerate() {
        check("two", i, [exprs[4], exprs[0]][i], r);
    }
    let o = d.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn a_killed_client_changes_nothing_for_the_others() {
    let Some(net) = Net::new("daemon-kill") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let pid = daemon_pid(&sock);
    let idle = fd_targets(pid);
    let keep = client(&sock, &net.file("keep"), &[spec("tcp")], None);
    let doomed = client(&sock, &net.file("doomed"), &[spec(""), spec("udp")], None);
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let mut sent = net.replay(&super::corpus(super::CAPTURES[3]));
    doomed.signal("KILL");
    let _ = doomed.wait();
    sent += replay_all(&net);
    settle();
    assert!(dump.interrupt().status.success());
    assert_eq!(frames(&all).len() as u64, sent);
    let o = keep.interrupt();
    assert!(o.status.success());
    let want = libpcap_filter(&all, "tcp", &net.file("w.pcap"));
    assert_eq!(frames(&net.file("keep/flow1.pcap")), want);
    assert_eq!(
        reports(&o.stdout)[0],
        (want.len() as u64, 0, want.len() as u64)
    );
    // The killed client's flows are closed and their buffers released.
    let s = status_when(&sock, |s| {
        s["clients"].as_array().map(Vec::len) == Some(1) && s["interfaces"][0]["filters"] == 0
    });
    let clients = s["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1, "only the status client is left: {s}");
    assert_eq!(s["interfaces"][0]["filters"], 0, "{s}");
    // At most the status client's socket, if the daemon has not yet seen
    // it go, beside what it had before any client came.
    let (n, now) = fds_settle(pid, idle.len() + 1);
    assert!(
        n <= idle.len() + 1,
        "{n} descriptors, {} idle\nidle:\n{}\nnow:\n{now}",
        idle.len(),
        idle.join("\n")
    );
    assert!(d.interrupt().status.success());
}

#[test]
fn another_user_is_refused_by_the_policy_line_that_names_it() {
    let Some(net) = Net::new("daemon-policy") else {
        return;
    };
    let (d, sock, policy) = daemon_with_policy(
        &net,
        "# who may capture on vb\nallow uid=0 source=iface:vb class=bpf\ndeny uid=65534 source=iface:vb\n",
        &["--socket-mode", "0666"],
    );
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_sluice"),
            "flow",
            "--daemon",
            sock.to_str().unwrap(),
            &spec("tcp"),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("(policy {}:3)", policy.display())),
        "{err}"
    );
    // Root is allowed by line 2.
    let ok = client(&sock, &net.file("root"), &[spec("tcp")], None);
    assert!(ok.interrupt().status.success());
    let s = status(&sock);
    assert_eq!(s["daemon"]["refused"], 1, "{s}");
    assert!(d.interrupt().status.success());
}

#[test]
fn endpoints_get_each_frame_once_by_priority() {
    let Some(net) = Net::new("daemon-endpoints") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &["--first-match"]);
    // Priorities come from the order of opening here (older first) and
    // from the request: the flow command opens every flow at priority 0,
    // so the first opened claims first.
    let a = client(&sock, &net.file("a"), &[spec("tcp")], None);
    let b = client(&sock, &net.file("b"), &[spec("ip")], None);
    let c = client(&sock, &net.file("c"), &[spec("")], None);
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let sent = replay_all(&net);
    settle();
    assert!(dump.interrupt().status.success());
    for x in [a, b, c] {
        assert!(x.interrupt().status.success());
    }
    let got = |n: &str| frames(&net.file(&format!("{n}/flow1.pcap")));
    let want = |e: &str, n: &str| libpcap_filter(&all, e, &net.file(n));
    assert_eq!(got("a"), want("tcp", "wa.pcap"));
    assert_eq!(got("b"), want("ip and not tcp", "wb.pcap"));
    assert_eq!(got("c"), want("not ip and not tcp", "wc.pcap"));
    assert_eq!(
        (got("a").len() + got("b").len() + got("c").len()) as u64,
        sent,
        "every frame to exactly one"
    );
    assert!(d.interrupt().status.success());
}

#[test]
fn garbage_idle_and_passing_clients_do_not_take_the_daemon_down() {
    use sluice_shm::Channel;
    let Some(net) = Net::new("daemon-garbage") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let pid = daemon_pid(&sock);
    let reply = |c: &Channel| -> String {
        assert!(c.readable(Some(Duration::from_secs(5))).unwrap());
        String::from_utf8_lossy(&c.recv().unwrap().unwrap().bytes).into_owned()
    };
    // Garbage, truncated, oversized, out of order.
    let c = Channel::connect(&sock).unwrap();
    for bad in [
        &b"\x00\xff garbage"[..],
        br#"{"op":"hello","version":1"#,
        br#"{"op":"open","spec":"(iface,vb)"}"#,
        br#"{"op":"hello","version":99}"#,
    ] {
        c.send(bad, &[]).unwrap();
        assert!(reply(&c).contains("\"reply\":\"error\""));
    }
    c.send(br#"{"op":"hello","version":1,"name":"t"}"#, &[])
        .unwrap();
    assert!(reply(&c).contains("\"reply\":\"hello\""));
    for bad in [
        r#"{"op":"open","spec":"(file,/etc/shadow)"}"#,
        r#"{"op":"open","spec":"(iface,vb) -> (BPF,\"@/etc/shadow\")"}"#,
        r#"{"op":"open","spec":"(iface,vb) -> (BPF,\"tcp port\")"}"#,
        r#"{"op":"open","spec":"(iface,nonexistent0)"}"#,
        r#"{"op":"close","flow":77}"#,
    ] {
        c.send(bad.as_bytes(), &[]).unwrap();
        let r = reply(&c);
        assert!(
            r.contains("\"reply\":\"error\"") && !r.contains("root:"),
            "{r}"
        );
    }
    // Oversized: sent raw, past the limit.
    let big = format!(r#"{{"op":"status","x":"{}"}}"#, "a".repeat(70_000));
    let _ = rustix::net::send(&c, big.as_bytes(), rustix::net::SendFlags::empty());
    assert!(reply(&c).contains("\"reply\":\"error\""));
    // A client that asks and never reads: let go, not waited for.
    let idle = Channel::connect(&sock).unwrap();
    for _ in 0..2000 {
        if idle.send_now(br#"{"op":"status"}"#, &[]).is_err() {
            break;
        }
    }
    // 1,000 clients come, half of them with a flow, all at once, then go.
    let before = (fds(pid), rss_kib(pid));
    let mut crowd = Vec::new();
    for i in 0..1000 {
        let c = Channel::connect(&sock).unwrap();
        c.send(br#"{"op":"hello","version":1}"#, &[]).unwrap();
        reply(&c);
        if i % 2 == 0 {
            c.send(
                br#"{"op":"open","spec":"(iface,vb) -> (BPF,\"tcp\")"}"#,
                &[],
            )
            .unwrap();
            assert!(c.readable(Some(Duration::from_secs(5))).unwrap());
            let got = c.recv().unwrap().unwrap();
            assert_eq!(got.fds.len(), 3);
        }
        crowd.push(c);
    }
    // A status of 1,000 clients is longer than a message: it comes in a
    // memory file beside one.
    let s = status(&sock);
    assert!(
        s["clients"].as_array().unwrap().len() >= 1000,
        "{}",
        s["daemon"]
    );
    drop(crowd);
    drop(idle);
    let (n, now) = fds_settle(pid, before.0 + 2);
    let after = (n, rss_kib(pid));
    assert!(
        after.0 <= before.0 + 2,
        "descriptors {before:?} -> {after:?}:\n{now}"
    );
    assert!(
        after.1 < before.1 + 64 * 1024,
        "RSS {before:?} -> {after:?} KiB"
    );
    // Still answering, with the garbage counted.
    let s = status(&sock);
    assert!(s["daemon"]["bad_requests"].as_u64().unwrap() >= 3, "{s}");
    assert_eq!(s["interfaces"][0]["filters"], 0);
    let o = d.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
}
