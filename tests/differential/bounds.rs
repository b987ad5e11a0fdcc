//! Bad input never takes the compiler down (issue 36): every expression of
//! at most 1 KB compiles or is refused within 1 s of CPU and 256 MB of
//! address space, checked in a child process under `prlimit`; flat chains
//! compile as in libpcap master, nested tunnels are refused with its
//! words, and `sluice filter` and `sluice split` exit with an error (not a
//! signal) on them under a 4 GB limit.

use super::*;
use std::io::{BufRead, Write as _};
use std::process::{Command, Stdio};

/// Address space the child may use.
const CHILD_AS: u64 = 256 << 20;
/// CPU time one expression may take (on every link type and setting the
/// child tries it with).
const CPU_PER_EXPRESSION: Duration = Duration::from_secs(1);
/// The link types each expression is compiled for in the child.
const CHILD_LINKS: &[LinkType] = &[
    LinkType::EN10MB,
    LinkType::IEEE802_11_RADIO,
    LinkType::PRISM_HEADER,
    LinkType::PFLOG,
    LinkType::LINUX_SLL2,
];

/// Expressions of at most 1 KB meant to be expensive: tunnel chains,
/// long and alternating `and`/`or` chains, deep nesting, arithmetic that
/// nests or runs long, host lists, and random expressions.
fn nasty(rng: &mut Rng) -> String {
    let tunnel = |rng: &mut Rng| rng.pick(&["geneve", "vxlan", "geneve 7", "vxlan 9"]);
    let fill = |rng: &mut Rng, f: &mut dyn FnMut(&mut Rng) -> String, sep: &str| {
        let target = rng.range(64, 1024);
        let mut s = f(rng);
        loop {
            let next = f(rng);
            if s.len() + sep.len() + next.len() > target {
                return s;
            }
            s.push_str(sep);
            s.push_str(&next);
        }
    };
    let s = match rng.below(10) {
        0 => fill(rng, &mut |r| tunnel(r).to_string(), " and ") + " and tcp",
        1 => fill(
            rng,
            &mut |r| format!("{} and {}", tunnel(r), gen_leaf_simple(r)),
            " or ",
        ),
        2 => {
            let sep = rng.pick(&[" and ", " or "]);
            fill(rng, &mut |r| gen_leaf_simple(r), sep)
        }
        3 => {
            let mut i = 0;
            fill(
                rng,
                &mut |r| {
                    i += 1;
                    let op = if i % 2 == 0 { "and" } else { "or" };
                    format!("{op} {}", gen_leaf_simple(r))
                },
                " ",
            )
            .split_once(' ')
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default()
        }
        4 => {
            let n = rng.range(1, 300);
            let open = rng.pick(&["(", "not (", "(not "]);
            format!(
                "{}{}{}",
                open.repeat(n),
                gen_leaf_simple(rng),
                ")".repeat(n)
            )
        }
        5 => {
            let op = rng.pick(&["+", "*", "<<", "/", "-", "&"]);
            let n = rng.range(1, 480);
            if rng.chance(50) {
                format!("ip[0] {op} {} = 2", vec!["len"; n].join(&format!(" {op} ")))
            } else {
                let n = n.min(200);
                format!(
                    "tcp[0] = {}1{}",
                    format!("len {op} (").repeat(n),
                    ")".repeat(n)
                )
            }
        }
        6 => fill(
            rng,
            &mut |r| {
                let a = r.pick(IP4);
                format!("host {}", ip4_text(a))
            },
            " or ",
        ),
        7 => fill(
            rng,
            &mut |r| format!("ip[{}:4] << ip[{}] > 3", r.below(60), r.below(60)),
            " and ",
        ),
        8 => {
            let sep = rng.pick(&[" and ", " or "]);
            fill(
                rng,
                &mut |r| {
                    r.pick(&["ip protochain 6", "protochain 17", "vlan", "mpls", "pppoes"])
                        .to_string()
                },
                sep,
            )
        }
        _ => gen_expr(rng, LinkType::EN10MB, 8).text(),
    };
    let mut s = s;
    s.truncate(1024);
    s
}

/// The work one expression gets in the child: compiled for each link
/// type, optimised and not, native code made, run once. How many of
/// those compiles succeeded.
fn compile_everywhere(text: &str) -> usize {
    let pkt = [0x45u8; 64];
    let mut compiled = 0;
    for &lt in CHILD_LINKS {
        for optimize in [true, false] {
            if let Ok(p) = Program::builder(lt).optimize(optimize).expression(text) {
                let _ = p.native();
                let _ = p.run(&pkt, 64);
                let _ = p.run_native(&pkt, 64);
                compiled += 1;
            }
        }
    }
    compiled
}

