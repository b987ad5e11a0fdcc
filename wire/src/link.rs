//! Link types: names, numbers, and where each one keeps its headers.
//!
//! One table says, for every supported link type, where the link header's
//! protocol field is and how it is spelled, and where the network header
//! starts. The pcap code generator, the fragment locator ([`crate::network`])
//! and the packet summaries ask this table; they never keep offsets of
//! their own.
//!
//! ```
//! use sluice_wire::link::LinkType;
//! assert_eq!(LinkType::from_name("EN10MB"), Some(LinkType::EN10MB));
//! assert_eq!(LinkType::EN10MB.number(), 1);
//! ```

/// A link-layer header type (libpcap's DLT / LINKTYPE values).
///
/// ```
/// use sluice_wire::link::LinkType;
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
    JUNIPER_MLPPP,
    JUNIPER_MLFR,
    JUNIPER_ES,
    JUNIPER_GGSN,
    JUNIPER_ATM2,
    JUNIPER_SERVICES,
    JUNIPER_ATM1,
    JUNIPER_MONITOR,
    JUNIPER_PPPOE,
    JUNIPER_PPPOE_ATM,
    JUNIPER_ETHER,
    JUNIPER_PPP,
    JUNIPER_FRELAY,
    JUNIPER_CHDLC,
    JUNIPER_VP,
    JUNIPER_ISM,
    JUNIPER_ST,
    JUNIPER_VS,
    JUNIPER_SRX_E2E,
    JUNIPER_FIBRECHANNEL,
    JUNIPER_ATM_CEMIC,
    JUNIPER_PIC_PEER,
    ERF,
    MTP2_WITH_PHDR,
    DSA_TAG_EDSA,
    DSA_TAG_BRCM_PREPEND,
    EN3MB,
    AX25,
    PRONET,
    CHAOS,
    REDBACK_SMARTEDGE,
    MTP3,
    SCCP,
    DOCSIS,
    LINUX_IRDA,
    GPRS_LLC,
    GPF_T,
    GPF_F,
    ERF_ETH,
    ERF_POS,
    LINUX_LAPD,
    MFR,
    A429,
    A653_ICM,
    USB_FREEBSD,
    BLUETOOTH_HCI_H4,
    IEEE802_16_MAC_CPS,
    USB_LINUX,
    CAN20B,
    IEEE802_15_4_LINUX,
    IEEE802_16_MAC_CPS_RADIO,
    IEEE802_15_4,
    SITA,
    RAIF1,
    IPMB_KONTRON,
    BLUETOOTH_HCI_H4_WITH_PHDR,
    AX25_KISS,
    I2C_LINUX,
    IEEE802_15_4_NONASK_PHY,
    LINUX_EVDEV,
    MPLS,
    USB_LINUX_MMAPPED,
    DECT,
    AOS,
    WIHART,
    FC_2,
    FC_2_WITH_FRAME_DELIMS,
    CAN_SOCKETCAN,
    IEEE802_15_4_NOFCS,
    DBUS,
    DVB_CI,
    MUX27010,
    STANAG_5066_D_PDU,
    NFLOG,
    IPOIB,
    MPEG_2_TS,
    NG40,
    NFC_LLCP,
    PFSYNC,
    INFINIBAND,
    SCTP,
    USBPCAP,
    RTAC_SERIAL,
    BLUETOOTH_LE_LL,
    NETLINK,
    BLUETOOTH_LINUX_MONITOR,
    BLUETOOTH_BREDR_BB,
    BLUETOOTH_LE_LL_WITH_PHDR,
    PROFIBUS_DL,
    PKTAP,
    EPON,
    IPMI_HPM_2,
    ZWAVE_R1_R2,
    ZWAVE_R3,
    WATTSTOPPER_DLM,
    ISO_14443,
    RDS,
    USB_DARWIN,
    OPENFLOW,
    SDLC,
    TI_LLN_SNIFFER,
    VSOCK,
    NORDIC_BLE,
    DOCSIS31_XRA31,
    ETHERNET_MPACKET,
    DISPLAYPORT_AUX,
    OPENVIZSLA,
    EBHSCR,
    VPP_DISPATCH,
    ELEE,
    Z_WAVE_SERIAL,
    USB_2_0,
    ATSC_ALP,
    ETW,
    NETANALYZER_NG,
    ZBOSS_NCP,
    USB_2_0_LOW_SPEED,
    USB_2_0_FULL_SPEED,
    USB_2_0_HIGH_SPEED,
    AUERSWALD_LOG,
    ZWAVE_TAP,
    SILABS_DEBUG_CHANNEL,
    FIRA_UCI,
    MDB,
    DECT_NR,
    IEEE802_15_4_TAP,
    /// A value of libpcap's matching range (104 to 304) with no layout of
    /// its own (USER0 to USER15, and values assigned without a libpcap
    /// name): libpcap compiles filters for it that read only raw bytes
    /// (`link[...]`, `len`, relations).
    Matching(u16),
}

