//! Link types: names, numbers, and where each one keeps its headers.
//!
//! One table says, for every supported link type, where the link header's
//! protocol field is and how it is spelled, and where the network header
//! starts. The code generator asks this table; it never switches on link
//! types itself.
//!
//! ```
//! use sluice_pcap::link::LinkType;
//! assert_eq!(LinkType::from_name("EN10MB"), Some(LinkType::EN10MB));
//! assert_eq!(LinkType::EN10MB.number(), 1);
//! ```

/// A link-layer header type (libpcap's DLT / LINKTYPE values).
///
/// ```
/// use sluice_pcap::link::LinkType;
/// assert_eq!(LinkType::from_number(113), Some(LinkType::LINUX_SLL));
/// ```
#[allow(non_camel_case_types, missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkType {
    NULL,
    EN10MB,
    PPP,
    RAW,
    LOOP,
    LINUX_SLL,
    LINUX_SLL2,
    IPV4,
    IPV6,
    IEEE802_11,
    IEEE802_11_RADIO,
    IEEE802_11_RADIO_AVS,
    PRISM_HEADER,
    PPI,
    PPP_ETHER,
    C_HDLC,
    FDDI,
    IEEE802,
    IP_OVER_FC,
    ATM_RFC1483,
    ATM_CLIP,
    SUNATM,
    MTP2,
    PFLOG,
    DSA_TAG_BRCM,
    DSA_TAG_DSA,
    ARCNET,
    ARCNET_LINUX,
    BACNET_MS_TP,
    PPP_BSDOS,
    PPP_PPPD,
    PPP_SERIAL,
    SLIP,
    SLIP_BSDOS,
    IPNET,
    FRELAY,
    ENC,
    SYMANTEC_FIREWALL,
    APPLE_IP_OVER_IEEE1394,
    LTALK,
    NETANALYZER,
    NETANALYZER_TRANSPARENT,
    JUNIPER_MFR,
}

/// (variant, libpcap DLT name, LINKTYPE number written in capture files,
/// other DLT numbers that mean the same on some systems).
const TABLE: &[(LinkType, &str, u32, &[u32])] = &[
    (LinkType::NULL, "NULL", 0, &[]),
    (LinkType::EN10MB, "EN10MB", 1, &[]),
    (LinkType::PPP, "PPP", 9, &[]),
    (LinkType::RAW, "RAW", 101, &[12, 14]),
    (LinkType::LOOP, "LOOP", 108, &[]),
    (LinkType::LINUX_SLL, "LINUX_SLL", 113, &[]),
    (LinkType::LINUX_SLL2, "LINUX_SLL2", 276, &[]),
    (LinkType::IPV4, "IPV4", 228, &[]),
    (LinkType::IPV6, "IPV6", 229, &[]),
    (LinkType::PPP_ETHER, "PPP_ETHER", 51, &[]),
    (LinkType::C_HDLC, "C_HDLC", 104, &[]),
    (LinkType::FDDI, "FDDI", 10, &[]),
    (LinkType::IEEE802, "IEEE802", 6, &[]),
    (LinkType::IP_OVER_FC, "IP_OVER_FC", 122, &[]),
    (LinkType::ATM_RFC1483, "ATM_RFC1483", 100, &[11]),
    (LinkType::ATM_CLIP, "ATM_CLIP", 106, &[19]),
    (LinkType::SUNATM, "SUNATM", 123, &[]),
    (LinkType::MTP2, "MTP2", 140, &[]),
    (LinkType::PFLOG, "PFLOG", 117, &[]),
    (LinkType::DSA_TAG_BRCM, "DSA_TAG_BRCM", 281, &[]),
    (LinkType::DSA_TAG_DSA, "DSA_TAG_DSA", 284, &[]),
    (LinkType::ARCNET, "ARCNET", 7, &[]),
    (LinkType::ARCNET_LINUX, "ARCNET_LINUX", 129, &[]),
    (LinkType::BACNET_MS_TP, "BACNET_MS_TP", 165, &[]),
    (LinkType::PPP_BSDOS, "PPP_BSDOS", 103, &[16]),
    (LinkType::PPP_PPPD, "PPP_PPPD", 166, &[]),
    (LinkType::PPP_SERIAL, "PPP_SERIAL", 50, &[]),
    (LinkType::SLIP, "SLIP", 8, &[]),
    (LinkType::SLIP_BSDOS, "SLIP_BSDOS", 102, &[15]),
    (LinkType::IPNET, "IPNET", 226, &[]),
    (LinkType::FRELAY, "FRELAY", 107, &[]),
    (LinkType::ENC, "ENC", 109, &[]),
    (LinkType::SYMANTEC_FIREWALL, "SYMANTEC_FIREWALL", 99, &[]),
    (
        LinkType::APPLE_IP_OVER_IEEE1394,
        "APPLE_IP_OVER_IEEE1394",
        138,
        &[],
    ),
    (LinkType::LTALK, "LTALK", 114, &[]),
    (LinkType::NETANALYZER, "NETANALYZER", 240, &[]),
    (
        LinkType::NETANALYZER_TRANSPARENT,
        "NETANALYZER_TRANSPARENT",
        241,
        &[],
    ),
    (LinkType::JUNIPER_MFR, "JUNIPER_MFR", 134, &[]),
    (LinkType::IEEE802_11, "IEEE802_11", 105, &[]),
    (LinkType::IEEE802_11_RADIO, "IEEE802_11_RADIO", 127, &[]),
    (
        LinkType::IEEE802_11_RADIO_AVS,
        "IEEE802_11_RADIO_AVS",
        163,
        &[],
    ),
    (LinkType::PRISM_HEADER, "PRISM_HEADER", 119, &[]),
    (LinkType::PPI, "PPI", 192, &[]),
];

