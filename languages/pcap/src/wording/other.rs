//! libpcap 1.10.3's words for refusals that are not qualified
//! primitives: keywords (`vlan`, `llc`, `broadcast`, pflog, 802.11, ATM
//! and MTP fields), protocol abbreviations on links without a protocol
//! field, packet-data relations, and the lexical errors libpcap's scanner
//! reports itself. The link-dependent reasons are sluice's (its compiler
//! knows the links); only the words are libpcap's.

use super::Ctx;
use crate::ast::{Atm, AtmField, Expr, Mtp2Type, Mtp3Field, Other, Proto, Wlan};

/// libpcap's words for the refusal of the keyword or relation `e`.
pub(super) fn refusal(e: &Expr, cx: &Ctx<'_>) -> Option<String> {
    let desc = || cx.link_description();
    let kept = |prefix: &str| cx.sluice.starts_with(prefix).then(|| cx.sluice.to_string());
    match e {
        Expr::Other(o, _) => match o {
            Other::Vlan(_) => kept("VLAN tag")
                .or_else(|| kept("no VLAN match after MPLS"))
                .or_else(|| Some(format!("no VLAN support for {}", cx.link_description()))),
            Other::Mpls(_) => {
                kept("MPLS label").or_else(|| Some(format!("no MPLS support for {}", desc())))
            }
            Other::Llc(_) if cx.sluice_says("'llc' not supported") => {
                Some(format!("'llc' not supported for {}", desc()))
            }
            Other::Broadcast(_) if cx.sluice_says("not a broadcast link") => {
                Some("not a broadcast link".into())
            }
            Other::Multicast(_) if cx.sluice_says("not a multicast link") => Some(
                "link-layer multicast filters supported only on ethernet/FDDI/token ring/ARCNET/802.11/ATM LANE/Fibre Channel".into(),
            ),
            Other::PfIfname(_) => pf("ifname", cx),
            Other::PfRuleset(_) => pf("ruleset", cx),
            Other::PfRulenum(_) => pf("rnr", cx),
            Other::PfSubrulenum(_) => pf("srnr", cx),
            Other::PfReason(_) => pf("reason", cx),
            Other::PfAction(_) => pf("action", cx),
            Other::Wlan(_, w) if cx.sluice_says("supported only on 802.11") => Some(match w {
                Wlan::Dir(_) => "frame direction supported only with 802.11 headers".into(),
                _ => "802.11 link-layer types supported only on 802.11".into(),
            }),
            Other::Atm(a) if cx.sluice_says("supported only on SUNATM") => {
                Some(format!("'{}' supported only on raw ATM", atm_kw(*a)))
            }
            Other::AtmField(f, _) if cx.sluice_says("supported only on SUNATM") => {
                let f = match f {
                    AtmField::Vpi => "vpi",
                    AtmField::Vci => "vci",
                };
                Some(format!("'{f}' supported only on raw ATM"))
            }
            Other::Mtp2(t) if cx.sluice_says("not supported on") => Some(match t {
                Mtp2Type::Fisu => "'fisu' supported only on MTP2".into(),
                Mtp2Type::Lssu => "'lssu' supported only on MTP2".into(),
                Mtp2Type::Msu => "'msu' supported only on MTP2".into(),
                Mtp2Type::Hfisu => "'hfisu' supported only on MTP2_HSL".into(),
                Mtp2Type::Hlssu => "'hlssu' supported only on MTP2_HSL".into(),
                Mtp2Type::Hmsu => "'hmsu' supported only on MTP2_HSL".into(),
            }),
            Other::Mtp3Field(..) if cx.sluice_says("greater than maximum") => {
                // "sio 256 greater than maximum 255"
                let w: Vec<&str> = cx.sluice.split(' ').collect();
                match w.as_slice() {
                    [name, v, "greater", "than", "maximum", max] => {
                        Some(format!("{name} value {v} too big; max value = {max}"))
                    }
                    _ => None,
                }
            }
            Other::Mtp3Field(f, _) if cx.sluice_says("not supported on") => {
                let f = match f {
                    Mtp3Field::Sio | Mtp3Field::Hsio => "sio",
                    Mtp3Field::Opc | Mtp3Field::Hopc => "opc",
                    Mtp3Field::Dpc | Mtp3Field::Hdpc => "dpc",
                    Mtp3Field::Sls | Mtp3Field::Hsls => "sls",
                };
                Some(format!("'{f}' supported only on SS7"))
            }
            _ => None,
        },
        Expr::Proto(Proto::Link, _) => Some("link layer applied in wrong context".into()),
        Expr::Proto(Proto::Radio, _) => Some("'radio' is not a valid protocol type".into()),
        Expr::Proto(..) if cx.sluice_says("link-layer type filtering not implemented") => {
            Some(not_implemented(cx))
        }
        _ => None,
    }
}

/// A pflog keyword on another link.
fn pf(what: &str, cx: &Ctx<'_>) -> Option<String> {
    cx.sluice_says("pflog primitives are not supported")
        .then(|| format!("{what} supported only on PF linktype"))
}

/// libpcap's keyword for an ATM type.
fn atm_kw(a: Atm) -> &'static str {
    match a {
        Atm::Lane => "lane",
        Atm::Metac => "metac",
        Atm::Bcc => "bcc",
        Atm::Oamf4ec => "oam4ec",
        Atm::Oamf4sc => "oam4sc",
        Atm::Sc => "sc",
        Atm::Ilmic => "ilmic",
        Atm::Oam => "oam",
        Atm::Oamf4 => "oamf4",
        Atm::Connectmsg => "connectmsg",
        Atm::Metaconnect => "metaconnect",
    }
}