/// CPU time this thread has used (from /proc, in nanoseconds).
fn thread_cpu() -> Duration {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = s
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// The child: compiles the expressions of the file named by
/// `SLUICE_BOUNDS_CHILD`, printing "start N" before and "done N NS" after
/// each (NS: CPU nanoseconds). A no-op in ordinary runs.
#[test]
fn bounds_child() {
    let Some(path) = std::env::var_os("SLUICE_BOUNDS_CHILD") else {
        return;
    };
    let text = std::fs::read_to_string(path).expect("the expressions");
    let out = std::io::stdout();
    for (i, e) in text.lines().enumerate() {
        let e = e.replace("\\n", "\n");
        writeln!(out.lock(), "start {i}").unwrap();
        let t0 = thread_cpu();
        let n = compile_everywhere(&e);
        let cpu = (thread_cpu() - t0).as_nanos();
        writeln!(out.lock(), "done {i} {cpu} {n}").unwrap();
    }
}

#[test]
fn every_short_expression_compiles_or_is_refused_within_bounds() {
    let cases = env_num("SLUICE_DIFF_CASES").map_or(600, |n| (n / 150).max(100)) as usize;
    let mut rng = Rng::new(env_num("SLUICE_DIFF_SEED").unwrap_or(0xb0_0d5));
    let mut exprs: Vec<String> = (0..cases).map(|_| nasty(&mut rng)).collect();
    // The issue's own: tunnel chains, and flat chains libpcap compiles.
    for k in [5, 6, 16, 40] {
        exprs.push(vec!["geneve"; k].join(" and ") + " and tcp");
        exprs.push(vec!["vxlan"; k].join(" and ") + " and tcp");
        exprs.push(vec!["geneve and tcp"; k].join(" or "));
    }
    assert!(exprs.iter().all(|e| e.len() <= 1024 && !e.contains('\n')));
    let dir = std::env::temp_dir().join(format!("sluice-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("expressions.txt");
    std::fs::write(&file, exprs.join("\n") + "\n").unwrap();
    let mut child = Command::new("prlimit")
        .arg(format!("--as={CHILD_AS}"))
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "bounds::bounds_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SLUICE_BOUNDS_CHILD", &file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit runs the child");
    let (mut last, mut done, mut slow) = (None, 0usize, Vec::new());
    let (mut most, mut compiled) = ((Duration::ZERO, 0), 0usize);
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let mut f = line.split_whitespace();
        match (f.next(), f.next().and_then(|n| n.parse::<usize>().ok())) {
            (Some("start"), Some(i)) => last = Some(i),
            (Some("done"), Some(i)) => {
                done += 1;
                let cpu = Duration::from_nanos(f.next().and_then(|n| n.parse().ok()).unwrap_or(0));
                most = most.max((cpu, i));
                compiled += (f.next() != Some("0")) as usize;
                if cpu > CPU_PER_EXPRESSION {
                    slow.push(format!("{cpu:?}: {:?}", exprs[i]));
                }
            }
            _ => {}
        }
    }
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr);
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{done} of {} expressions (at most 1 KB; {compiled} compiled somewhere) compiled or \
         refused on {} link types, optimised and not, in at most {:?} of CPU each ({:?}), \
         under {} MiB",
        exprs.len(),
        CHILD_LINKS.len(),
        most.0,
        exprs
            .get(most.1)
            .map(|e| e.chars().take(60).collect::<String>()),
        CHILD_AS >> 20
    );
    assert!(
        status.success() && done == exprs.len(),
        "the child stopped ({status}) at {:?}: {}",
        last.map(|i| &exprs[i]),
        stderr.lines().rev().take(5).collect::<Vec<_>>().join("\n")
    );
    assert!(
        slow.is_empty(),
        "over {CPU_PER_EXPRESSION:?}:\n{}",
        slow.join("\n")
    );
}

