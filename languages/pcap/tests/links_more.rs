//! The link types without libpcap accept tests: the Juniper family, ERF and
//! MTP2 with a pseudo-header, and the links where only raw bytes can be
//! filtered. Expected values come from libpcap's programs for them.

use sluice_pcap::compile;
use sluice_pcap::link::LinkType;

fn run(expr: &str, lt: LinkType, pkt: &[u8]) -> u32 {
    compile(expr, lt, 65535)
        .unwrap_or_else(|e| panic!("{expr} on {lt}: {e}"))
        .run(pkt, pkt.len() as u32)
}

#[test]
fn every_link_type_round_trips_by_name_and_number() {
    let mut seen = std::collections::HashSet::new();
    for lt in LinkType::all() {
        assert!(
            seen.insert(lt.number()),
            "{lt}: number {} twice",
            lt.number()
        );
        assert_eq!(LinkType::from_number(lt.number()), Some(lt));
        assert_eq!(LinkType::from_name(lt.name()), Some(lt));
    }
}

#[test]
fn juniper_tests_only_the_cookie_and_reads_the_payload() {
    let mut pkt = vec![0u8; 60];
    pkt[..4].copy_from_slice(b"MGC\x01");
    // JUNIPER_ETHER: the IPv4 header at 32, its source at 44.
    pkt[44..48].copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(run("ip", LinkType::JUNIPER_ETHER, &pkt), 65535);
    assert_eq!(run("arp", LinkType::JUNIPER_ETHER, &pkt), 65535);
    assert_eq!(run("host 1.2.3.4", LinkType::JUNIPER_ETHER, &pkt), 65535);
    assert_eq!(run("inbound", LinkType::JUNIPER_ETHER, &pkt), 65535);
    assert_eq!(run("outbound", LinkType::JUNIPER_GGSN, &pkt), 0);
    pkt[0] = b'X';
    assert_eq!(run("ip", LinkType::JUNIPER_ETHER, &pkt), 0);
}

#[test]
fn juniper_links_without_a_network_offset_wrap_like_libpcap() {
    // libpcap's network offset there is 2^32 - 2: the IPv4 source is read at 10.
    let mut pkt = vec![0u8; 40];
    pkt[..4].copy_from_slice(b"MGC\0");
    pkt[10..14].copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(run("src host 1.2.3.4", LinkType::JUNIPER_ES, &pkt), 65535);
    // The IPv4 header length itself is read at 2^32 - 2: the filter aborts.
    assert_eq!(run("tcp port 80", LinkType::JUNIPER_VS, &pkt), 0);
}

#[test]
fn juniper_osi_protocol_id_is_at_libpcaps_no_snap_offset() {
    let mut pkt = vec![0u8; 40];
    pkt[..4].copy_from_slice(b"MGC\0");
    pkt[3] = 0x83;
    assert_eq!(run("isis", LinkType::JUNIPER_MFR, &pkt), 65535);
    pkt[3] = 0;
    pkt[14] = 0x83;
    assert_eq!(run("isis", LinkType::JUNIPER_ATM1, &pkt), 65535);
}

#[test]
fn mtp2_behind_headers() {
    let mut pkt = vec![0xffu8; 40];
    pkt[6] = 0xc0; // length indicator 0: a FISU
    assert_eq!(run("fisu", LinkType::MTP2_WITH_PHDR, &pkt), 65535);
    assert_eq!(run("fisu", LinkType::ERF, &pkt), 0);
    pkt[22] = 0;
    assert_eq!(run("fisu", LinkType::ERF, &pkt), 65535);
    assert!(compile("fisu", LinkType::USB_LINUX, 65535).is_err());
}

#[test]
fn raw_byte_links_refuse_protocol_tests() {
    for lt in [
        LinkType::USB_LINUX,
        LinkType::CAN_SOCKETCAN,
        LinkType::DSA_TAG_EDSA,
        LinkType::ERF,
    ] {
        for e in [
            "ip",
            "host 1.2.3.4",
            "port 80",
            "tcp",
            "vlan",
            "mpls",
            "llc",
            "broadcast",
            "link proto 1",
            "pppoed",
            "not ip6",
            "len > 1 or arp",
        ] {
            assert!(compile(e, lt, 65535).is_err(), "{e} on {lt}");
        }
        let pkt = [7u8, 1, 2, 3];
        assert_eq!(run("link[0] = 7 and len > 3", lt, &pkt), 65535);
        assert_eq!(run("greater 5", lt, &pkt), 0);
    }
}
