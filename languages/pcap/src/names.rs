//! Name tables built into sluice: services, IP protocols, EtherTypes, LLC
//! SAPs and frame functions, ISO network-layer protocol ids, 802.11 frame
//! types, subtypes and directions, pflog reasons and actions. Nothing is read from `/etc` and
//! nothing is resolved over the network, so a filter means the same thing
//! on every machine. The service and protocol tables hold the entries of
//! Debian's netbase `/etc/services` and `/etc/protocols` (what the reference
//! libpcap reads); the others are libpcap's own lists (libpcap master).
//!
//! Crate-internal: only this crate's stages use it (front ends go through
//! `sluice-filter`); the examples are the `examples` unit tests below.

/// The ports a service name stands for, per transport protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ServicePorts {
    /// The TCP port, if the name is a TCP service.
    pub tcp: Option<u16>,
    /// The UDP port, if the name is a UDP service.
    pub udp: Option<u16>,
    /// The SCTP port, if the name is an SCTP service.
    pub sctp: Option<u16>,
}

/// Looks up a service name (case-sensitive, as in `/etc/services`).
pub fn service(name: &str) -> Option<ServicePorts> {
    SERVICES
        .iter()
        .find(|s| s.0 == name)
        .map(|&(_, tcp, udp, sctp)| ServicePorts { tcp, udp, sctp })
}

/// Looks up an IP protocol name (`/etc/protocols`, including aliases), as
/// used by `proto \name` for IPv4 and IPv6.
pub fn ip_protocol(name: &str) -> Option<u8> {
    IP_PROTOCOLS.iter().find(|p| p.0 == name).map(|p| p.1)
}

/// EtherType names libpcap master knows for `ether proto \name`.
const ETHER_TYPES: &[(&str, u16)] = &[
    ("aarp", 0x80f3),
    ("arp", 0x0806),
    ("atalk", 0x809b),
    ("decnet", 0x6003),
    ("ip", 0x0800),
    ("ip6", 0x86dd),
    ("lat", 0x6004),
    ("loopback", 0x9000),
    ("mopdl", 0x6001),
    ("moprc", 0x6002),
    ("rarp", 0x8035),
    ("sca", 0x6007),
    ("lldp", 0x88cc),
    ("slow", 0x8809),
];

/// Looks up an EtherType name (`ether proto \ip6`, `ether proto lldp`).
pub fn ether_type(name: &str) -> Option<u16> {
    ETHER_TYPES.iter().find(|e| e.0 == name).map(|e| e.1)
}

/// LLC SAP names libpcap accepts after `ether proto` when the name is not
/// an EtherType.
const LLC_SAPS: &[(&str, u8)] = &[
    ("iso", 0xfe),
    ("stp", 0x42),
    ("ipx", 0xe0),
    ("netbeui", 0xf0),
];

/// Looks up an LLC SAP name (`ether proto \stp`).
pub fn llc_sap(name: &str) -> Option<u8> {
    LLC_SAPS.iter().find(|e| e.0 == name).map(|e| e.1)
}

/// Looks up an ISO network-layer protocol id for `iso proto \name`.
pub fn iso_proto(name: &str) -> Option<u8> {
    match name {
        "clnp" => Some(0x81),
        "esis" => Some(0x82),
        "isis" => Some(0x83),
        _ => None,
    }
}

