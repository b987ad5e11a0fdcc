//! Link types: names, numbers, and where each one keeps its headers.
//!
//! The rule: one table of link types. It gives every supported link type
//! its libpcap name, its LINKTYPE and DLT numbers and libpcap 1.10.3's
//! name and description (what the C front end answers, as Debian's
//! programs expect); [`Layout::of`] says where its protocol field is and
//! how it is spelled, and where the network header starts. The pcap code
//! generator, the fragment locator ([`crate::network`]), the packet
//! summaries and libpcap's C front end ask here; they keep no names,
//! numbers or offsets of their own.
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

/// What libpcap 1.10.3, the release Debian's programs were built
/// against, has for a link type in its table of names
/// (`pcap_datalink_val_to_name`, `pcap_datalink_val_to_description`):
/// libpcap's C front end answers with these, so that those programs print
/// on sluice what they print on libpcap.
#[derive(Clone, Copy)]
enum Libpcap110 {
    /// No entry: a name libpcap gave the value since.
    Absent,
    /// An entry under the same name, with this description.
    Same(&'static str),
    /// An entry under the name libpcap used then, with this description.
    Renamed(&'static str, &'static str),
}
use Libpcap110::{Absent, Renamed, Same};

/// The one table of link types: (variant, libpcap DLT name, LINKTYPE
/// number written in capture files, other DLT numbers that mean the same
/// on some systems (the first is Linux's), libpcap 1.10.3's entry).
#[rustfmt::skip]
const TABLE: &[(LinkType, &str, u32, &[u32], Libpcap110)] = &[
    (LinkType::NULL, "NULL", 0, &[], Same("BSD loopback")),
    (LinkType::EN10MB, "EN10MB", 1, &[], Same("Ethernet")),
    (LinkType::PPP, "PPP", 9, &[], Same("PPP")),
    (LinkType::RAW, "RAW", 101, &[12, 14], Same("Raw IP")),
    (LinkType::LOOP, "LOOP", 108, &[], Same("OpenBSD loopback")),
    (LinkType::LINUX_SLL, "LINUX_SLL", 113, &[], Same("Linux cooked v1")),
    (LinkType::LINUX_SLL2, "LINUX_SLL2", 276, &[], Same("Linux cooked v2")),
    (LinkType::IPV4, "IPV4", 228, &[], Same("Raw IPv4")),
    (LinkType::IPV6, "IPV6", 229, &[], Same("Raw IPv6")),
    (LinkType::PPP_ETHER, "PPP_ETHER", 51, &[], Same("PPPoE")),
    (LinkType::C_HDLC, "C_HDLC", 104, &[], Same("Cisco HDLC")),
    (LinkType::FDDI, "FDDI", 10, &[], Same("FDDI")),
    (LinkType::IEEE802, "IEEE802", 6, &[], Same("Token ring")),
    (LinkType::IP_OVER_FC, "IP_OVER_FC", 122, &[], Same("RFC 2625 IP-over-Fibre Channel")),
    (LinkType::ATM_RFC1483, "ATM_RFC1483", 100, &[11], Same("RFC 1483 LLC-encapsulated ATM")),
    (LinkType::ATM_CLIP, "ATM_CLIP", 106, &[19], Same("Linux Classical IP over ATM")),
    (LinkType::SUNATM, "SUNATM", 123, &[], Same("Sun raw ATM")),
    (LinkType::MTP2, "MTP2", 140, &[], Same("SS7 MTP2")),
    (LinkType::PFLOG, "PFLOG", 117, &[], Same("OpenBSD pflog file")),
    (LinkType::DSA_TAG_BRCM, "DSA_TAG_BRCM", 281, &[], Same("Broadcom tag")),
    (LinkType::DSA_TAG_DSA, "DSA_TAG_DSA", 284, &[], Same("Marvell DSA")),
    (LinkType::ARCNET, "ARCNET", 7, &[], Same("BSD ARCNET")),
    (LinkType::ARCNET_LINUX, "ARCNET_LINUX", 129, &[], Same("Linux ARCNET")),
    (LinkType::BACNET_MS_TP, "BACNET_MS_TP", 165, &[], Same("BACnet MS/TP")),
    (LinkType::PPP_BSDOS, "PPP_BSDOS", 103, &[16], Same("BSD/OS PPP")),
    (LinkType::PPP_PPPD, "PPP_PPPD", 166, &[], Same("PPP for pppd, with direction flag")),
    (LinkType::PPP_SERIAL, "PPP_SERIAL", 50, &[], Same("PPP over serial")),
    (LinkType::SLIP, "SLIP", 8, &[], Same("SLIP")),
    (LinkType::SLIP_BSDOS, "SLIP_BSDOS", 102, &[15], Same("BSD/OS SLIP")),
    (LinkType::IPNET, "IPNET", 226, &[], Same("Solaris ipnet")),
    (LinkType::FRELAY, "FRELAY", 107, &[], Same("Frame Relay")),
    (LinkType::ENC, "ENC", 109, &[], Same("OpenBSD encapsulated IP")),
    (LinkType::SYMANTEC_FIREWALL, "SYMANTEC_FIREWALL", 99, &[], Same("Symantec Firewall")),
    (LinkType::APPLE_IP_OVER_IEEE1394, "APPLE_IP_OVER_IEEE1394", 138, &[], Same("Apple IP-over-IEEE 1394")),
    (LinkType::LTALK, "LTALK", 114, &[], Same("Localtalk")),
    (LinkType::NETANALYZER, "NETANALYZER", 240, &[], Same("Ethernet with Hilscher netANALYZER pseudo-header")),
    (LinkType::NETANALYZER_TRANSPARENT, "NETANALYZER_TRANSPARENT", 241, &[], Same("Ethernet with Hilscher netANALYZER pseudo-header and with preamble and SFD")),
    (LinkType::JUNIPER_MFR, "JUNIPER_MFR", 134, &[], Same("Juniper FRF.16 Frame Relay")),
    (LinkType::JUNIPER_MLPPP, "JUNIPER_MLPPP", 130, &[], Same("Juniper Multi-Link PPP")),
    (LinkType::JUNIPER_MLFR, "JUNIPER_MLFR", 131, &[], Same("Juniper Multi-Link Frame Relay")),
    (LinkType::JUNIPER_ES, "JUNIPER_ES", 132, &[], Same("Juniper Encryption Services PIC")),
    (LinkType::JUNIPER_GGSN, "JUNIPER_GGSN", 133, &[], Same("Juniper GGSN PIC")),
    (LinkType::JUNIPER_ATM2, "JUNIPER_ATM2", 135, &[], Same("Juniper ATM2 PIC")),
    (LinkType::JUNIPER_SERVICES, "JUNIPER_SERVICES", 136, &[], Same("Juniper Advanced Services PIC")),
    (LinkType::JUNIPER_ATM1, "JUNIPER_ATM1", 137, &[], Same("Juniper ATM1 PIC")),
    (LinkType::JUNIPER_MONITOR, "JUNIPER_MONITOR", 164, &[], Same("Juniper Passive Monitor PIC")),
    (LinkType::JUNIPER_PPPOE, "JUNIPER_PPPOE", 167, &[], Same("Juniper PPPoE")),
    (LinkType::JUNIPER_PPPOE_ATM, "JUNIPER_PPPOE_ATM", 168, &[], Same("Juniper PPPoE/ATM")),
    (LinkType::JUNIPER_ETHER, "JUNIPER_ETHER", 178, &[], Same("Juniper Ethernet")),
    (LinkType::JUNIPER_PPP, "JUNIPER_PPP", 179, &[], Same("Juniper PPP")),
    (LinkType::JUNIPER_FRELAY, "JUNIPER_FRELAY", 180, &[], Same("Juniper Frame Relay")),
    (LinkType::JUNIPER_CHDLC, "JUNIPER_CHDLC", 181, &[], Same("Juniper C-HDLC")),
    (LinkType::JUNIPER_VP, "JUNIPER_VP", 183, &[], Same("Juniper Voice PIC")),
    (LinkType::JUNIPER_ISM, "JUNIPER_ISM", 194, &[], Same("Juniper Integrated Service Module")),
    (LinkType::JUNIPER_ST, "JUNIPER_ST", 200, &[], Same("Juniper Secure Tunnel")),
    (LinkType::JUNIPER_VS, "JUNIPER_VS", 232, &[], Same("Juniper Virtual Server")),
    (LinkType::JUNIPER_SRX_E2E, "JUNIPER_SRX_E2E", 233, &[], Same("Juniper SRX E2E")),
    (LinkType::JUNIPER_FIBRECHANNEL, "JUNIPER_FIBRECHANNEL", 234, &[], Same("Juniper Fibre Channel")),
    (LinkType::JUNIPER_ATM_CEMIC, "JUNIPER_ATM_CEMIC", 238, &[], Same("Juniper ATM CEMIC")),
    (LinkType::JUNIPER_PIC_PEER, "JUNIPER_PIC_PEER", 174, &[], Same("Juniper PIC Peer")),
    (LinkType::ERF, "ERF", 197, &[], Same("Endace ERF header")),
    (LinkType::MTP2_WITH_PHDR, "MTP2_WITH_PHDR", 139, &[], Same("SS7 MTP2 with Pseudo-header")),
    (LinkType::DSA_TAG_EDSA, "DSA_TAG_EDSA", 285, &[], Same("Marvell EDSA")),
    (LinkType::DSA_TAG_BRCM_PREPEND, "DSA_TAG_BRCM_PREPEND", 282, &[], Same("Broadcom tag (prepended)")),
    (LinkType::EN3MB, "EN3MB", 2, &[], Absent),
    (LinkType::AX25, "AX25", 3, &[], Absent),
    (LinkType::PRONET, "PRONET", 4, &[], Absent),
    (LinkType::CHAOS, "CHAOS", 5, &[], Absent),
    (LinkType::REDBACK_SMARTEDGE, "REDBACK_SMARTEDGE", 32, &[], Absent),
    (LinkType::MTP3, "MTP3", 141, &[], Same("SS7 MTP3")),
    (LinkType::SCCP, "SCCP", 142, &[], Same("SS7 SCCP")),
    (LinkType::DOCSIS, "DOCSIS", 143, &[], Same("DOCSIS")),
    (LinkType::LINUX_IRDA, "LINUX_IRDA", 144, &[], Same("Linux IrDA")),
    (LinkType::GPRS_LLC, "GPRS_LLC", 169, &[], Same("GPRS LLC")),
    (LinkType::GPF_T, "GPF_T", 170, &[], Same("GPF-T")),
    (LinkType::GPF_F, "GPF_F", 171, &[], Same("GPF-F")),
    (LinkType::ERF_ETH, "ERF_ETH", 175, &[], Same("Ethernet with Endace ERF header")),
    (LinkType::ERF_POS, "ERF_POS", 176, &[], Same("Packet-over-SONET with Endace ERF header")),
    (LinkType::LINUX_LAPD, "LINUX_LAPD", 177, &[], Same("Linux vISDN LAPD")),
    (LinkType::MFR, "MFR", 182, &[], Same("FRF.16 Frame Relay")),
    (LinkType::A429, "A429", 184, &[], Same("Arinc 429")),
    (LinkType::A653_ICM, "A653_ICM", 185, &[], Same("Arinc 653 Interpartition Communication")),
    (LinkType::USB_FREEBSD, "USB_FREEBSD", 186, &[], Same("USB with FreeBSD header")),
    (LinkType::BLUETOOTH_HCI_H4, "BLUETOOTH_HCI_H4", 187, &[], Same("Bluetooth HCI UART transport layer")),
    (LinkType::IEEE802_16_MAC_CPS, "IEEE802_16_MAC_CPS", 188, &[], Same("IEEE 802.16 MAC Common Part Sublayer")),
    (LinkType::USB_LINUX, "USB_LINUX", 189, &[], Same("USB with Linux header")),
    (LinkType::CAN20B, "CAN20B", 190, &[], Same("Controller Area Network (CAN) v. 2.0B")),
    (LinkType::IEEE802_15_4_LINUX, "IEEE802_15_4_LINUX", 191, &[], Same("IEEE 802.15.4 with Linux padding")),
    (LinkType::IEEE802_16_MAC_CPS_RADIO, "IEEE802_16_MAC_CPS_RADIO", 193, &[], Same("IEEE 802.16 MAC Common Part Sublayer plus radiotap header")),
    (LinkType::IEEE802_15_4, "IEEE802_15_4", 195, &[], Same("IEEE 802.15.4 with FCS")),
    (LinkType::SITA, "SITA", 196, &[], Same("SITA pseudo-header")),
    (LinkType::RAIF1, "RAIF1", 198, &[], Same("Ethernet with u10 Networks pseudo-header")),
    (LinkType::IPMB_KONTRON, "IPMB_KONTRON", 199, &[], Same("IPMB with Kontron pseudo-header")),
    (LinkType::BLUETOOTH_HCI_H4_WITH_PHDR, "BLUETOOTH_HCI_H4_WITH_PHDR", 201, &[], Same("Bluetooth HCI UART transport layer plus pseudo-header")),
    (LinkType::AX25_KISS, "AX25_KISS", 202, &[], Same("AX.25 with KISS header")),
    (LinkType::I2C_LINUX, "I2C_LINUX", 209, &[], Renamed("IPMB_LINUX", "IPMB with Linux/Pigeon Point pseudo-header")),
    (LinkType::IEEE802_15_4_NONASK_PHY, "IEEE802_15_4_NONASK_PHY", 215, &[], Same("IEEE 802.15.4 with non-ASK PHY data")),
    (LinkType::LINUX_EVDEV, "LINUX_EVDEV", 216, &[], Same("Linux evdev events")),
    (LinkType::MPLS, "MPLS", 219, &[], Same("MPLS with label as link-layer header")),
    (LinkType::USB_LINUX_MMAPPED, "USB_LINUX_MMAPPED", 220, &[], Same("USB with padded Linux header")),
    (LinkType::DECT, "DECT", 221, &[], Same("DECT")),
    (LinkType::AOS, "AOS", 222, &[], Same("AOS Space Data Link protocol")),
    (LinkType::WIHART, "WIHART", 223, &[], Same("Wireless HART")),
    (LinkType::FC_2, "FC_2", 224, &[], Same("Fibre Channel FC-2")),
    (LinkType::FC_2_WITH_FRAME_DELIMS, "FC_2_WITH_FRAME_DELIMS", 225, &[], Same("Fibre Channel FC-2 with frame delimiters")),
    (LinkType::CAN_SOCKETCAN, "CAN_SOCKETCAN", 227, &[], Same("CAN-bus with SocketCAN headers")),
    (LinkType::IEEE802_15_4_NOFCS, "IEEE802_15_4_NOFCS", 230, &[], Same("IEEE 802.15.4 without FCS")),
    (LinkType::DBUS, "DBUS", 231, &[], Same("D-Bus")),
    (LinkType::DVB_CI, "DVB_CI", 235, &[], Same("DVB-CI")),
    (LinkType::MUX27010, "MUX27010", 236, &[], Same("MUX27010")),
    (LinkType::STANAG_5066_D_PDU, "STANAG_5066_D_PDU", 237, &[], Same("STANAG 5066 D_PDUs")),
    (LinkType::NFLOG, "NFLOG", 239, &[], Same("Linux netfilter log messages")),
    (LinkType::IPOIB, "IPOIB", 242, &[], Same("RFC 4391 IP-over-Infiniband")),
    (LinkType::MPEG_2_TS, "MPEG_2_TS", 243, &[], Same("MPEG-2 transport stream")),
    (LinkType::NG40, "NG40", 244, &[], Same("ng40 protocol tester Iub/Iur")),
    (LinkType::NFC_LLCP, "NFC_LLCP", 245, &[], Same("NFC LLCP PDUs with pseudo-header")),
    (LinkType::PFSYNC, "PFSYNC", 246, &[], Same("Packet filter state syncing")),
    (LinkType::INFINIBAND, "INFINIBAND", 247, &[], Same("InfiniBand")),
    (LinkType::SCTP, "SCTP", 248, &[], Same("SCTP")),
    (LinkType::USBPCAP, "USBPCAP", 249, &[], Same("USB with USBPcap header")),
    (LinkType::RTAC_SERIAL, "RTAC_SERIAL", 250, &[], Same("Schweitzer Engineering Laboratories RTAC packets")),
    (LinkType::BLUETOOTH_LE_LL, "BLUETOOTH_LE_LL", 251, &[], Same("Bluetooth Low Energy air interface")),
    (LinkType::NETLINK, "NETLINK", 253, &[], Same("Linux netlink")),
    (LinkType::BLUETOOTH_LINUX_MONITOR, "BLUETOOTH_LINUX_MONITOR", 254, &[], Same("Bluetooth Linux Monitor")),
    (LinkType::BLUETOOTH_BREDR_BB, "BLUETOOTH_BREDR_BB", 255, &[], Same("Bluetooth Basic Rate/Enhanced Data Rate baseband packets")),
    (LinkType::BLUETOOTH_LE_LL_WITH_PHDR, "BLUETOOTH_LE_LL_WITH_PHDR", 256, &[], Same("Bluetooth Low Energy air interface with pseudo-header")),
    (LinkType::PROFIBUS_DL, "PROFIBUS_DL", 257, &[], Same("PROFIBUS data link layer")),
    (LinkType::PKTAP, "PKTAP", 258, &[], Same("Apple DLT_PKTAP")),
    (LinkType::EPON, "EPON", 259, &[], Same("Ethernet with 802.3 Clause 65 EPON preamble")),
    (LinkType::IPMI_HPM_2, "IPMI_HPM_2", 260, &[], Same("IPMI trace packets")),
    (LinkType::ZWAVE_R1_R2, "ZWAVE_R1_R2", 261, &[], Same("Z-Wave RF profile R1 and R2 packets")),
    (LinkType::ZWAVE_R3, "ZWAVE_R3", 262, &[], Same("Z-Wave RF profile R3 packets")),
    (LinkType::WATTSTOPPER_DLM, "WATTSTOPPER_DLM", 263, &[], Same("WattStopper Digital Lighting Management (DLM) and Legrand Nitoo Open protocol")),
    (LinkType::ISO_14443, "ISO_14443", 264, &[], Same("ISO 14443 messages")),
    (LinkType::RDS, "RDS", 265, &[], Same("IEC 62106 Radio Data System groups")),
    (LinkType::USB_DARWIN, "USB_DARWIN", 266, &[], Same("USB with Darwin header")),
    (LinkType::OPENFLOW, "OPENFLOW", 267, &[], Same("OpenBSD DLT_OPENFLOW")),
    (LinkType::SDLC, "SDLC", 268, &[], Same("IBM SDLC frames")),
    (LinkType::TI_LLN_SNIFFER, "TI_LLN_SNIFFER", 269, &[], Same("TI LLN sniffer frames")),
    (LinkType::VSOCK, "VSOCK", 271, &[], Same("Linux vsock")),
    (LinkType::NORDIC_BLE, "NORDIC_BLE", 272, &[], Same("Nordic Semiconductor Bluetooth LE sniffer frames")),
    (LinkType::DOCSIS31_XRA31, "DOCSIS31_XRA31", 273, &[], Same("Excentis XRA-31 DOCSIS 3.1 RF sniffer frames")),
    (LinkType::ETHERNET_MPACKET, "ETHERNET_MPACKET", 274, &[], Same("802.3br mPackets")),
    (LinkType::DISPLAYPORT_AUX, "DISPLAYPORT_AUX", 275, &[], Same("DisplayPort AUX channel monitoring data")),
    (LinkType::OPENVIZSLA, "OPENVIZSLA", 278, &[], Same("OpenVizsla USB")),
    (LinkType::EBHSCR, "EBHSCR", 279, &[], Same("Elektrobit High Speed Capture and Replay (EBHSCR)")),
    (LinkType::VPP_DISPATCH, "VPP_DISPATCH", 280, &[], Same("VPP graph dispatch tracer")),
    (LinkType::ELEE, "ELEE", 286, &[], Same("ELEE lawful intercept packets")),
    (LinkType::Z_WAVE_SERIAL, "Z_WAVE_SERIAL", 287, &[], Same("Z-Wave serial frames between host and chip")),
    (LinkType::USB_2_0, "USB_2_0", 288, &[], Same("USB 2.0/1.1/1.0 as transmitted over the cable")),
    (LinkType::ATSC_ALP, "ATSC_ALP", 289, &[], Same("ATSC Link-Layer Protocol packets")),
    (LinkType::ETW, "ETW", 290, &[], Absent),
    (LinkType::NETANALYZER_NG, "NETANALYZER_NG", 291, &[], Absent),
    (LinkType::ZBOSS_NCP, "ZBOSS_NCP", 292, &[], Absent),
    (LinkType::USB_2_0_LOW_SPEED, "USB_2_0_LOW_SPEED", 293, &[], Absent),
    (LinkType::USB_2_0_FULL_SPEED, "USB_2_0_FULL_SPEED", 294, &[], Absent),
    (LinkType::USB_2_0_HIGH_SPEED, "USB_2_0_HIGH_SPEED", 295, &[], Absent),
    (LinkType::AUERSWALD_LOG, "AUERSWALD_LOG", 296, &[], Absent),
    (LinkType::ZWAVE_TAP, "ZWAVE_TAP", 297, &[], Absent),
    (LinkType::SILABS_DEBUG_CHANNEL, "SILABS_DEBUG_CHANNEL", 298, &[], Absent),
    (LinkType::FIRA_UCI, "FIRA_UCI", 299, &[], Absent),
    (LinkType::MDB, "MDB", 300, &[], Absent),
    (LinkType::DECT_NR, "DECT_NR", 301, &[], Absent),
    (LinkType::IEEE802_15_4_TAP, "IEEE802_15_4_TAP", 283, &[], Same("IEEE 802.15.4 with pseudo-header")),
    (LinkType::IEEE802_11, "IEEE802_11", 105, &[], Same("802.11")),
    (LinkType::IEEE802_11_RADIO, "IEEE802_11_RADIO", 127, &[], Same("802.11 plus radiotap header")),
    (LinkType::IEEE802_11_RADIO_AVS, "IEEE802_11_RADIO_AVS", 163, &[], Same("802.11 plus AVS radio information header")),
    (LinkType::PRISM_HEADER, "PRISM_HEADER", 119, &[], Same("802.11 plus Prism header")),
    (LinkType::PPI, "PPI", 192, &[], Same("Per-Packet Information")),
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

    /// libpcap 1.10.3's name and description of the link type (what its
    /// `pcap_datalink_val_to_name` and `pcap_datalink_val_to_description`
    /// return for [`LinkType::dlt`]), or `None` where 1.10.3 has no entry
    /// for it (names libpcap has given since, and `USER0` to `USER15`).
    ///
    /// ```
    /// use sluice_wire::link::LinkType;
    /// assert_eq!(LinkType::EN10MB.libpcap_1_10(), Some(("EN10MB", "Ethernet")));
    /// // Renamed since: libpcap master calls 209 I2C_LINUX.
    /// assert_eq!(LinkType::I2C_LINUX.libpcap_1_10().unwrap().0, "IPMB_LINUX");
    /// assert_eq!(LinkType::ETW.libpcap_1_10(), None);
    /// ```
    pub fn libpcap_1_10(self) -> Option<(&'static str, &'static str)> {
        let e = TABLE.iter().find(|e| e.0 == self)?;
        match e.4 {
            Absent => None,
            Same(description) => Some((e.1, description)),
            Renamed(name, description) => Some((name, description)),
        }
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
    /// assert_eq!(LinkType::Matching(150).dlt(), 150);
    /// ```
    pub fn dlt(self) -> u32 {
        if let LinkType::Matching(n) = self {
            return u32::from(n);
        }
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

/// A link type as a user writes one: a number (a LINKTYPE value, or a DLT
/// value that means the same), or a libpcap DLT name in any case, with or
/// without a `DLT_` or `LINKTYPE_` prefix. Front ends that take a link
/// type from their users (the Python module's `linktype=`) parse it here.
///
/// ```
/// use sluice_wire::link::LinkType;
/// assert_eq!("en10mb".parse(), Ok(LinkType::EN10MB));
/// assert_eq!("DLT_LINUX_SLL".parse(), Ok(LinkType::LINUX_SLL));
/// assert_eq!("LINKTYPE_RAW".parse(), Ok(LinkType::RAW));
/// assert_eq!("113".parse(), Ok(LinkType::LINUX_SLL));
/// let e = "ETHERNET2".parse::<LinkType>().unwrap_err();
/// assert_eq!(e.to_string(), "unknown link type 'ETHERNET2'");
/// ```
impl std::str::FromStr for LinkType {
    type Err = UnknownLinkType;

    fn from_str(text: &str) -> Result<LinkType, UnknownLinkType> {
        let found = match text.parse::<u32>() {
            Ok(n) => LinkType::from_number(n),
            Err(_) => {
                let upper = text.to_ascii_uppercase();
                let bare = upper.strip_prefix("LINKTYPE_").unwrap_or(&upper);
                LinkType::from_name(bare)
            }
        };
        found.ok_or_else(|| UnknownLinkType(text.to_string()))
    }
}

/// A link type's name or number that sluice does not know (its text).
///
/// ```
/// let e = "42000".parse::<sluice_wire::link::LinkType>().unwrap_err();
/// assert_eq!(e.0, "42000");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownLinkType(pub String);

impl std::fmt::Display for UnknownLinkType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown link type '{}'", self.0)
    }
}

impl std::error::Error for UnknownLinkType {}

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