/// Flat chains compile as in libpcap master (200 alternations of `vlan N
/// and tcp`, a 300-term sum) and give its verdicts; nested tunnels past
/// libpcap's registers are refused with its words.
#[test]
fn flat_chains_and_tunnel_chains_as_in_libpcap() {
    let Some(o) = Oracle::new() else { return };
    let vlans = (0..200)
        .map(|i| format!("vlan {i} and tcp"))
        .collect::<Vec<_>>()
        .join(" or ");
    let sum = format!("ip[0] + {} = 2", vec!["1"; 300].join(" + "));
    // Frames with 0 to 5 VLAN tags numbered from 0, then IPv4 and TCP.
    let mut frames = Vec::new();
    for tags in 0..6u16 {
        for first in [0u8, 0x45] {
            let mut f = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
            for t in 0..tags {
                f.extend([0x81, 0x00]);
                f.extend(t.to_be_bytes());
            }
            f.extend([0x08, 0x00, first, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]);
            f.extend([10, 0, 0, 1, 10, 0, 0, 2, 4, 210, 0, 80]);
            f.extend([0u8; 16]);
            frames.push(f);
        }
    }
    for text in [&vlans, &sum] {
        let c = compile(&o, 0, Origin::Dead, text);
        for (what, r) in [("unoptimised", &c.lp_unopt), ("optimised", &c.lp_opt)] {
            assert!(r.is_ok(), "libpcap {what}: {:?}", r.as_ref().err());
        }
        assert!(
            c.ours_unopt.is_ok() && c.ours_opt.is_ok(),
            "{:?}",
            c.ours_opt.err()
        );
        for f in &frames {
            for n in 0..=f.len() {
                if let Some(p) = check(&c, Some(&f[..n])) {
                    panic!(
                        "{}",
                        describe(&Ex::Leaf(text.to_string()), 0, Origin::Dead, &p)
                    );
                }
            }
        }
        println!(
            "{} characters: sluice {} instructions, libpcap {}",
            text.len(),
            c.ours_opt.as_ref().unwrap().bpf().len(),
            c.lp_opt.as_ref().unwrap().insns().len()
        );
    }
    for text in [
        ["geneve"; 6].join(" and ") + " and tcp",
        ["geneve"; 16].join(" and ") + " and tcp",
        ["vxlan"; 6].join(" and ") + " and tcp",
        ["geneve and tcp"; 6].join(" or "),
        ["vxlan and tcp"; 8].join(" or "),
    ] {
        for (link, &(lt, _)) in LINKS.iter().enumerate() {
            let c = compile(&o, link, Origin::Dead, &text);
            let lp = c.lp_unopt.as_ref().err().cloned().unwrap_or_default();
            let ours = c
                .ours_unopt
                .as_ref()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                !lp.is_empty() && !ours.is_empty(),
                "{text} on {lt}: libpcap {lp:?}, sluice {ours:?}"
            );
            let lp = lp.trim_start_matches("libpcap: ");
            assert!(
                ours.ends_with(lp),
                "{text} on {lt}: libpcap {lp:?}, sluice {ours:?}"
            );
        }
    }
}

/// `sluice filter` and `sluice split` refuse the tunnel chains with an
/// error and exit status 1 under a 4 GB address-space limit (they used to
/// grow past it and abort).
#[test]
fn the_command_refuses_tunnel_chains_under_a_memory_limit() {
    let dir = std::env::temp_dir().join(format!("sluice-bounds-cmd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.pcap");
    let limited = |args: &[&str]| {
        Command::new("prlimit")
            .arg(format!("--as={}", 4u64 << 30))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .output()
            .expect("prlimit runs sluice")
    };
    for text in [
        ["geneve"; 6].join(" and ") + " and tcp",
        ["geneve"; 16].join(" and ") + " and tcp",
        ["vxlan"; 16].join(" and ") + " and tcp",
        ["geneve and tcp"; 12].join(" or "),
    ] {
        let out = limited(&["filter", "-r", sample, "--count", &text]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "filter {text}: {err}");
        assert!(
            err.contains("too many registers needed to evaluate expression"),
            "{err}"
        );
        let filters = dir.join("filters.txt");
        std::fs::write(&filters, format!("chain\t{text}\nplain\ttcp\n")).unwrap();
        let out = limited(&[
            "split",
            "--filters",
            filters.to_str().unwrap(),
            "-r",
            sample,
            "--count",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "split {text}: {err}");
        assert!(
            err.contains("too many registers needed to evaluate expression"),
            "{err}"
        );
    }
    // Five geneves compile, and small: linear in the expression.
    let five = ["geneve"; 5].join(" and ") + " and tcp";
    let out = limited(&["filter", "-y", "EN10MB", "-ddd", &five]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let insns: usize = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("-ddd starts with the instruction count");
    assert!(insns < 4000, "{insns} instructions for {five}");
    let _ = std::fs::remove_dir_all(&dir);
}