/// libpcap's matching range: DLT values equal to their LINKTYPE value.
const MATCHING: std::ops::RangeInclusive<u32> = 104..=304;

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
    (LinkType::JUNIPER_MLPPP, "JUNIPER_MLPPP", 130, &[]),
    (LinkType::JUNIPER_MLFR, "JUNIPER_MLFR", 131, &[]),
    (LinkType::JUNIPER_ES, "JUNIPER_ES", 132, &[]),
    (LinkType::JUNIPER_GGSN, "JUNIPER_GGSN", 133, &[]),
    (LinkType::JUNIPER_ATM2, "JUNIPER_ATM2", 135, &[]),
    (LinkType::JUNIPER_SERVICES, "JUNIPER_SERVICES", 136, &[]),
    (LinkType::JUNIPER_ATM1, "JUNIPER_ATM1", 137, &[]),
    (LinkType::JUNIPER_MONITOR, "JUNIPER_MONITOR", 164, &[]),
    (LinkType::JUNIPER_PPPOE, "JUNIPER_PPPOE", 167, &[]),
    (LinkType::JUNIPER_PPPOE_ATM, "JUNIPER_PPPOE_ATM", 168, &[]),
    (LinkType::JUNIPER_ETHER, "JUNIPER_ETHER", 178, &[]),
    (LinkType::JUNIPER_PPP, "JUNIPER_PPP", 179, &[]),
    (LinkType::JUNIPER_FRELAY, "JUNIPER_FRELAY", 180, &[]),
    (LinkType::JUNIPER_CHDLC, "JUNIPER_CHDLC", 181, &[]),
    (LinkType::JUNIPER_VP, "JUNIPER_VP", 183, &[]),
    (LinkType::JUNIPER_ISM, "JUNIPER_ISM", 194, &[]),
    (LinkType::JUNIPER_ST, "JUNIPER_ST", 200, &[]),
    (LinkType::JUNIPER_VS, "JUNIPER_VS", 232, &[]),
    (LinkType::JUNIPER_SRX_E2E, "JUNIPER_SRX_E2E", 233, &[]),
    (
        LinkType::JUNIPER_FIBRECHANNEL,
        "JUNIPER_FIBRECHANNEL",
        234,
        &[],
    ),
    (LinkType::JUNIPER_ATM_CEMIC, "JUNIPER_ATM_CEMIC", 238, &[]),
    (LinkType::JUNIPER_PIC_PEER, "JUNIPER_PIC_PEER", 174, &[]),
    (LinkType::ERF, "ERF", 197, &[]),
    (LinkType::MTP2_WITH_PHDR, "MTP2_WITH_PHDR", 139, &[]),
    (LinkType::DSA_TAG_EDSA, "DSA_TAG_EDSA", 285, &[]),
    (
        LinkType::DSA_TAG_BRCM_PREPEND,
        "DSA_TAG_BRCM_PREPEND",
        282,
        &[],
    ),
    (LinkType::EN3MB, "EN3MB", 2, &[]),
    (LinkType::AX25, "AX25", 3, &[]),
    (LinkType::PRONET, "PRONET", 4, &[]),
    (LinkType::CHAOS, "CHAOS", 5, &[]),
    (LinkType::REDBACK_SMARTEDGE, "REDBACK_SMARTEDGE", 32, &[]),
    (LinkType::MTP3, "MTP3", 141, &[]),
    (LinkType::SCCP, "SCCP", 142, &[]),
    (LinkType::DOCSIS, "DOCSIS", 143, &[]),
    (LinkType::LINUX_IRDA, "LINUX_IRDA", 144, &[]),
    (LinkType::GPRS_LLC, "GPRS_LLC", 169, &[]),
    (LinkType::GPF_T, "GPF_T", 170, &[]),
    (LinkType::GPF_F, "GPF_F", 171, &[]),
    (LinkType::ERF_ETH, "ERF_ETH", 175, &[]),
    (LinkType::ERF_POS, "ERF_POS", 176, &[]),
    (LinkType::LINUX_LAPD, "LINUX_LAPD", 177, &[]),
    (LinkType::MFR, "MFR", 182, &[]),
    (LinkType::A429, "A429", 184, &[]),
    (LinkType::A653_ICM, "A653_ICM", 185, &[]),
    (LinkType::USB_FREEBSD, "USB_FREEBSD", 186, &[]),
    (LinkType::BLUETOOTH_HCI_H4, "BLUETOOTH_HCI_H4", 187, &[]),
    (LinkType::IEEE802_16_MAC_CPS, "IEEE802_16_MAC_CPS", 188, &[]),
    (LinkType::USB_LINUX, "USB_LINUX", 189, &[]),
    (LinkType::CAN20B, "CAN20B", 190, &[]),
    (LinkType::IEEE802_15_4_LINUX, "IEEE802_15_4_LINUX", 191, &[]),
    (
        LinkType::IEEE802_16_MAC_CPS_RADIO,
        "IEEE802_16_MAC_CPS_RADIO",
        193,
        &[],
    ),
    (LinkType::IEEE802_15_4, "IEEE802_15_4", 195, &[]),
    (LinkType::SITA, "SITA", 196, &[]),
    (LinkType::RAIF1, "RAIF1", 198, &[]),
    (LinkType::IPMB_KONTRON, "IPMB_KONTRON", 199, &[]),
    (
        LinkType::BLUETOOTH_HCI_H4_WITH_PHDR,
        "BLUETOOTH_HCI_H4_WITH_PHDR",
        201,
        &[],
    ),
    (LinkType::AX25_KISS, "AX25_KISS", 202, &[]),
    (LinkType::I2C_LINUX, "I2C_LINUX", 209, &[]),
    (
        LinkType::IEEE802_15_4_NONASK_PHY,
        "IEEE802_15_4_NONASK_PHY",
        215,
        &[],
    ),
    (LinkType::LINUX_EVDEV, "LINUX_EVDEV", 216, &[]),
    (LinkType::MPLS, "MPLS", 219, &[]),
    (LinkType::USB_LINUX_MMAPPED, "USB_LINUX_MMAPPED", 220, &[]),
    (LinkType::DECT, "DECT", 221, &[]),
    (LinkType::AOS, "AOS", 222, &[]),
    (LinkType::WIHART, "WIHART", 223, &[]),
    (LinkType::FC_2, "FC_2", 224, &[]),
    (
        LinkType::FC_2_WITH_FRAME_DELIMS,
        "FC_2_WITH_FRAME_DELIMS",
        225,
        &[],
    ),
    (LinkType::CAN_SOCKETCAN, "CAN_SOCKETCAN", 227, &[]),
    (LinkType::IEEE802_15_4_NOFCS, "IEEE802_15_4_NOFCS", 230, &[]),
    (LinkType::DBUS, "DBUS", 231, &[]),
    (LinkType::DVB_CI, "DVB_CI", 235, &[]),
    (LinkType::MUX27010, "MUX27010", 236, &[]),
    (LinkType::STANAG_5066_D_PDU, "STANAG_5066_D_PDU", 237, &[]),
    (LinkType::NFLOG, "NFLOG", 239, &[]),
    (LinkType::IPOIB, "IPOIB", 242, &[]),
    (LinkType::MPEG_2_TS, "MPEG_2_TS", 243, &[]),
    (LinkType::NG40, "NG40", 244, &[]),
    (LinkType::NFC_LLCP, "NFC_LLCP", 245, &[]),
    (LinkType::PFSYNC, "PFSYNC", 246, &[]),
    (LinkType::INFINIBAND, "INFINIBAND", 247, &[]),
    (LinkType::SCTP, "SCTP", 248, &[]),
    (LinkType::USBPCAP, "USBPCAP", 249, &[]),
    (LinkType::RTAC_SERIAL, "RTAC_SERIAL", 250, &[]),
    (LinkType::BLUETOOTH_LE_LL, "BLUETOOTH_LE_LL", 251, &[]),
    (LinkType::NETLINK, "NETLINK", 253, &[]),
    (
        LinkType::BLUETOOTH_LINUX_MONITOR,
        "BLUETOOTH_LINUX_MONITOR",
        254,
        &[],
    ),
    (LinkType::BLUETOOTH_BREDR_BB, "BLUETOOTH_BREDR_BB", 255, &[]),
    (
        LinkType::BLUETOOTH_LE_LL_WITH_PHDR,
        "BLUETOOTH_LE_LL_WITH_PHDR",
        256,
        &[],
    ),
    (LinkType::PROFIBUS_DL, "PROFIBUS_DL", 257, &[]),
    (LinkType::PKTAP, "PKTAP", 258, &[]),
    (LinkType::EPON, "EPON", 259, &[]),
    (LinkType::IPMI_HPM_2, "IPMI_HPM_2", 260, &[]),
    (LinkType::ZWAVE_R1_R2, "ZWAVE_R1_R2", 261, &[]),
    (LinkType::ZWAVE_R3, "ZWAVE_R3", 262, &[]),
    (LinkType::WATTSTOPPER_DLM, "WATTSTOPPER_DLM", 263, &[]),
    (LinkType::ISO_14443, "ISO_14443", 264, &[]),
    (LinkType::RDS, "RDS", 265, &[]),
    (LinkType::USB_DARWIN, "USB_DARWIN", 266, &[]),
    (LinkType::OPENFLOW, "OPENFLOW", 267, &[]),
    (LinkType::SDLC, "SDLC", 268, &[]),
    (LinkType::TI_LLN_SNIFFER, "TI_LLN_SNIFFER", 269, &[]),
    (LinkType::VSOCK, "VSOCK", 271, &[]),
    (LinkType::NORDIC_BLE, "NORDIC_BLE", 272, &[]),
    (LinkType::DOCSIS31_XRA31, "DOCSIS31_XRA31", 273, &[]),
    (LinkType::ETHERNET_MPACKET, "ETHERNET_MPACKET", 274, &[]),
    (LinkType::DISPLAYPORT_AUX, "DISPLAYPORT_AUX", 275, &[]),
    (LinkType::OPENVIZSLA, "OPENVIZSLA", 278, &[]),
    (LinkType::EBHSCR, "EBHSCR", 279, &[]),
    (LinkType::VPP_DISPATCH, "VPP_DISPATCH", 280, &[]),
    (LinkType::ELEE, "ELEE", 286, &[]),
    (LinkType::Z_WAVE_SERIAL, "Z_WAVE_SERIAL", 287, &[]),
    (LinkType::USB_2_0, "USB_2_0", 288, &[]),
    (LinkType::ATSC_ALP, "ATSC_ALP", 289, &[]),
    (LinkType::ETW, "ETW", 290, &[]),
    (LinkType::NETANALYZER_NG, "NETANALYZER_NG", 291, &[]),
    (LinkType::ZBOSS_NCP, "ZBOSS_NCP", 292, &[]),
    (LinkType::USB_2_0_LOW_SPEED, "USB_2_0_LOW_SPEED", 293, &[]),
    (LinkType::USB_2_0_FULL_SPEED, "USB_2_0_FULL_SPEED", 294, &[]),
    (LinkType::USB_2_0_HIGH_SPEED, "USB_2_0_HIGH_SPEED", 295, &[]),
    (LinkType::AUERSWALD_LOG, "AUERSWALD_LOG", 296, &[]),
    (LinkType::ZWAVE_TAP, "ZWAVE_TAP", 297, &[]),
    (
        LinkType::SILABS_DEBUG_CHANNEL,
        "SILABS_DEBUG_CHANNEL",
        298,
        &[],
    ),
    (LinkType::FIRA_UCI, "FIRA_UCI", 299, &[]),
    (LinkType::MDB, "MDB", 300, &[]),
    (LinkType::DECT_NR, "DECT_NR", 301, &[]),
    (LinkType::IEEE802_15_4_TAP, "IEEE802_15_4_TAP", 283, &[]),
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
    /// use sluice_wire::link::LinkType;
    /// assert_eq!(LinkType::from_name("dlt_raw"), Some(LinkType::RAW));
    /// ```
    pub fn from_name(name: &str) -> Option<LinkType> {
        let upper = name.to_ascii_uppercase();
        let bare = upper.strip_prefix("DLT_").unwrap_or(&upper);
        TABLE.iter().find(|e| e.1 == bare).map(|e| e.0).or_else(|| {
            let n: u16 = bare.strip_prefix("USER")?.parse().ok()?;
            (n <= 15).then_some(LinkType::Matching(147 + n))
        })
    }

    /// The link type of a number found in a capture file.
    ///
    /// ```
    /// use sluice_wire::link::LinkType;
    /// assert_eq!(LinkType::from_number(1), Some(LinkType::EN10MB));
    /// assert_eq!(LinkType::from_number(12), Some(LinkType::RAW));
    /// assert_eq!(LinkType::from_number(147), Some(LinkType::Matching(147)));
    /// assert_eq!(LinkType::from_number(305), None);
    /// ```
    pub fn from_number(n: u32) -> Option<LinkType> {
        TABLE
            .iter()
            .find(|e| e.2 == n || e.3.contains(&n))
            .map(|e| e.0)
            .or_else(|| {
                MATCHING
                    .contains(&n)
                    .then_some(LinkType::Matching(n as u16))
            })
    }

    /// The LINKTYPE number written in capture files.
    ///
    /// ```
    /// assert_eq!(sluice_wire::link::LinkType::LINUX_SLL2.number(), 276);
    /// ```
    pub fn number(self) -> u32 {
        if let LinkType::Matching(n) = self {
            return u32::from(n);
        }
        TABLE.iter().find(|e| e.0 == self).map(|e| e.2).unwrap_or(0)
    }

    /// The DLT value libpcap uses for it on Linux, what `pcap_open_dead`
    /// takes: the LINKTYPE number, except where the two differ (raw IP is
    /// LINKTYPE 101 in files and DLT 12 in programs).
    ///
    /// ```
    /// use sluice_wire::link::LinkType;
    /// assert_eq!(LinkType::RAW.dlt(), 12);
    /// assert_eq!(LinkType::EN10MB.dlt(), 1);
    /// ```
    pub fn dlt(self) -> u32 {
        TABLE
            .iter()
            .find(|e| e.0 == self)
            .map(|e| e.3.first().copied().unwrap_or(e.2))
            .unwrap_or(0)
    }

    /// libpcap's name for the link type.
    ///
    /// ```
    /// assert_eq!(sluice_wire::link::LinkType::IPV6.name(), "IPV6");
    /// ```
    pub fn name(self) -> &'static str {
        if let LinkType::Matching(n) = self {
            return matching_name(n);
        }
        TABLE
            .iter()
            .find(|e| e.0 == self)
            .map(|e| e.1)
            .unwrap_or("?")
    }

    /// Every supported link type.
    ///
    /// ```
    /// assert!(sluice_wire::link::LinkType::all().count() >= 10);
    /// ```
    pub fn all() -> impl Iterator<Item = LinkType> {
        TABLE.iter().map(|e| e.0)
    }
}