impl LinkType {
    /// The link type of a libpcap DLT name (case-insensitive, `DLT_` prefix optional).
    ///
    /// ```
    /// use sluice_pcap::link::LinkType;
    /// assert_eq!(LinkType::from_name("dlt_raw"), Some(LinkType::RAW));
    /// ```
    pub fn from_name(name: &str) -> Option<LinkType> {
        let upper = name.to_ascii_uppercase();
        let bare = upper.strip_prefix("DLT_").unwrap_or(&upper);
        TABLE.iter().find(|e| e.1 == bare).map(|e| e.0)
    }

    /// The link type of a number found in a capture file.
    ///
    /// ```
    /// use sluice_pcap::link::LinkType;
    /// assert_eq!(LinkType::from_number(1), Some(LinkType::EN10MB));
    /// assert_eq!(LinkType::from_number(12), Some(LinkType::RAW));
    /// ```
    pub fn from_number(n: u32) -> Option<LinkType> {
        TABLE
            .iter()
            .find(|e| e.2 == n || e.3.contains(&n))
            .map(|e| e.0)
    }

    /// The LINKTYPE number written in capture files.
    ///
    /// ```
    /// assert_eq!(sluice_pcap::link::LinkType::LINUX_SLL2.number(), 276);
    /// ```
    pub fn number(self) -> u32 {
        TABLE.iter().find(|e| e.0 == self).map(|e| e.2).unwrap_or(0)
    }

    /// libpcap's name for the link type.
    ///
    /// ```
    /// assert_eq!(sluice_pcap::link::LinkType::IPV6.name(), "IPV6");
    /// ```
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|e| e.0 == self)
            .map(|e| e.1)
            .unwrap_or("?")
    }

    /// Every supported link type.
    ///
    /// ```
    /// assert!(sluice_pcap::link::LinkType::all().count() >= 10);
    /// ```
    pub fn all() -> impl Iterator<Item = LinkType> {
        TABLE.iter().map(|e| e.0)
    }
}

impl std::fmt::Display for LinkType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a link header names the protocol it carries.
///
/// ```
/// use sluice_pcap::link::ProtoField;
/// assert_ne!(ProtoField::EtherType, ProtoField::Ppp);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoField {
    /// An Ethernet type/length field; values up to 1500 are 802.3 lengths
    /// followed by an 802.2 LLC header.
    EtherType,
    /// Linux cooked capture's protocol field: an Ethernet type, or small
    /// values for LLC (4) and Novell 802.3 (1).
    Sll,
    /// PPP protocol numbers (IPv4 is 0x0021).
    Ppp,
    /// Cisco HDLC: Ethernet types.
    CiscoHdlc,
    /// BSD loopback: an address family, in host byte order (NULL) or network
    /// byte order (LOOP), 4 bytes.
    AddressFamily {
        /// Network byte order (LOOP) rather than the capturing host's.
        network_order: bool,
    },
    /// No protocol field: the packet is an IP packet; its version nibble decides.
    IpVersion,
    /// Only IPv4 can be carried.
    OnlyIpv4,
    /// Only IPv6 can be carried.
    OnlyIpv6,
    /// 802.11: an LLC/SNAP header after a variable-length MAC header.
    Ieee80211,
    /// An 802.2 LLC header (FDDI, token ring, IP over Fibre Channel, ATM
    /// RFC 1483): SAPs, and Ethernet types where a SNAP header would hold
    /// them. The protocol field is that SNAP type, 6 bytes into the LLC header.
    Llc,
    /// SunATM: a 4-byte ATM pseudo-header, then LLC-multiplexed traffic.
    SunAtm,
    /// Ethernet over ATM LAN emulation (SunATM after `lane`): LE control
    /// frames (0xff00) carry no Ethernet frame.
    LaneEther,
    /// BSD/OS PPP: PPP protocol numbers, with IPv4 also as VJ-compressed (0x2d, 0x2f).
    PppBsdos,
    /// SLIP: the IP version nibble, read (as libpcap does) from the first byte of the link header.
    SlipIp,
    /// pflog and Solaris ipnet: an address family byte at offset 1.
    FamilyByte,
    /// OpenBSD enc: an address family word in the capturing host's byte order.
    EncFamily,
    /// Frame Relay: a Q.933 NLPID after the 2-byte address.
    Frelay,
    /// Ethernet types without 802.3 lengths or LLC.
    PlainEtherType,
    /// LocalTalk: only AppleTalk.
    OnlyAtalk,
    /// ARCnet: a one-byte ARCnet protocol id.
    Arcnet,
    /// Juniper MFR: one magic-cookie test stands for every protocol.
    JuniperCookie,
    /// No link-layer protocol tests at all (MTP2, BACnet MS/TP).
    NoLinkType,
}

