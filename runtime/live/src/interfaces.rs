//! Network interfaces as the kernel shows them in `/sys/class/net`: their
//! index, flags and hardware type, and the link type a capture on each
//! gets (libpcap's mapping from `ARPHRD_*` to `LINKTYPE_*`).

use crate::LiveError;
use std::path::Path;

/// `LINKTYPE_ETHERNET`.
pub const ETHERNET: u16 = 1;
/// `LINKTYPE_RAW` (IPv4 or IPv6 from the first byte).
pub const RAW: u16 = 101;
/// `LINKTYPE_LINUX_SLL`, Linux cooked capture v1.
pub const LINUX_SLL: u16 = 113;
/// `LINKTYPE_LINUX_SLL2`, Linux cooked capture v2 (the `any` device).
pub const LINUX_SLL2: u16 = 276;

/// One network interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Its name (`eth0`).
    pub name: String,
    /// Its index (`if_nametoindex`).
    pub index: i32,
    /// Its hardware type (`ARPHRD_*`).
    pub hardware: u16,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Running (`IFF_RUNNING`).
    pub running: bool,
    /// The loopback interface (`IFF_LOOPBACK`).
    pub loopback: bool,
    /// Link state as the driver reports it (ethtool's `ETHTOOL_GLINK`,
    /// libpcap's source): `Some(true)` connected, `Some(false)` not,
    /// `None` where the driver does not say (loopback, `ifb`, ...).
    pub connected: Option<bool>,
}

impl Interface {
    /// tcpdump's words for the interface's state (`[Up, Running, Connected]`).
    ///
    /// ```
    /// let i = sluice_live::Interface { name: "lo".into(), index: 1, hardware: 772,
    ///     up: true, running: true, loopback: true, connected: None };
    /// assert_eq!(i.flags(), "[Up, Running, Loopback]");
    /// ```
    pub fn flags(&self) -> String {
        let mut words = Vec::new();
        if self.up {
            words.push("Up");
        }
        if self.running {
            words.push("Running");
        }
        if self.loopback {
            words.push("Loopback");
        } else {
            match self.connected {
                Some(true) => words.push("Connected"),
                Some(false) => words.push("Disconnected"),
                None => {}
            }
        }
        if words.is_empty() {
            "[none]".into()
        } else {
            format!("[{}]", words.join(", "))
        }
    }

    /// The link type a capture on this interface gets, and whether it is a
    /// cooked (`SOCK_DGRAM`) capture.
    pub fn linktype(&self) -> (u16, bool) {
        linktype_of_hardware(self.hardware)
    }
}

/// The link type libpcap gives a capture on hardware type `arphrd`, and
/// whether the socket is cooked (link header rebuilt from the address).
///
/// ```
/// assert_eq!(sluice_live::interfaces::linktype_of_hardware(1), (1, false));   // Ethernet
/// assert_eq!(sluice_live::interfaces::linktype_of_hardware(0xfffe), (101, false)); // tun
/// assert_eq!(sluice_live::interfaces::linktype_of_hardware(512), (113, true));  // PPP
/// ```
pub fn linktype_of_hardware(arphrd: u16) -> (u16, bool) {
    match arphrd {
        // Ethernet, Metricom and loopback (the kernel gives lo an
        // all-zero Ethernet header).
        1 | 23 | 772 => (ETHERNET, false),
        6 | 800 => (6, false), // IEEE 802 (token ring)
        774 => (10, false),    // FDDI
        801 => (105, false),   // 802.11
        802 => (119, false),   // Prism
        803 => (127, false),   // radiotap
        513 => (104, false),   // Cisco HDLC
        770 => (107, false),   // Frame Relay
        // Tunnels, SLIP and friends, and no header at all (tun): raw IP.
        768 | 776 | 256 | 257 | 258 | 259 | 264 | 518 | 15 | 0xfffe => (RAW, false),
        // Everything else is captured cooked.
        _ => (LINUX_SLL, true),
    }
}

fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file))
        .ok()
        .map(|s| s.trim().to_string())
}

fn parse_int(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The interface named `name`, as the kernel shows it now.
pub fn interface(name: &str) -> Result<Interface, LiveError> {
    let missing = || LiveError::NoSuchInterface(name.to_string());
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(missing());
    }
    let dir = Path::new("/sys/class/net").join(name);
    let index = read(&dir, "ifindex")
        .and_then(|s| s.parse().ok())
        .ok_or_else(missing)?;
    let hardware = read(&dir, "type").and_then(|s| s.parse().ok()).unwrap_or(1);
    let flags = read(&dir, "flags").and_then(|s| parse_int(&s)).unwrap_or(0);
    let operstate = read(&dir, "operstate");
    // libpcap asks the driver (ethtool's link state); a device whose driver
    // does not say has no connection state.
    let connected = crate::sys::link_detected(name).ok();
    let up = flags & libc::IFF_UP as u64 != 0;
    Ok(Interface {
        name: name.to_string(),
        index,
        hardware,
        up,
        // The kernel's IFF_RUNNING: up, and operationally up (or a device
        // that does not report its state).
        running: up && matches!(operstate.as_deref(), Some("up") | Some("unknown")),
        loopback: flags & libc::IFF_LOOPBACK as u64 != 0,
        connected,
    })
}

/// Every interface, in the order tcpdump's `-D` lists them: those up and
/// running first, loopback after the others, then by index.
pub fn interfaces() -> Result<Vec<Interface>, LiveError> {
    let entries = std::fs::read_dir("/sys/class/net").map_err(|e| LiveError::System {
        what: "/sys/class/net".into(),
        source: e,
    })?;
    let mut all: Vec<Interface> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| interface(&e.file_name().to_string_lossy()).ok())
        .collect();
    all.sort_by_key(|i| (!(i.up && i.running), i.loopback, i.index));
    Ok(all)
}
