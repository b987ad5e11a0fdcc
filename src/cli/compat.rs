//! The rest of tcpdump 4.99's options for `sluice filter`: those sluice
//! answers itself (`-L`, `-j host`, `-Z root`, `--version`), and those it
//! refuses, each with one line that says what to use instead.
//!
//! The rule: every option in tcpdump's manual is known to the parser, so
//! none ends in clap's "unexpected argument" (and its wrong `use '-- -v'`
//! tip); an option either does what tcpdump does or is refused here,
//! with exit status 2, before anything is read or written.

use super::usage;

/// tcpdump's options that `sluice filter` refuses or answers without
/// filtering.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CompatArgs {
    /// Monitor mode (802.11) is not set by sluice: refused, with what to use.
    #[arg(short = 'I', long = "monitor-mode")]
    pub monitor: bool,
    /// With -i: list the interface's link type, as tcpdump -L does, and exit.
    #[arg(short = 'L', long = "list-data-link-types")]
    pub list_link_types: bool,
    /// Time stamp type: sluice takes the kernel's host time stamps (`host`), nothing else.
    #[arg(short = 'j', long = "time-stamp-type", value_name = "TYPE")]
    pub tstamp_type: Option<String>,
    /// List time stamp types: refused (sluice takes host time stamps only).
    #[arg(short = 'J', long = "list-time-stamp-types")]
    pub list_tstamp_types: bool,
    /// A file naming the captures to read: refused, with what to use.
    #[arg(short = 'V', value_name = "FILE")]
    pub file_list: Option<String>,
    /// A command run on each rotated file: refused, with what to use.
    #[arg(short = 'z', value_name = "COMMAND")]
    pub postrotate: Option<String>,
    /// The user to run as after opening the interface: sluice keeps its
    /// user (`root` is accepted; any other is refused, with what to use).
    #[arg(short = 'Z', long = "relinquish-privileges", value_name = "USER")]
    pub user: Option<String>,
    /// 'Foreign' addresses as numbers: refused (tcpdump allows it with -i
    /// only, and sluice's packets reach tcpdump through a pipe); use -n.
    #[arg(short = 'f')]
    pub foreign: bool,
    /// Print sluice's version and exit.
    #[arg(long = "version")]
    pub version: bool,
}

impl CompatArgs {
    /// Refuse what sluice does not do (usage error, status 2), each with
    /// one line saying what to use instead; `live` is whether `-i` was
    /// given.
    pub fn check(&self, live: bool) {
        if self.monitor {
            usage(
                "-I: sluice does not switch interfaces to monitor mode; do it first \
                 (iw dev IFACE set type monitor) and capture on it with -i",
            );
        }
        if self.foreign {
            usage(
                "-f: tcpdump decodes sluice's packets from a pipe (-r), where -f does not \
                 apply; use -n to print every address as a number",
            );
        }
        if self.list_link_types && !live {
            usage("-L lists an interface's link types: add -i IFACE");
        }
        if let Some(t) = self.tstamp_type.as_deref() {
            if !t.eq_ignore_ascii_case("host") {
                usage(&format!(
                    "-j {t}: sluice takes the kernel's host time stamps only (-j host); \
                     for adapter time stamps use tcpdump -j {t}"
                ));
            }
        }
        if self.list_tstamp_types {
            usage(
                "-J: sluice takes the kernel's host time stamps only (-j host); \
                 tcpdump -J -i IFACE lists what an interface offers",
            );
        }
        if self.file_list.is_some() {
            usage(
                "-V: join the captures first (mergecap -a -w all.pcap FILE...) \
                 and read them with -r all.pcap",
            );
        }
        if self.postrotate.is_some() {
            usage(
                "-z: sluice runs no command per file; run it on the finished files \
                 afterwards (e.g. for f in out.pcap*; do gzip \"$f\"; done)",
            );
        }
        if let Some(user) = self.user.as_deref() {
            if user != "root" {
                usage(&format!(
                    "-Z {user}: sluice does not change user; run it as {user}, with capture \
                     rights given once (setcap cap_net_raw,cap_net_admin+eip $(command -v sluice))"
                ));
            }
        }
    }
}

/// tcpdump's `-L` for the interface a live capture opened: its one link
/// type, named and described as in `banner` (`listening on eth0,
/// link-type EN10MB (Ethernet), ...`).
pub fn link_types(name: &str, banner: &str) -> String {
    let lt = banner
        .split_once("link-type ")
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.rsplit_once(", snapshot length"))
        .map_or("?", |(lt, _)| lt);
    // sluice captures in the one link type the kernel gives, so -y has
    // nothing to choose from: tcpdump's heading, without its hint.
    format!("Data link types for {name}:\n  {lt}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_types_as_tcpdump_lists_them() {
        let b = "listening on eth0, link-type EN10MB (Ethernet), snapshot length 262144 bytes";
        assert_eq!(
            link_types("eth0", b),
            "Data link types for eth0:\n  EN10MB (Ethernet)\n"
        );
    }
}
