//! Operating the daemon: the systemd unit in `packaging/` is one systemd
//! accepts without a warning, and its command line (with the example
//! policy) runs the daemon and reloads it as `systemctl reload` would;
//! SIGHUP reads the policy again without dropping the flows it
//! authorised, and a policy that does not parse keeps the one in force.

use super::daemon::{client, daemon_with_policy, spec};
use super::net::{frames, libpcap_filter, Bg, Net};
use super::{corpus, settle, tcpdump, text};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A file of the repository.
fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A unit file's settings: (section, key) to values, in order.
fn unit(text: &str) -> BTreeMap<(String, String), Vec<String>> {
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_string();
            continue;
        }
        let (k, v) = line.split_once('=').expect("a key=value line");
        out.entry((section.clone(), k.trim().to_string()))
            .or_default()
            .push(v.trim().to_string());
    }
    out
}

fn one(u: &BTreeMap<(String, String), Vec<String>>, section: &str, key: &str) -> String {
    let v = &u[&(section.to_string(), key.to_string())];
    assert_eq!(v.len(), 1, "[{section}] {key}");
    v[0].clone()
}

/// systemd-analyze, required where the live tests are.
fn have_systemd_analyze() -> bool {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok()
    {
        return true;
    }
    if std::env::var_os("SLUICE_LIVE_REQUIRED").is_some() {
        panic!("systemd-analyze is missing (scripts/test.sh installs systemd)");
    }
    eprintln!("SKIPPED unit check: systemd-analyze is not installed");
    false
}