/// A name's value in a table, case-insensitively.
fn lookup_ci(table: &[(&str, u32)], name: &str) -> Option<u32> {
    table
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

const WLAN_TYPES: &[(&str, u32)] = &[
    ("data", 0x08),
    ("mgt", 0x00),
    ("management", 0x00),
    ("ctl", 0x04),
    ("control", 0x04),
];

const WLAN_MGT: &[(&str, u32)] = &[
    ("assocreq", 0x00),
    ("assoc-req", 0x00),
    ("assocresp", 0x10),
    ("assoc-resp", 0x10),
    ("reassocreq", 0x20),
    ("reassoc-req", 0x20),
    ("reassocresp", 0x30),
    ("reassoc-resp", 0x30),
    ("probereq", 0x40),
    ("probe-req", 0x40),
    ("proberesp", 0x50),
    ("probe-resp", 0x50),
    ("beacon", 0x80),
    ("atim", 0x90),
    ("disassoc", 0xa0),
    ("disassociation", 0xa0),
    ("auth", 0xb0),
    ("authentication", 0xb0),
    ("deauth", 0xc0),
    ("deauthentication", 0xc0),
];

const WLAN_CTL: &[(&str, u32)] = &[
    ("bar", 0x80),
    ("ba", 0x90),
    ("ps-poll", 0xa0),
    ("rts", 0xb0),
    ("cts", 0xc0),
    ("ack", 0xd0),
    ("cf-end", 0xe0),
    ("cf-end-ack", 0xf0),
];

const WLAN_DATA: &[(&str, u32)] = &[
    ("data", 0x00),
    ("data-cf-ack", 0x10),
    ("data-cf-poll", 0x20),
    ("data-cf-ack-poll", 0x30),
    ("null", 0x40),
    ("cf-ack", 0x50),
    ("cf-poll", 0x60),
    ("cf-ack-poll", 0x70),
    ("qos-data", 0x80),
    ("qos-data-cf-ack", 0x90),
    ("qos-data-cf-poll", 0xa0),
    ("qos-data-cf-ack-poll", 0xb0),
    ("qos", 0xc0),
    ("qos-cf-poll", 0xe0),
    ("qos-cf-ack-poll", 0xf0),
];

/// The 802.11 subtype table for a type value, in libpcap's search order.
const WLAN_SUBTYPES: &[(u32, &[(&str, u32)])] =
    &[(0x00, WLAN_MGT), (0x04, WLAN_CTL), (0x08, WLAN_DATA)];

const WLAN_DIRS: &[(&str, u32)] = &[("nods", 0), ("tods", 1), ("fromds", 2), ("dstods", 3)];

const LLC_S: &[(&str, u32)] = &[("rr", 0x01), ("rnr", 0x05), ("rej", 0x09)];

const LLC_U: &[(&str, u32)] = &[
    ("ui", 0x03),
    ("ua", 0x63),
    ("disc", 0x43),
    ("dm", 0x0f),
    ("sabme", 0x6f),
    ("test", 0xe3),
    ("xid", 0xaf),
    ("frmr", 0x87),
];

const PF_REASONS: &[(&str, u32)] = &[
    ("match", 0),
    ("bad-offset", 1),
    ("fragment", 2),
    ("short", 3),
    ("normalize", 4),
    ("memory", 5),
    ("bad-timestamp", 6),
    ("congestion", 7),
    ("ip-option", 8),
    ("proto-cksum", 9),
    ("state-mismatch", 10),
    ("state-insert", 11),
    ("state-limit", 12),
    ("src-limit", 13),
    ("synproxy", 14),
];

const PF_ACTIONS: &[(&str, u32)] = &[
    ("pass", 0),
    ("accept", 0),
    ("drop", 1),
    ("block", 1),
    ("scrub", 2),
    ("noscrub", 3),
    ("nat", 4),
    ("nonat", 5),
    ("binat", 6),
    ("nobinat", 7),
    ("rdr", 8),
    ("nordr", 9),
    ("synproxy-drop", 10),
];

/// An 802.11 frame type (`data`, `mgt`, `ctl` and their long names), as
/// the value of the type bits of the frame control field.
pub fn wlan_type(name: &str) -> Option<u32> {
    lookup_ci(WLAN_TYPES, name)
}

/// Whether an 802.11 frame type has named subtypes.
pub fn wlan_has_subtypes(ty: u32) -> bool {
    WLAN_SUBTYPES.iter().any(|(t, _)| *t == ty)
}

/// A subtype name of the given 802.11 frame type, as the subtype bits.
pub fn wlan_subtype_of(ty: u32, name: &str) -> Option<u32> {
    let (_, table) = WLAN_SUBTYPES.iter().find(|(t, _)| *t == ty)?;
    lookup_ci(table, name)
}

/// A subtype name of any 802.11 frame type (in libpcap's search order:
/// management, control, data), as type and subtype bits together.
pub fn wlan_subtype(name: &str) -> Option<u32> {
    WLAN_SUBTYPES
        .iter()
        .find_map(|(ty, table)| lookup_ci(table, name).map(|v| v | ty))
}

/// An 802.11 direction (`nods`, `tods`, `fromds`, `dstods`), as the DS bits.
pub fn wlan_direction(name: &str) -> Option<u32> {
    lookup_ci(WLAN_DIRS, name)
}

/// An LLC S (supervisory) frame function: `rr`, `rnr`, `rej`.
pub fn llc_s_function(name: &str) -> Option<u32> {
    lookup_ci(LLC_S, name)
}

/// An LLC U (unnumbered) frame function: `ui`, `ua`, `disc`, `xid`...
pub fn llc_u_function(name: &str) -> Option<u32> {
    lookup_ci(LLC_U, name)
}

/// A pflog reason code (`match`, `bad-offset`, `fragment`...).
pub fn pf_reason(name: &str) -> Option<u32> {
    lookup_ci(PF_REASONS, name)
}

/// A pflog action (`pass`, `block`, `nat`, `rdr`...).
pub fn pf_action(name: &str) -> Option<u32> {
    lookup_ci(PF_ACTIONS, name)
}

/// Service names (from the common /etc/services entries): name, tcp, udp, sctp.
/// One service: name, TCP port, UDP port, SCTP port.
type Service = (&'static str, Option<u16>, Option<u16>, Option<u16>);

const SERVICES: &[Service] = &[
    ("Clearcase", None, Some(371), None),
    ("acr-nema", Some(104), None, None),
    ("afpovertcp", Some(548), None, None),
    ("afs3-bos", None, Some(7007), None),
    ("afs3-callback", None, Some(7001), None),
    ("afs3-fileserver", None, Some(7000), None),
    ("afs3-kaserver", None, Some(7004), None),
    ("afs3-prserver", None, Some(7002), None),
    ("afs3-rmtsys", None, Some(7009), None),
    ("afs3-update", None, Some(7008), None),
    ("afs3-vlserver", None, Some(7003), None),
    ("afs3-volser", None, Some(7005), None),
    ("amanda", Some(10080), None, None),
    ("amandaidx", Some(10082), None, None),
    ("amidxtape", Some(10083), None, None),
    ("amqp", Some(5672), None, Some(5672)),
    ("amqps", Some(5671), None, None),
    ("asf-rmcp", None, Some(623), None),
    ("asp", Some(27374), Some(27374), None),
    ("auth", Some(113), None, None),
    ("authentication", Some(113), None, None),
    ("babel", None, Some(6696), None),
    ("bacula-dir", Some(9101), None, None),
    ("bacula-fd", Some(9102), None, None),
    ("bacula-sd", Some(9103), None, None),
    ("bbs", Some(7000), None, None),
    ("bgp", Some(179), None, None),
    ("bgpd", Some(2605), None, None),
    ("biff", None, Some(512), None),
    ("binkp", Some(24554), None, None),
    ("bootpc", None, Some(68), None),
    ("bootps", None, Some(67), None),
    ("canna", Some(5680), None, None),
    ("cfengine", Some(5308), None, None),
    ("chargen", Some(19), Some(19), None),
    ("cisco-sccp", Some(2000), None, None),
    ("clc-build-daemon", Some(8990), None, None),
    ("clearcase", None, Some(371), None),
    ("cmd", Some(514), None, None),
    ("cmip-agent", Some(164), Some(164), None),
    ("cmip-man", Some(163), Some(163), None),
    ("codaauth2", Some(370), Some(370), None),
    ("codasrv", Some(2432), Some(2432), None),
    ("codasrv-se", Some(2433), Some(2433), None),
    ("comsat", None, Some(512), None),
    ("csync2", Some(30865), None, None),
    ("cvspserver", Some(2401), None, None),
    ("daap", Some(3689), None, None),
    ("datametrics", Some(1645), Some(1645), None),
    ("daytime", Some(13), Some(13), None),
    ("db-lsp", Some(17500), None, None),
    ("dcap", Some(22125), None, None),
    ("dhcpv6-client", None, Some(546), None),
    ("dhcpv6-server", None, Some(547), None),
    ("dicom", Some(104), None, None),
    ("dict", Some(2628), None, None),
    ("dircproxy", Some(57000), None, None),
    ("discard", Some(9), Some(9), None),
    ("distcc", Some(3632), None, None),
    ("domain", Some(53), Some(53), None),
    ("domain-s", Some(853), Some(853), None),
    ("echo", Some(7), Some(7), None),
    ("epmap", Some(135), None, None),
    ("epmd", Some(4369), None, None),
    ("exec", Some(512), None, None),
    ("f5-globalsite", Some(2792), None, None),
    ("f5-iquery", Some(4353), None, None),
    ("fax", Some(4557), None, None),
    ("fido", Some(60179), None, None),
    ("finger", Some(79), None, None),
    ("font-service", Some(7100), None, None),
    ("freeciv", Some(5556), None, None),
    ("fsp", None, Some(21), None),
    ("fspd", None, Some(21), None),
    ("ftp", Some(21), None, None),
    ("ftp-data", Some(20), None, None),
    ("ftps", Some(990), None, None),
    ("ftps-data", Some(989), None, None),
    ("gdomap", Some(538), Some(538), None),
    ("gds-db", Some(3050), None, None),
    ("gds_db", Some(3050), None, None),
    ("git", Some(9418), None, None),
    ("gnunet", Some(2086), Some(2086), None),
    ("gnutella-rtr", Some(6347), Some(6347), None),
    ("gnutella-svc", Some(6346), Some(6346), None),
    ("gopher", Some(70), None, None),
    ("gpsd", Some(2947), None, None),
    ("gris", Some(2135), None, None),
    ("groupwise", Some(1677), None, None),
    ("gsidcap", Some(22128), None, None),
    ("gsiftp", Some(2811), None, None),
    ("gsigatekeeper", Some(2119), None, None),
    ("hkp", Some(11371), None, None),
    ("hprop", Some(754), None, None),
    ("http", Some(80), None, None),
    ("http-alt", Some(8080), None, None),
    ("https", Some(443), Some(443), None),
    ("hylafax", Some(4559), None, None),
    ("iax", None, Some(4569), None),
    ("icp", None, Some(3130), None),
    ("icpv2", None, Some(3130), None),
    ("ident", Some(113), None, None),
    ("imap", Some(143), None, None),
    ("imap2", Some(143), None, None),
    ("imaps", Some(993), None, None),
    ("ingreslock", Some(1524), None, None),
    ("ipp", Some(631), None, None),
    ("iprop", Some(2121), None, None),
    ("ipsec-nat-t", None, Some(4500), None),
    ("ipx", None, Some(213), None),
    ("ircd", Some(6667), None, None),
    ("ircs-u", Some(6697), None, None),
    ("isakmp", None, Some(500), None),
    ("iscsi-target", Some(3260), None, None),
    ("isisd", Some(2608), None, None),
    ("isns", Some(3205), Some(3205), None),
    ("iso-tsap", Some(102), None, None),
    ("jabber-client", Some(5222), None, None),
    ("jabber-server", Some(5269), None, None),
    ("kamanda", Some(10081), None, None),
    ("kdc", Some(750), Some(750), None),
    ("kerberos", Some(88), Some(88), None),
    ("kerberos-adm", Some(749), None, None),
    ("kerberos-iv", Some(750), Some(750), None),
    ("kerberos-master", Some(751), Some(751), None),
    ("kerberos-sec", Some(88), Some(88), None),
    ("kerberos4", Some(750), Some(750), None),
    ("kerberos5", Some(88), Some(88), None),
    ("kerberos_master", None, Some(751), None),
    ("kermit", Some(1649), None, None),
    ("klogin", Some(543), None, None),
    ("kpasswd", Some(464), Some(464), None),
    ("krb-prop", Some(754), None, None),
    ("krb5", Some(88), Some(88), None),
    ("krb5_prop", Some(754), None, None),
    ("krb_prop", Some(754), None, None),
    ("krcmd", Some(544), None, None),
    ("kshell", Some(544), None, None),
    ("l2f", None, Some(1701), None),
    ("l2tp", None, Some(1701), None),
    ("ldap", Some(389), Some(389), None),
    ("ldaps", Some(636), Some(636), None),
    ("ldp", Some(646), Some(646), None),
    ("loc-srv", Some(135), None, None),
    ("login", Some(513), None, None),
    ("lotusnote", Some(1352), None, None),
    ("lotusnotes", Some(1352), None, None),
    ("lrrd", Some(4949), None, None),
    ("mail", Some(25), None, None),
    ("mailq", Some(174), None, None),
    ("mdns", None, Some(5353), None),
    ("microsoft-ds", Some(445), None, None),
    ("moira-db", Some(775), None, None),
    ("moira-update", Some(777), None, None),
    ("moira-ureg", None, Some(779), None),
    ("moira_db", Some(775), None, None),
    ("moira_update", Some(777), None, None),
    ("moira_ureg", None, Some(779), None),
    ("mon", Some(2583), Some(2583), None),
    ("ms-sql-m", None, Some(1434), None),
    ("ms-sql-s", Some(1433), None, None),
    ("ms-wbt-server", Some(3389), None, None),
    ("mtn", Some(4691), None, None),
    ("munin", Some(4949), None, None),
    ("mysql", Some(3306), None, None),
    ("mysql-proxy", Some(6446), None, None),
    ("nbd", Some(10809), None, None),
    ("netbios-dgm", None, Some(138), None),
    ("netbios-ns", None, Some(137), None),
    ("netbios-ssn", Some(139), None, None),
    ("netstat", Some(15), None, None),
    ("nfs", Some(2049), Some(2049), None),
    ("nicname", Some(43), None, None),
    ("nntp", Some(119), None, None),
    ("nntps", Some(563), None, None),
    ("nqs", Some(607), None, None),
    ("nrpe", Some(5666), None, None),
    ("nsca", Some(5667), None, None),
    ("ntalk", None, Some(518), None),
    ("ntp", None, Some(123), None),
    ("ntske", Some(4460), None, None),
    ("null", Some(9), Some(9), None),
    ("nut", Some(3493), Some(3493), None),
    ("old-radacct", Some(1646), Some(1646), None),
    ("old-radius", Some(1645), Some(1645), None),
    ("omniorb", Some(8088), None, None),
    ("openvpn", Some(1194), Some(1194), None),
    ("ospf6d", Some(2606), None, None),
    ("ospfapi", Some(2607), None, None),
    ("ospfd", Some(2604), None, None),
    ("passwd-server", None, Some(752), None),
    ("passwd_server", None, Some(752), None),
    ("pawserv", Some(345), None, None),
    ("pop-3", Some(110), None, None),
    ("pop3", Some(110), None, None),
    ("pop3s", Some(995), None, None),
    ("poppassd", Some(106), None, None),
    ("portmapper", Some(111), Some(111), None),
    ("postgres", Some(5432), None, None),
    ("postgresql", Some(5432), None, None),
    ("predict", None, Some(1210), None),
    ("printer", Some(515), None, None),
    ("proofd", Some(1093), None, None),
    ("ptp-event", None, Some(319), None),
    ("ptp-general", None, Some(320), None),
    ("puppet", Some(8140), None, None),
    ("qmqp", Some(628), None, None),
    ("qmtp", Some(209), None, None),
    ("qotd", Some(17), None, None),
    ("quote", Some(17), None, None),
    ("radacct", Some(1813), Some(1813), None),
    ("radius", Some(1812), Some(1812), None),
    ("radius-acct", Some(1813), Some(1813), None),
    ("radmin-port", Some(4899), None, None),
    ("readnews", Some(119), None, None),
    ("redis", Some(6379), None, None),
    ("remctl", Some(4373), None, None),
    ("ripd", Some(2602), None, None),
    ("ripngd", Some(2603), None, None),
    ("rmiregistry", Some(1099), None, None),
    ("rmtcfg", Some(1236), None, None),
    ("rootd", Some(1094), None, None),
    ("route", None, Some(520), None),
    ("routed", None, Some(520), None),
    ("router", None, Some(520), None),
    ("rpc2portmap", Some(369), Some(369), None),
    ("rplay", None, Some(5555), None),
    ("rptp", Some(5556), None, None),
    ("rsync", Some(873), None, None),
    ("rtcm-sc104", Some(2101), Some(2101), None),
    ("rtsp", Some(554), Some(554), None),
    ("sa-msg-port", Some(1646), Some(1646), None),
    ("saft", Some(487), None, None),
    ("sane", Some(6566), None, None),
    ("sane-port", Some(6566), None, None),
    ("saned", Some(6566), None, None),
    ("sge-execd", Some(6445), None, None),
    ("sge-qmaster", Some(6444), None, None),
    ("sge_execd", Some(6445), None, None),
    ("sge_qmaster", Some(6444), None, None),
    ("sgi-cad", Some(17004), None, None),
    ("sgi-cmsd", None, Some(17001), None),
    ("sgi-crsd", None, Some(17002), None),
    ("sgi-gcd", None, Some(17003), None),
    ("shell", Some(514), None, None),
    ("sieve", Some(4190), None, None),
    ("silc", Some(706), None, None),
    ("sink", Some(9), Some(9), None),
    ("sip", Some(5060), Some(5060), None),
    ("sip-tls", Some(5061), Some(5061), None),
    ("skkserv", Some(1178), None, None),
    ("smtp", Some(25), None, None),
    ("smtps", Some(465), None, None),
    ("smux", Some(199), None, None),
    ("snmp", Some(161), Some(161), None),
    ("snmp-trap", Some(162), Some(162), None),
    ("snmptrap", Some(162), Some(162), None),
    ("snntp", Some(563), None, None),
    ("snpp", Some(444), None, None),
    ("socks", Some(1080), None, None),
    ("source", Some(19), Some(19), None),
    ("spamd", Some(783), None, None),
    ("spooler", Some(515), None, None),
    ("ssh", Some(22), None, None),
    ("ssmtp", Some(465), None, None),
    ("submission", Some(587), None, None),
    ("submissions", Some(465), None, None),
    ("subversion", Some(3690), None, None),
    ("sunrpc", Some(111), Some(111), None),
    ("supfiledbg", Some(1127), None, None),
    ("supfilesrv", Some(871), None, None),
    ("suucp", Some(4031), None, None),
    ("svn", Some(3690), None, None),
    ("svrloc", Some(427), Some(427), None),
    ("syslog", Some(514), Some(514), None),
    ("syslog-tls", Some(6514), None, None),
    ("sysrqd", Some(4094), None, None),
    ("systat", Some(11), None, None),
    ("tacacs", Some(49), Some(49), None),
    ("talk", None, Some(517), None),
    ("tap", Some(113), None, None),
    ("tcpmux", Some(1), None, None),
    ("telnet", Some(23), None, None),
    ("telnets", Some(992), None, None),
    ("tfido", Some(60177), None, None),
    ("tftp", None, Some(69), None),
    ("time", Some(37), Some(37), None),
    ("timserver", Some(37), Some(37), None),
    ("tinc", Some(655), Some(655), None),
    ("tproxy", Some(8081), None, None),
    ("tsap", Some(102), None, None),
    ("ttytst", Some(19), Some(19), None),
    ("untp", Some(119), None, None),
    ("urd", Some(465), None, None),
    ("users", Some(11), None, None),
    ("uucp", Some(540), None, None),
    ("uucpd", Some(540), None, None),
    ("venus", Some(2430), Some(2430), None),
    ("venus-se", Some(2431), Some(2431), None),
    ("wais", Some(210), None, None),
    ("webcache", Some(8080), None, None),
    ("webmin", Some(10000), None, None),
    ("who", None, Some(513), None),
    ("whod", None, Some(513), None),
    ("whois", Some(43), None, None),
    ("wnn6", Some(22273), None, None),
    ("www", Some(80), None, None),
    ("x11", Some(6000), None, None),
    ("x11-0", Some(6000), None, None),
    ("x11-1", Some(6001), None, None),
    ("x11-2", Some(6002), None, None),
    ("x11-3", Some(6003), None, None),
    ("x11-4", Some(6004), None, None),
    ("x11-5", Some(6005), None, None),
    ("x11-6", Some(6006), None, None),
    ("x11-7", Some(6007), None, None),
    ("xdmcp", None, Some(177), None),
    ("xfs", Some(7100), None, None),
    ("xinetd", Some(9098), None, None),
    ("xmms2", Some(9667), None, None),
    ("xmpp-client", Some(5222), None, None),
    ("xmpp-server", Some(5269), None, None),
    ("xtel", Some(1313), None, None),
    ("xtelw", Some(1314), None, None),
    ("z3950", Some(210), None, None),
    ("zabbix-agent", Some(10050), None, None),
    ("zabbix-trapper", Some(10051), None, None),
    ("zebra", Some(2601), None, None),
    ("zebrasrv", Some(2600), None, None),
    ("zephyr-clt", None, Some(2103), None),
    ("zephyr-hm", None, Some(2104), None),
    ("zephyr-srv", None, Some(2102), None),
    ("zope", Some(9673), None, None),
    ("zope-ftp", Some(8021), None, None),
    ("zserv", Some(346), None, None),
];

/// IP protocol names (from /etc/protocols).
const IP_PROTOCOLS: &[(&str, u8)] = &[
    ("ip", 0),
    ("IP", 0),
    ("hopopt", 0),
    ("HOPOPT", 0),
    ("icmp", 1),
    ("ICMP", 1),
    ("igmp", 2),
    ("IGMP", 2),
    ("ggp", 3),
    ("GGP", 3),
    ("ipencap", 4),
    ("IP-ENCAP", 4),
    ("st", 5),
    ("ST", 5),
    ("tcp", 6),
    ("TCP", 6),
    ("egp", 8),
    ("EGP", 8),
    ("igp", 9),
    ("IGP", 9),
    ("pup", 12),
    ("PUP", 12),
    ("udp", 17),
    ("UDP", 17),
    ("hmp", 20),
    ("HMP", 20),
    ("xns-idp", 22),
    ("XNS-IDP", 22),
    ("rdp", 27),
    ("RDP", 27),
    ("iso-tp4", 29),
    ("ISO-TP4", 29),
    ("dccp", 33),
    ("DCCP", 33),
    ("xtp", 36),
    ("XTP", 36),
    ("ddp", 37),
    ("DDP", 37),
    ("idpr-cmtp", 38),
    ("IDPR-CMTP", 38),
    ("ipv6", 41),
    ("IPv6", 41),
    ("ipv6-route", 43),
    ("IPv6-Route", 43),
    ("ipv6-frag", 44),
    ("IPv6-Frag", 44),
    ("idrp", 45),
    ("IDRP", 45),
    ("rsvp", 46),
    ("RSVP", 46),
    ("gre", 47),
    ("GRE", 47),
    ("esp", 50),
    ("IPSEC-ESP", 50),
    ("ah", 51),
    ("IPSEC-AH", 51),
    ("skip", 57),
    ("SKIP", 57),
    ("ipv6-icmp", 58),
    ("IPv6-ICMP", 58),
    ("ipv6-nonxt", 59),
    ("IPv6-NoNxt", 59),
    ("ipv6-opts", 60),
    ("IPv6-Opts", 60),
    ("rspf", 73),
    ("RSPF", 73),
    ("CPHB", 73),
    ("vmtp", 81),
    ("VMTP", 81),
    ("eigrp", 88),
    ("EIGRP", 88),
    ("ospf", 89),
    ("OSPFIGP", 89),
    ("ax.25", 93),
    ("AX.25", 93),
    ("ipip", 94),
    ("IPIP", 94),
    ("etherip", 97),
    ("ETHERIP", 97),
    ("encap", 98),
    ("ENCAP", 98),
    ("pim", 103),
    ("PIM", 103),
    ("ipcomp", 108),
    ("IPCOMP", 108),
    ("vrrp", 112),
    ("VRRP", 112),
    ("l2tp", 115),
    ("L2TP", 115),
    ("isis", 124),
    ("ISIS", 124),
    ("sctp", 132),
    ("SCTP", 132),
    ("fc", 133),
    ("FC", 133),
    ("mobility-header", 135),
    ("Mobility-Header", 135),
    ("udplite", 136),
    ("UDPLite", 136),
    ("mpls-in-ip", 137),
    ("MPLS-in-IP", 137),
    ("manet", 138),
    ("hip", 139),
    ("HIP", 139),
    ("shim6", 140),
    ("Shim6", 140),
    ("wesp", 141),
    ("WESP", 141),
    ("rohc", 142),
    ("ROHC", 142),
    ("ethernet", 143),
    ("Ethernet", 143),
];

#[cfg(test)]
mod examples {
    //! The examples of the items above, which are crate-internal.

    #[test]
    fn module() {
        use crate::names;
        assert_eq!(names::service("ssh").unwrap().tcp, Some(22));
        assert_eq!(names::ip_protocol("udp"), Some(17));
        assert_eq!(names::ether_type("ip6"), Some(0x86dd));
    }

    #[test]
    fn service_ports() {
        let d = crate::names::service("domain").unwrap();
        assert_eq!((d.tcp, d.udp), (Some(53), Some(53)));
    }

    #[test]
    fn service() {
        use crate::names::service;
        assert_eq!(service("ftp-data").unwrap().tcp, Some(20));
        assert_eq!(service("bootps").unwrap().udp, Some(67));
        assert!(service("no-such-service").is_none());
    }

    #[test]
    fn ip_protocol() {
        use crate::names::ip_protocol;
        assert_eq!(ip_protocol("tcp"), Some(6));
        assert_eq!(ip_protocol("TCP"), Some(6));
        assert_eq!(ip_protocol("ipv6-icmp"), Some(58));
        assert_eq!(ip_protocol("nosuchprotocol"), None);
    }

    #[test]
    fn ether_type() {
        use crate::names::ether_type;
        assert_eq!(ether_type("arp"), Some(0x0806));
        assert_eq!(ether_type("lldp"), Some(0x88cc));
        assert_eq!(ether_type("iso"), None); // an LLC SAP, see llc_sap
    }

    #[test]
    fn llc_sap() {
        assert_eq!(crate::names::llc_sap("stp"), Some(0x42));
        assert_eq!(crate::names::llc_sap("ip"), None);
    }

    #[test]
    fn iso_proto() {
        assert_eq!(crate::names::iso_proto("isis"), Some(0x83));
        assert_eq!(crate::names::iso_proto("clnp"), Some(0x81));
    }

    #[test]
    fn wlan_type() {
        assert_eq!(crate::names::wlan_type("control"), Some(0x04));
    }

    #[test]
    fn wlan_has_subtypes() {
        assert!(crate::names::wlan_has_subtypes(0x08));
        assert!(!crate::names::wlan_has_subtypes(0x0c));
    }

    #[test]
    fn wlan_subtype_of() {
        assert_eq!(crate::names::wlan_subtype_of(0x00, "beacon"), Some(0x80));
        assert_eq!(crate::names::wlan_subtype_of(0x04, "beacon"), None);
    }

    #[test]
    fn wlan_subtype() {
        assert_eq!(crate::names::wlan_subtype("qos-data"), Some(0x88));
    }

    #[test]
    fn wlan_direction() {
        assert_eq!(crate::names::wlan_direction("fromds"), Some(2));
    }

    #[test]
    fn llc_s_function() {
        assert_eq!(crate::names::llc_s_function("rnr"), Some(0x05));
    }

    #[test]
    fn llc_u_function() {
        assert_eq!(crate::names::llc_u_function("xid"), Some(0xaf));
    }

    #[test]
    fn pf_reason() {
        assert_eq!(crate::names::pf_reason("short"), Some(3));
    }

    #[test]
    fn pf_action() {
        assert_eq!(crate::names::pf_action("block"), Some(1));
    }
}