/// libpcap's refusal of a protocol test on a link without a protocol
/// field: some links have words of their own, the others their
/// description.
pub(super) fn not_implemented(cx: &Ctx<'_>) -> String {
    let own = match cx.dlt_name() {
        "MFR" => "Multi-link Frame Relay",
        "LINUX_IRDA" => "IrDA",
        "DOCSIS" => "DOCSIS",
        "MTP2" | "MTP2_WITH_PHDR" => "MTP2",
        "ERF" => "ERF",
        "PFSYNC" => "PFSYNC",
        "LINUX_LAPD" => "LAPD",
        "USB_FREEBSD" | "USB_LINUX" | "USB_LINUX_MMAPPED" | "USBPCAP" => "USB",
        "BLUETOOTH_HCI_H4" | "BLUETOOTH_HCI_H4_WITH_PHDR" => "Bluetooth",
        "CAN20B" | "CAN_SOCKETCAN" => "CAN",
        "IEEE802_15_4"
        | "IEEE802_15_4_LINUX"
        | "IEEE802_15_4_NONASK_PHY"
        | "IEEE802_15_4_NOFCS"
        | "IEEE802_15_4_TAP" => "IEEE 802.15.4",
        "IEEE802_16_MAC_CPS_RADIO" => "IEEE 802.16",
        "SITA" => "SITA",
        "RAIF1" => "RAIF1",
        "IPMB_KONTRON" | "IPMB_LINUX" => "IPMB",
        "AX25_KISS" => "AX.25",
        "NFLOG" => "NFLOG",
        _ => {
            return format!(
                "{} link-layer type filtering not implemented",
                cx.link_description()
            )
        }
    };
    format!("{own} link-layer type filtering not implemented")
}

/// libpcap's words for sluice's message where no rule above applies:
/// the same reason, with sluice's additions (the link-type name, the
/// value found, a hint) taken off.
pub(super) fn translate(cx: &Ctx<'_>) -> Option<String> {
    let m = cx.sluice;
    if m.contains("link-layer type filtering not implemented") {
        return Some(not_implemented(cx));
    }
    let cut = [
        ("mask length must be <= 32", "mask length must be <= 32"),
        ("mask length must be <= 128", "mask length must be <= 128"),
        (
            "data size must be 1, 2, or 4",
            "data size must be 1, 2, or 4",
        ),
        ("shift by more than 31 bits", "shift by more than 31 bits"),
        (
            "netmask not known, so 'ip broadcast' not supported",
            "netmask not known, so 'ip broadcast' not supported",
        ),
        (
            "radio information not present in capture",
            "radio information not present in capture",
        ),
    ];
    if let Some((_, words)) = cut.iter().find(|(p, _)| m.starts_with(p)) {
        return Some(words.to_string());
    }
    if m.ends_with("does not support the index operation") {
        return Some("unsupported index operation".into());
    }
    if let Some(rest) = m.strip_prefix("port ") {
        // "port N greater than maximum 65535"
        if let Some(n) = rest.strip_suffix(" greater than maximum 65535") {
            return Some(format!("illegal port number {n} > 65535"));
        }
    }
    None
}

/// libpcap's scanner's own words for an expression sluice could not
/// parse, where it has some (a bad number, address or keyword value);
/// `None` for a syntax error.
pub(super) fn lexical(text: &str, sluice: &str) -> Option<String> {
    if let Some(e) = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(number_error)
    {
        return Some(e);
    }
    const SAME: [&str; 6] = [
        "data size must be 1, 2, or 4",
        "unknown PF reason ",
        "unknown PF action ",
        "invalid 802.11 type value ",
        "invalid 802.11 subtype value ",
        "unknown 802.11 direction",
    ];
    if SAME.iter().any(|p| sluice.starts_with(p)) {
        return Some(sluice.to_string());
    }
    let quoted = |rest: &str| rest.trim_matches('\'').to_string();
    if let Some(rest) = sluice.strip_prefix("invalid IPv6 address ") {
        return Some(format!("bogus IPv6 address {}", quoted(rest)));
    }
    if let Some(rest) = sluice.strip_prefix("invalid Ethernet address ") {
        return Some(format!("bogus ethernet address {}", quoted(rest)));
    }
    None
}

/// libpcap's scanner's complaint about a number token, if any: it reads
/// hexadecimal (`0x`), octal (a leading 0) and decimal digits one by one
/// and stops at the first that does not fit.
fn number_error(tok: &str) -> Option<String> {
    let overflow = || Some(format!("number {tok} overflows 32 bits"));
    let mut n: u32 = 0;
    if let Some(hex) = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        for c in hex.chars() {
            if n > 0x0fff_ffff {
                return overflow();
            }
            n = (n << 4) | c.to_digit(16)?;
        }
    } else if !tok.chars().all(|c| c.is_ascii_digit()) || tok.is_empty() {
        return None;
    } else if let Some(oct) = tok.strip_prefix('0') {
        for c in oct.chars() {
            let d = c.to_digit(10)?;
            if d > 7 {
                return Some(format!("number {tok} contains non-octal digit"));
            }
            if n > 0o3777777777 {
                return overflow();
            }
            n = (n << 3) | d;
        }
    } else {
        for c in tok.chars() {
            let d = c.to_digit(10)?;
            n = match n.checked_mul(10).and_then(|m| m.checked_add(d)) {
                Some(m) => m,
                None => return overflow(),
            };
        }
    }
    None
}