#[test]
fn the_unit_file_is_one_systemd_accepts_without_a_warning() {
    let file = std::fs::read_to_string(repo("packaging/sluice-daemon.service")).unwrap();
    let u = unit(&file);
    // What the unit must say (docs/daemon.md explains each).
    let exec = one(&u, "Service", "ExecStart");
    assert!(exec.starts_with("/usr/bin/sluice daemon "), "{exec}");
    assert!(exec.contains("--socket /run/sluice/"), "{exec}");
    assert!(
        exec.contains("--policy /etc/sluice/daemon.policy"),
        "{exec}"
    );
    assert_eq!(one(&u, "Service", "ExecReload"), "/bin/kill -HUP $MAINPID");
    assert_eq!(one(&u, "Service", "Restart"), "on-failure");
    assert_eq!(one(&u, "Service", "RuntimeDirectory"), "sluice");
    assert_eq!(one(&u, "Service", "ProtectSystem"), "strict");
    assert_eq!(one(&u, "Service", "PrivateTmp"), "yes");
    assert_eq!(one(&u, "Service", "NoNewPrivileges"), "yes");
    for key in ["CapabilityBoundingSet", "AmbientCapabilities"] {
        let mut caps: Vec<String> = one(&u, "Service", key)
            .split_whitespace()
            .map(String::from)
            .collect();
        caps.sort();
        assert_eq!(caps, ["CAP_NET_ADMIN", "CAP_NET_RAW"], "{key}");
    }
    assert!(!u.contains_key(&("Service".into(), "MemoryDenyWriteExecute".into())));
    // The user and group it names are made by the sysusers file.
    let sysusers = std::fs::read_to_string(repo("packaging/sluice-daemon.sysusers")).unwrap();
    assert!(sysusers.lines().any(|l| l.starts_with("u sluice ")));
    assert_eq!(one(&u, "Service", "User"), "sluice");
    if !have_systemd_analyze() {
        return;
    }
    // systemd's own check, on a copy whose program exists here.
    let dir = std::env::temp_dir().join(format!("sluice-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("sluice-daemon.service");
    std::fs::write(
        &copy,
        file.replace("/usr/bin/sluice", env!("CARGO_BIN_EXE_sluice")),
    )
    .unwrap();
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .unwrap();
    let said = text(&o.stderr) + &text(&o.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success() && said.trim().is_empty(), "{said}");
}

/// The unit's ExecStart as arguments for the built program: the socket
/// in `dir`, the example policy, `SLUICE_DAEMON_ARGS` as `-i vb`.
fn exec_start(dir: &Path) -> (Vec<String>, PathBuf) {
    let text = std::fs::read_to_string(repo("packaging/sluice-daemon.service")).unwrap();
    let exec = one(&unit(&text), "Service", "ExecStart");
    let sock = dir.join("sluice.sock");
    let mut args = Vec::new();
    let mut words = exec.split_whitespace().skip(1);
    while let Some(w) = words.next() {
        match w {
            "--socket" => {
                words.next();
                args.extend(["--socket".into(), sock.display().to_string()]);
            }
            "--policy" => {
                words.next();
                args.extend([
                    "--policy".into(),
                    repo("packaging/sluice-daemon.policy").display().to_string(),
                ]);
            }
            "$SLUICE_DAEMON_ARGS" => args.extend(["-i".into(), "vb".into()]),
            w => {
                assert!(!w.contains('$'), "{w}: a variable the test does not know");
                args.push(w.into());
            }
        }
    }
    (args, sock)
}

#[test]
fn the_units_command_runs_with_the_example_policy_and_reloads() {
    let Some(net) = Net::new("daemon-unit") else {
        return;
    };
    let (args, sock) = exec_start(&net.dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut d = Bg::start(net.sluice(&args));
    d.listening();
    // The socket is 0660: another user cannot connect at all.
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o660);
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_sluice"))
        .args(["flow", "--daemon", sock.to_str().unwrap(), &spec("tcp")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("ermission denied"),
        "{}",
        text(&o.stderr)
    );
    // Root may, by the example's first rule.
    let root = client(&sock, &net.file("root"), &[spec("tcp")], None);
    // systemctl reload: the unit's ExecReload with $MAINPID.
    let pid = super::daemon::status(&sock)["daemon"]["pid"]
        .as_u64()
        .unwrap();
    let text_unit = std::fs::read_to_string(repo("packaging/sluice-daemon.service")).unwrap();
    let reload =
        one(&unit(&text_unit), "Service", "ExecReload").replace("$MAINPID", &pid.to_string());
    let mut words = reload.split_whitespace();
    let st = Command::new(words.next().unwrap())
        .args(words)
        .status()
        .unwrap();
    assert!(st.success());
    assert!(d.said("read again"), "{}", d.stderr_now());
    assert!(root.interrupt().status.success());
    let o = d.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn sighup_reloads_the_policy_without_dropping_authorised_clients() {
    let Some(net) = Net::new("daemon-reload") else {
        return;
    };
    let (d, sock, policy) = daemon_with_policy(
        &net,
        "allow uid=0 source=iface:vb class=bpf\nallow uid=65534 source=iface:vb class=bpf\n",
        &["--socket-mode", "0666"],
    );
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let root = client(&sock, &net.file("root"), &[spec("tcp")], None);
    // Under the first policy, uid 65534 may open a flow.
    let mine = net.file("nobody1");
    std::fs::create_dir_all(&mine).unwrap();
    std::os::unix::fs::chown(&mine, Some(65534), Some(65534)).unwrap();
    let before = client(&sock, &mine, &[spec("udp")], Some(65534));
    assert!(before.interrupt().status.success());
    let mut sent = net.replay(&corpus("mptcp-v0.pcap"));
    // The new policy denies uid 65534 (line 2); root's open flow stays.
    std::fs::write(
        &policy,
        "allow uid=0 source=iface:vb class=bpf\ndeny uid=65534 source=iface:vb\n",
    )
    .unwrap();
    d.signal("HUP");
    assert!(d.said("read again"), "{}", d.stderr_now());
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_sluice"))
        .args(["flow", "--daemon", sock.to_str().unwrap(), &spec("udp")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("(policy {}:2)", policy.display())),
        "{err}"
    );
    sent += net.replay(&corpus("kday4.pcap"));
    // A policy that does not parse is refused; the one in force stays.
    std::fs::write(
        &policy,
        "allow uid=0 source=iface:vb class=bpf\npermit everyone\n",
    )
    .unwrap();
    d.signal("HUP");
    assert!(d.said("the policy in force is kept"), "{}", d.stderr_now());
    // (Frames still in the ring when a flow opens would reach it.)
    settle();
    let again = client(&sock, &net.file("root2"), &[spec("")], None);
    // (The kernel pre-filter takes the new flow in at the capture
    // thread's next turn: frames sent before that are not its.)
    settle();
    let last = net.replay(&corpus("various_gre.pcap"));
    sent += last;
    settle();
    assert!(dump.interrupt().status.success());
    assert_eq!(frames(&all).len() as u64, sent);
    // Root's flow, opened before both reloads, kept every tcp frame.
    let o = root.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = libpcap_filter(&all, "tcp", &net.file("w.pcap"));
    assert!(
        want.len() > 264,
        "{} tcp frames: after the reload too",
        want.len()
    );
    assert_eq!(frames(&net.file("root/flow1.pcap")), want);
    assert!(again.interrupt().status.success());
    let every = frames(&all);
    assert_eq!(
        frames(&net.file("root2/flow1.pcap")),
        every[every.len() - last as usize..]
    );
    let o = d.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
}