/// Fixed layout of a link type: where its protocol field and payload are,
/// relative to the start of the link header.
///
/// ```
/// use sluice_pcap::link::{LinkType, Layout};
/// let l = Layout::of(LinkType::EN10MB);
/// assert_eq!(l.payload, 14);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// How the protocol is named.
    pub field: ProtoField,
    /// Offset of the protocol field, if any.
    pub proto_at: Option<u32>,
    /// Offset of the link payload (the network header).
    pub payload: u32,
    /// Offsets of the source and destination MAC addresses, if the link has them.
    pub mac_src_dst: Option<(u32, u32)>,
}

impl Layout {
    /// The layout of a link type.
    ///
    /// ```
    /// use sluice_pcap::link::{LinkType, Layout};
    /// assert_eq!(Layout::of(LinkType::RAW).payload, 0);
    /// ```
    pub fn of(lt: LinkType) -> Layout {
        use ProtoField::*;
        let (field, proto_at, payload, macs) = match lt {
            LinkType::EN10MB => (EtherType, Some(12), 14, Some((6, 0))),
            LinkType::NULL => (
                AddressFamily {
                    network_order: false,
                },
                Some(0),
                4,
                None,
            ),
            LinkType::LOOP => (
                AddressFamily {
                    network_order: true,
                },
                Some(0),
                4,
                None,
            ),
            LinkType::PPP | LinkType::PPP_ETHER => (Ppp, Some(2), 4, None),
            LinkType::C_HDLC => (CiscoHdlc, Some(2), 4, None),
            LinkType::RAW => (IpVersion, None, 0, None),
            LinkType::IPV4 => (OnlyIpv4, None, 0, None),
            LinkType::IPV6 => (OnlyIpv6, None, 0, None),
            LinkType::LINUX_SLL => (Sll, Some(14), 16, None),
            LinkType::LINUX_SLL2 => (Sll, Some(0), 20, None),
            LinkType::FDDI => (Llc, Some(13 + 6), 13 + 8, Some((7, 1))),
            LinkType::IEEE802 => (Llc, Some(14 + 6), 14 + 8, Some((8, 2))),
            LinkType::IP_OVER_FC => (Llc, Some(16 + 6), 16 + 8, Some((10, 2))),
            LinkType::ATM_RFC1483 | LinkType::ATM_CLIP => (Llc, Some(6), 8, None),
            LinkType::SUNATM => (SunAtm, Some(4 + 6), 4 + 8, None),
            LinkType::MTP2 | LinkType::BACNET_MS_TP => (NoLinkType, None, 0, None),
            // The pflog header's length is in its first byte: see gen/pflog.rs.
            LinkType::PFLOG => (FamilyByte, Some(1), 0, None),
            LinkType::IPNET => (FamilyByte, Some(1), 24, None),
            LinkType::DSA_TAG_BRCM | LinkType::DSA_TAG_DSA => {
                (EtherType, Some(16), 18, Some((6, 0)))
            }
            LinkType::NETANALYZER => (EtherType, Some(16), 18, Some((10, 4))),
            LinkType::NETANALYZER_TRANSPARENT => (EtherType, Some(24), 26, Some((18, 12))),
            LinkType::ARCNET => (Arcnet, Some(2), 6, None),
            LinkType::ARCNET_LINUX => (Arcnet, Some(4), 8, None),
            LinkType::PPP_BSDOS => (PppBsdos, Some(5), 24, None),
            LinkType::PPP_PPPD | LinkType::PPP_SERIAL => (Ppp, Some(2), 4, None),
            LinkType::SLIP => (SlipIp, None, 16, None),
            LinkType::SLIP_BSDOS => (SlipIp, None, 24, None),
            LinkType::FRELAY => (Frelay, Some(2), 0, None),
            LinkType::ENC => (EncFamily, Some(0), 12, None),
            LinkType::SYMANTEC_FIREWALL => (PlainEtherType, Some(6), 44, None),
            LinkType::APPLE_IP_OVER_IEEE1394 => (PlainEtherType, Some(16), 18, None),
            LinkType::LTALK => (OnlyAtalk, None, 0, None),
            LinkType::JUNIPER_MFR => (JuniperCookie, None, 4, None),
            // The 802.11 offsets vary per packet: see gen/wlan.rs.
            LinkType::IEEE802_11
            | LinkType::IEEE802_11_RADIO
            | LinkType::IEEE802_11_RADIO_AVS
            | LinkType::PRISM_HEADER
            | LinkType::PPI => (Ieee80211, None, 0, None),
        };
        let (field, proto_at, payload) = match lt {
            LinkType::PPP_ETHER => (field, Some(6), 8),
            _ => (field, proto_at, payload),
        };
        Layout {
            field,
            proto_at,
            payload,
            mac_src_dst: macs,
        }
    }
}