/// The name of a matching-range value without a layout: `USER0` to
/// `USER15` (147 to 162), else `DLT n`.
fn matching_name(n: u16) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        MATCHING
            .map(|v| match v {
                147..=162 => format!("USER{}", v - 147),
                _ => format!("DLT {v}"),
            })
            .collect()
    });
    names
        .get(usize::from(n).wrapping_sub(*MATCHING.start() as usize))
        .map_or("?", String::as_str)
}

impl std::fmt::Display for LinkType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a link header names the protocol it carries.
///
/// ```
/// use sluice_wire::link::ProtoField;
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
    /// No protocol field: every link-layer protocol test is refused
    /// (MTP2, BACnet MS/TP, USB, Bluetooth, CAN, D-Bus and the other links
    /// where libpcap filters only on raw bytes, lengths and `link[...]`).
    NoLinkType,
}

/// Fixed layout of a link type: where its protocol field and payload are,
/// relative to the start of the link header.
///
/// ```
/// use sluice_wire::link::{LinkType, Layout};
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
    /// use sluice_wire::link::{LinkType, Layout};
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
            // The pflog header's length is in its first byte: see sluice-pcap's gen/pflog.rs.
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
            LinkType::JUNIPER_MLPPP
            | LinkType::JUNIPER_MLFR
            | LinkType::JUNIPER_PPP
            | LinkType::JUNIPER_CHDLC
            | LinkType::JUNIPER_FRELAY
            | LinkType::JUNIPER_ATM1 => (JuniperCookie, None, 4, None),
            LinkType::JUNIPER_PPPOE_ATM => (JuniperCookie, None, 6, None),
            LinkType::JUNIPER_ATM2 => (JuniperCookie, None, 8, None),
            LinkType::JUNIPER_GGSN | LinkType::JUNIPER_MONITOR => (JuniperCookie, None, 12, None),
            LinkType::JUNIPER_ETHER | LinkType::JUNIPER_PPPOE => (JuniperCookie, None, 32, None),
            // No network-layer offset: libpcap adds its "not set" marker (-1)
            // twice and loads at 2^32 - 2 + k, wrapping as its constants do.
            LinkType::JUNIPER_ES
            | LinkType::JUNIPER_SERVICES
            | LinkType::JUNIPER_VP
            | LinkType::JUNIPER_ISM
            | LinkType::JUNIPER_ST
            | LinkType::JUNIPER_VS
            | LinkType::JUNIPER_SRX_E2E
            | LinkType::JUNIPER_FIBRECHANNEL
            | LinkType::JUNIPER_ATM_CEMIC => (JuniperCookie, None, 0u32.wrapping_sub(2), None),
            // MTP2 behind a pseudo-header (4 bytes) or an ERF record header (20 bytes).
            LinkType::MTP2_WITH_PHDR | LinkType::ERF => (NoLinkType, None, 0, None),
            // Links where libpcap master filters on nothing but the raw bytes.
            LinkType::JUNIPER_PIC_PEER
            | LinkType::DSA_TAG_EDSA
            | LinkType::DSA_TAG_BRCM_PREPEND
            | LinkType::EN3MB
            | LinkType::AX25
            | LinkType::PRONET
            | LinkType::CHAOS
            | LinkType::REDBACK_SMARTEDGE
            | LinkType::MTP3
            | LinkType::SCCP
            | LinkType::DOCSIS
            | LinkType::LINUX_IRDA
            | LinkType::GPRS_LLC
            | LinkType::GPF_T
            | LinkType::GPF_F
            | LinkType::ERF_ETH
            | LinkType::ERF_POS
            | LinkType::LINUX_LAPD
            | LinkType::MFR
            | LinkType::A429
            | LinkType::A653_ICM
            | LinkType::USB_FREEBSD
            | LinkType::BLUETOOTH_HCI_H4
            | LinkType::IEEE802_16_MAC_CPS
            | LinkType::USB_LINUX
            | LinkType::CAN20B
            | LinkType::IEEE802_15_4_LINUX
            | LinkType::IEEE802_16_MAC_CPS_RADIO
            | LinkType::IEEE802_15_4
            | LinkType::SITA
            | LinkType::RAIF1
            | LinkType::IPMB_KONTRON
            | LinkType::BLUETOOTH_HCI_H4_WITH_PHDR
            | LinkType::AX25_KISS
            | LinkType::I2C_LINUX
            | LinkType::IEEE802_15_4_NONASK_PHY
            | LinkType::LINUX_EVDEV
            | LinkType::MPLS
            | LinkType::USB_LINUX_MMAPPED
            | LinkType::DECT
            | LinkType::AOS
            | LinkType::WIHART
            | LinkType::FC_2
            | LinkType::FC_2_WITH_FRAME_DELIMS
            | LinkType::CAN_SOCKETCAN
            | LinkType::IEEE802_15_4_NOFCS
            | LinkType::DBUS
            | LinkType::DVB_CI
            | LinkType::MUX27010
            | LinkType::STANAG_5066_D_PDU
            | LinkType::NFLOG
            | LinkType::IPOIB
            | LinkType::MPEG_2_TS
            | LinkType::NG40
            | LinkType::NFC_LLCP
            | LinkType::PFSYNC
            | LinkType::INFINIBAND
            | LinkType::SCTP
            | LinkType::USBPCAP
            | LinkType::RTAC_SERIAL
            | LinkType::BLUETOOTH_LE_LL
            | LinkType::NETLINK
            | LinkType::BLUETOOTH_LINUX_MONITOR
            | LinkType::BLUETOOTH_BREDR_BB
            | LinkType::BLUETOOTH_LE_LL_WITH_PHDR
            | LinkType::PROFIBUS_DL
            | LinkType::PKTAP
            | LinkType::EPON
            | LinkType::IPMI_HPM_2
            | LinkType::ZWAVE_R1_R2
            | LinkType::ZWAVE_R3
            | LinkType::WATTSTOPPER_DLM
            | LinkType::ISO_14443
            | LinkType::RDS
            | LinkType::USB_DARWIN
            | LinkType::OPENFLOW
            | LinkType::SDLC
            | LinkType::TI_LLN_SNIFFER
            | LinkType::VSOCK
            | LinkType::NORDIC_BLE
            | LinkType::DOCSIS31_XRA31
            | LinkType::ETHERNET_MPACKET
            | LinkType::DISPLAYPORT_AUX
            | LinkType::OPENVIZSLA
            | LinkType::EBHSCR
            | LinkType::VPP_DISPATCH
            | LinkType::ELEE
            | LinkType::Z_WAVE_SERIAL
            | LinkType::USB_2_0
            | LinkType::ATSC_ALP
            | LinkType::ETW
            | LinkType::NETANALYZER_NG
            | LinkType::ZBOSS_NCP
            | LinkType::USB_2_0_LOW_SPEED
            | LinkType::USB_2_0_FULL_SPEED
            | LinkType::USB_2_0_HIGH_SPEED
            | LinkType::AUERSWALD_LOG
            | LinkType::ZWAVE_TAP
            | LinkType::SILABS_DEBUG_CHANNEL
            | LinkType::FIRA_UCI
            | LinkType::MDB
            | LinkType::DECT_NR
            | LinkType::IEEE802_15_4_TAP
            | LinkType::Matching(_) => (NoLinkType, None, 0, None),
            // The 802.11 offsets vary per packet: see sluice-pcap's gen/wlan.rs.
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

/// The largest captured length that is sane for a link type, by its
/// LINKTYPE number (libpcap's rule: 262144 bytes, more for a few link
/// types that carry big messages).
///
/// ```
/// use sluice_wire::link::max_snaplen;
/// assert_eq!(max_snaplen(1), 262_144);
/// assert_eq!(max_snaplen(231), 128 * 1024 * 1024); // D-Bus
/// ```
pub fn max_snaplen(linktype: u16) -> u32 {
    match linktype {
        231 => 128 * 1024 * 1024, // LINKTYPE_DBUS
        249 => 1024 * 1024,       // LINKTYPE_USBPCAP
        279 => 8 * 1024 * 1024,   // LINKTYPE_EBHSCR
        _ => 262_144,
    }
}
