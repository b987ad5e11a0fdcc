//! The parser's tests: grammar, qualifier inheritance, errors, limits, and
//! every expression of the shared corpus.

use super::*;

fn p(s: &str) -> Expr {
    parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn prim(e: &Expr) -> &Prim {
    match e {
        Expr::Prim(p) => p,
        other => panic!("not a prim: {other:?}"),
    }
}

fn q(proto: Option<Proto>, dir: Option<Dir>, kind: Option<Kind>) -> Qual {
    Qual { proto, dir, kind }
}

#[test]
fn empty_is_true() {
    assert!(matches!(p(""), Expr::True(_)));
    assert!(matches!(p("  \t"), Expr::True(_)));
}

#[test]
fn inheritance_host_or() {
    let Expr::Or(v) = p("host a or b") else {
        panic!()
    };
    assert_eq!(prim(&v[1]).qual, q(None, None, Some(Kind::Host)));
    assert_eq!(prim(&v[1]).span, Span::new(10, 11));
    assert_eq!(prim(&v[0]).span, Span::new(0, 6));
}

#[test]
fn inheritance_port_names() {
    let Expr::Or(v) = p("port ftp or ftp-data") else {
        panic!()
    };
    assert_eq!(prim(&v[1]).value, Value::Name("ftp-data".into()));
    assert_eq!(prim(&v[1]).qual.kind, Some(Kind::Port));
}

#[test]
fn inheritance_paren_list() {
    let Expr::And(v) = p("host x and (y or z)") else {
        panic!()
    };
    let Expr::Or(w) = &v[1] else { panic!() };
    assert_eq!(prim(&w[0]).qual.kind, Some(Kind::Host));
    assert_eq!(prim(&w[1]).value, Value::Name("z".into()));
}

#[test]
fn inheritance_not() {
    let Expr::And(v) = p("ip host a and not b") else {
        panic!()
    };
    let Expr::Not(b, _) = &v[1] else { panic!() };
    assert_eq!(prim(b).qual, q(Some(Proto::Ip), None, Some(Kind::Host)));
}

#[test]
fn inheritance_full_head() {
    let Expr::Or(v) = p("tcp src port 1 or 2") else {
        panic!()
    };
    assert_eq!(
        prim(&v[1]).qual,
        q(Some(Proto::Tcp), Some(Dir::Src), Some(Kind::Port))
    );
    assert_eq!(prim(&v[1]).value, Value::Num(2));
}

#[test]
fn inheritance_through_parenthesized_term() {
    // libpcap passes on the qualifiers in force before the parentheses.
    let Expr::Or(v) = p("host 1.1.1.1 and (tcp) or 2.2.2.2") else {
        panic!()
    };
    assert_eq!(prim(&v[1]).qual.kind, Some(Kind::Host));
    assert!(parse("(host 1.1.1.1) or 2.2.2.2").is_err());
}

#[test]
fn bare_value_errors() {
    for s in [
        "tcp or 5",
        "tcp or 1.2.3.4",
        "broadcast or x",
        "ip[0] = 1 or x",
        "5",
        "x",
        "vpi 1 or 2",
    ] {
        assert!(parse(s).is_err(), "{s}");
    }
}

#[test]
fn precedence_left_assoc() {
    let Expr::And(v) = p("tcp or udp and icmp") else {
        panic!()
    };
    assert!(matches!(v[0], Expr::Or(_)));
    let Expr::Or(v) = p("tcp and udp or icmp") else {
        panic!()
    };
    assert!(matches!(v[0], Expr::And(_)));
    let Expr::Or(v) = p("host a or b or c") else {
        panic!()
    };
    assert_eq!(v.len(), 3);
    let Expr::And(v) = p("not tcp and udp") else {
        panic!()
    };
    assert!(matches!(v[0], Expr::Not(..)));
}

#[test]
fn heads() {
    let e = p("src or dst host a");
    assert_eq!(prim(&e).qual.dir, Some(Dir::SrcOrDst));
    let e = p("dst and src net 10");
    assert_eq!(prim(&e).qual.dir, Some(Dir::SrcAndDst));
    let e = p("ip proto \\tcp");
    assert_eq!(prim(&e).qual, q(Some(Proto::Ip), None, Some(Kind::Proto)));
    assert_eq!(prim(&e).value, Value::Name("tcp".into()));
    let e = p("ip6 protochain 6");
    assert_eq!(prim(&e).qual.kind, Some(Kind::ProtoChain));
    let e = p("ether gateway x");
    assert_eq!(prim(&e).qual.kind, Some(Kind::Gateway));
    for bad in [
        "src proto 1",
        "dst protochain 1",
        "src gateway x",
        "src or host a",
        "proto",
        "net 10 mask 255.0.0.0",
        "net 10/8",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn values() {
    let e = p("net 10.0.0.0/8");
    assert!(
        matches!(&prim(&e).value, Value::Cidr(b, 8) if matches!(**b, Value::Dotted { addr: 0x0a000000, bits: 32, .. }))
    );
    let e = p("net 10.1 mask 255.255.0.0");
    assert!(matches!(prim(&e).value, Value::Masked(..)));
    let e = p("ip6 net fe80::/10");
    assert!(matches!(prim(&e).value, Value::Ipv6(_, Some(10))));
    let e = p("ether host ab-cd-ef-00-00-02");
    assert_eq!(prim(&e).value, Value::Mac([0xab, 0xcd, 0xef, 0, 0, 2]));
    let e = p("link host $c0");
    assert_eq!(prim(&e).value, Value::Arcnet(0xc0));
    let e = p("decnet host 63.1023");
    assert!(matches!(&prim(&e).value, Value::Dotted { text, .. } if text == "63.1023"));
    let e = p("port (80)");
    assert_eq!(prim(&e).value, Value::Num(80));
    let e = p("host ((1))");
    assert_eq!(prim(&e).value, Value::Num(1));
    assert!(parse("host ((a))").is_err());
    assert!(parse("host a or ((b or c) or d)").is_err());
    assert!(parse("host (a or (b))").is_ok());
}

#[test]
fn arithmetic_precedence() {
    let Expr::Rel(RelOp::Eq, l, _, _) = p("1 + 2 * 3 = 7") else {
        panic!()
    };
    assert!(
        matches!(l, Arith::Bin(ArithOp::Add, _, ref r, _) if matches!(**r, Arith::Bin(ArithOp::Mul, ..)))
    );
    let Expr::Rel(_, l, _, _) = p("1 | 2 & 3 = 0") else {
        panic!()
    };
    assert!(matches!(l, Arith::Bin(ArithOp::Or, ..)));
    let Expr::Rel(_, l, _, _) = p("1 << 2 + 3 = 0") else {
        panic!()
    };
    assert!(matches!(l, Arith::Bin(ArithOp::Shl, ..)));
    let Expr::Rel(_, l, _, _) = p("1 - 2 - 3 = 0") else {
        panic!()
    };
    assert!(
        matches!(l, Arith::Bin(ArithOp::Sub, ref a, _, _) if matches!(**a, Arith::Bin(ArithOp::Sub, ..)))
    );
    // '%' and '^': a % (b + c), a ^ (b * c), a * (b % c).
    let Expr::Rel(_, l, _, _) = p("ip[0] % ip[1] + ip[2] = 0") else {
        panic!()
    };
    assert!(
        matches!(l, Arith::Bin(ArithOp::Mod, _, ref r, _) if matches!(**r, Arith::Bin(ArithOp::Add, ..)))
    );
    let Expr::Rel(_, l, _, _) = p("ip[0] * ip[1] ^ ip[2] = 0") else {
        panic!()
    };
    assert!(
        matches!(l, Arith::Bin(ArithOp::Mul, _, ref r, _) if matches!(**r, Arith::Bin(ArithOp::Xor, ..)))
    );
    let Expr::Rel(_, l, _, _) = p("-1 * 2 = 0") else {
        panic!()
    };
    assert!(matches!(l, Arith::Bin(ArithOp::Mul, ref a, _, _) if matches!(**a, Arith::Neg(..))));
    let Expr::Rel(_, l, _, _) = p("tcp[tcpflags] & (tcp-syn|tcp-ack) != 0") else {
        panic!()
    };
    assert!(matches!(l, Arith::Bin(ArithOp::And, ..)));
}

#[test]
fn loads() {
    let Expr::Rel(_, l, _, _) = p("ip[2:2] > 576") else {
        panic!()
    };
    assert!(matches!(
        l,
        Arith::Load {
            proto: Proto::Ip,
            size: 2,
            ..
        }
    ));
    assert!(parse("ip[0:3] = 1").is_err());
    assert!(parse("link[0:-1] != 0").is_err());
    assert!(p("(1) > 0") != Expr::True(Span::default()));
    p("((1)) + 1 > 0");
    p("host 1.1.1.1 or ((1) + 2 > 0)");
    p("host 1.1.1.1 or (not 1 > 0)");
    p("(ip[0] & 0xf) != 5 and (len > 100)");
    p("len - 1 > 2");
}

#[test]
fn keyword_primitives() {
    assert_eq!(
        p("less 100"),
        Expr::Other(Other::Less(100), Span::new(0, 8))
    );
    assert!(matches!(
        p("byte 8 & 5"),
        Expr::Other(Other::Byte(8, ByteOp::And, 5), _)
    ));
    for bad in [
        "byte 1 != 2",
        "byte 1 ^ 2",
        "pppoed 1234",
        "vlan any",
        "vxlan invalid",
        "lldp",
        "\\lldp",
        "wlan subtype 0",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
    assert!(matches!(
        p("vlan (100)"),
        Expr::Other(Other::Vlan(Some(100)), _)
    ));
    assert!(matches!(p("vlan"), Expr::Other(Other::Vlan(None), _)));
    assert!(matches!(
        p("vxlan 5"),
        Expr::Other(Other::Vxlan(Some(5)), _)
    ));
    assert!(matches!(
        p("ip multicast"),
        Expr::Other(Other::Multicast(Some(Proto::Ip)), _)
    ));
    assert!(matches!(
        p("reason bad-offset"),
        Expr::Other(Other::PfReason(1), _)
    ));
    assert!(matches!(
        p("action block"),
        Expr::Other(Other::PfAction(1), _)
    ));
    assert!(parse("action defer").is_err());
    assert!(matches!(p("on eth0"), Expr::Other(Other::PfIfname(_), _)));
    assert!(matches!(
        p("llc ua"),
        Expr::Other(Other::Llc(Some(Llc::USub(0x63))), _)
    ));
    assert!(matches!(
        p("llc rnr"),
        Expr::Other(Other::Llc(Some(Llc::SSub(5))), _)
    ));
    assert!(matches!(p("llc"), Expr::Other(Other::Llc(None), _)));
    assert!(
        matches!(p("vpi (1 or 2)"), Expr::Other(Other::AtmField(AtmField::Vpi, ref v), _) if v.len() == 2)
    );
    assert!(
        matches!(p("sio > 5"), Expr::Other(Other::Mtp3Field(Mtp3Field::Sio, ref v), _) if v[0] == (RelOp::Gt, 5))
    );
    assert!(matches!(
        p("lsu"),
        Expr::Other(Other::Mtp2(Mtp2Type::Lssu), _)
    ));
    assert!(matches!(
        p("metaconnect"),
        Expr::Other(Other::Atm(Atm::Metaconnect), _)
    ));
}

#[test]
fn wlan_names() {
    assert!(matches!(
        p("wlan type mgt subtype beacon"),
        Expr::Other(Other::Wlan(Some(Proto::Link), Wlan::TypeSubtype(0x80)), _)
    ));
    assert!(matches!(
        p("type data subtype qos-data"),
        Expr::Other(Other::Wlan(None, Wlan::TypeSubtype(0x88)), _)
    ));
    assert!(matches!(
        p("subtype cts"),
        Expr::Other(Other::Wlan(None, Wlan::TypeSubtype(0xc4)), _)
    ));
    assert!(matches!(
        p("subtype data"),
        Expr::Other(Other::Wlan(None, Wlan::TypeSubtype(0x08)), _)
    ));
    assert!(matches!(
        p("type ctl"),
        Expr::Other(Other::Wlan(None, Wlan::Type(4)), _)
    ));
    assert!(matches!(
        p("dir fromds"),
        Expr::Other(Other::Wlan(None, Wlan::Dir(2)), _)
    ));
    assert!(matches!(
        p("wlan dir 3"),
        Expr::Other(Other::Wlan(_, Wlan::Dir(3)), _)
    ));
    assert!(parse("type 3").is_err());
    assert!(parse("type mgt subtype cts").is_err());
}

#[test]
fn error_messages() {
    let e = parse("tcp port").unwrap_err();
    assert_eq!(
        e.to_string(),
        "column 9: expected a value after 'port', found end of expression"
    );
    let e = parse("host a and").unwrap_err();
    assert_eq!(e.span.column(), 11);
    let e = parse("(tcp").unwrap_err();
    assert!(e.message.contains("')'"), "{e}");
    let e = parse("tcp udp").unwrap_err();
    assert_eq!(e.span.column(), 5);
    let e = parse("tcp or 5").unwrap_err();
    assert_eq!(e.span.column(), 8);
}

#[test]
fn deep_nesting_is_bounded() {
    let ok = format!("{}tcp{}", "(".repeat(200), ")".repeat(200));
    p(&ok);
    let bad = format!("{}tcp{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(parse(&bad).is_err());
    let nots = format!("{}tcp", "not ".repeat(100_000));
    assert!(parse(&nots).is_err());
    let alt: Vec<String> = (0..10_000).map(|i| format!("port {i}")).collect();
    let mut s = alt[0].clone();
    for (i, t) in alt.iter().enumerate().skip(1) {
        s.push_str(if i % 2 == 0 { " and " } else { " or " });
        s.push_str(t);
    }
    assert!(parse(&s).is_err());
    let arith = format!("1{} > 0", " + 1".repeat(100_000));
    assert!(parse(&arith).is_err());
    let modc = format!("1{} > 0", " % 1".repeat(100_000));
    assert!(parse(&modc).is_err());
    let neg = format!("{}1 > 0", "- ".repeat(100_000));
    assert!(parse(&neg).is_err());
}

#[test]
fn huge_flat_or() {
    let mut s = String::from("host a");
    for i in 0..100_000 {
        s.push_str(if i % 2 == 0 { " or host b" } else { " or c" });
    }
    let t = std::time::Instant::now();
    let Expr::Or(v) = p(&s) else { panic!() };
    assert_eq!(v.len(), 100_001);
    assert!(t.elapsed().as_secs_f64() < 5.0);
}

fn corpus(name: &str) -> Option<String> {
    let text = sluice_testsupport::corpus::text(name);
    if text.is_none() {
        sluice_testsupport::corpus::skipped(name);
    }
    text
}

/// The value of a string field in one line of JSON.
fn json_field(line: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\": \"");
    let start = line.find(&pat)? + pat.len();
    let mut out = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'u' => {
                    let h: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&h, 16).ok()?)?);
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

#[test]
fn corpus_expressions_parse() {
    for file in ["expressions.txt", "expressions-extended.txt"] {
        let Some(text) = corpus(file) else { continue };
        let mut n = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if let Err(e) = parse(line) {
                panic!("{file}: {line:?}: {e}");
            }
            n += 1;
        }
        assert!(n > 500, "{file}: only {n} lines");
    }
}

#[test]
fn libpcap_accept_tests_parse() {
    let Some(text) = corpus("libpcap-tests/accept.jsonl") else {
        return;
    };
    let mut failures = Vec::new();
    for line in text.lines() {
        let Some(expr) = json_field(line, "expr") else {
            continue;
        };
        if expr.starts_with('_') {
            continue; // harness directives, not expressions
        }
        if json_field(line, "skip").is_some_and(|s| !s.is_empty()) {
            continue; // other platforms' names (pflog reasons and actions)
        }
        if let Err(e) = parse(&expr) {
            failures.push(format!("{expr:?}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn syntax_errors_are_rejected() {
    let mut n = 0;
    if let Some(text) = corpus("expressions-reject.tsv") {
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split('\t').collect();
            if cols.len() > 1 && cols[1].contains("syntax error") {
                assert!(parse(cols[0]).is_err(), "should not parse: {:?}", cols[0]);
                n += 1;
            }
        }
    }
    if let Some(text) = corpus("libpcap-tests/reject.jsonl") {
        for line in text.lines() {
            let (Some(expr), Some(err)) = (json_field(line, "expr"), json_field(line, "errstr"))
            else {
                continue;
            };
            if err.contains("syntax error") {
                assert!(parse(&expr).is_err(), "should not parse: {expr:?}");
                n += 1;
            }
        }
    }
    eprintln!("{n} syntax errors checked");
}

#[test]
fn libpcap_rejects_do_not_panic() {
    let Some(text) = corpus("libpcap-tests/reject.jsonl") else {
        return;
    };
    for line in text.lines() {
        if let Some(expr) = json_field(line, "expr") {
            let _ = parse(&expr);
        }
    }
}

mod prop {
    use super::super::parse;
    use proptest::prelude::*;

    const WORDS: &[&str] = &[
        "host",
        "net",
        "port",
        "portrange",
        "src",
        "dst",
        "and",
        "or",
        "not",
        "!",
        "(",
        ")",
        "[",
        "]",
        ":",
        "tcp",
        "ip",
        "ether",
        "ip6",
        "proto",
        "protochain",
        "gateway",
        "1",
        "0x10",
        "10.1",
        "1.2.3.4",
        "fe80::1",
        "a:b:c:d:e:f",
        "$1",
        "x",
        "ftp-data",
        "+",
        "-",
        "*",
        "/",
        "%",
        "&",
        "|",
        "^",
        "<<",
        ">>",
        "=",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "len",
        "vlan",
        "mpls",
        "byte",
        "less",
        "type",
        "subtype",
        "dir",
        "mgt",
        "beacon",
        "llc",
        "vpi",
        "sio",
        "mask",
        "255.0.0.0",
        "broadcast",
        "&&",
        "||",
        "\\tcp",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn arbitrary_strings_never_panic(s in "\\PC{0,64}") {
            let _ = parse(&s);
        }

        #[test]
        fn ascii_soup_never_panics(s in "[ -~]{0,80}") {
            let _ = parse(&s);
        }

        #[test]
        fn token_soup_never_panics(v in proptest::collection::vec(0..WORDS.len(), 0..30)) {
            let s: Vec<&str> = v.iter().map(|&i| WORDS[i]).collect();
            let _ = parse(&s.join(" "));
        }
    }
}

/// Flat chains are not nesting: 200 alternations of `vlan N and tcp` and
/// a 300-term sum parse (libpcap compiles both); true nesting is still
/// bounded, and so is the tree a very long chain makes.
#[test]
fn flat_chains_are_not_nesting() {
    let vlans = |n: usize| {
        (0..n)
            .map(|i| format!("vlan {i} and tcp"))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    assert!(parse(&vlans(200)).is_ok());
    let sum = |n: usize| format!("ip[0] + {} = 2", vec!["1"; n].join(" + "));
    assert!(parse(&sum(300)).is_ok());
    let e = parse(&vlans(MAX_TREE_DEPTH)).unwrap_err().to_string();
    assert!(e.contains("too long"), "{e}");
    let e = parse(&sum(MAX_TREE_DEPTH + 1)).unwrap_err().to_string();
    assert!(e.contains("too long"), "{e}");
    let parens = format!(
        "{}tcp{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    let e = parse(&parens).unwrap_err().to_string();
    assert!(e.contains("nests too deeply"), "{e}");
    let nots = format!("{}tcp", "not ".repeat(MAX_DEPTH + 1));
    assert!(parse(&nots)
        .unwrap_err()
        .to_string()
        .contains("nests too deeply"));
    // A chain as long as allowed compiles on a 2 MiB thread (every stage
    // recurses on the tree).
    let longest = vlans(MAX_TREE_DEPTH / 2 - 1);
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let f = crate::compile(&longest, crate::link::LinkType::EN10MB, 1).unwrap();
            assert_eq!(f.run(&[0u8; 60], 60), 0);
        })
        .unwrap()
        .join()
        .unwrap();
}
