//! Printing accepted packets as tcpdump prints them: sluice filters, and
//! Debian's tcpdump decodes.
//!
//! The rule: sluice decides which packets are printed, tcpdump decides
//! how. The accepted packets are written, as a capture in the input's
//! format, into a pipe to `tcpdump -r -` with the user's printing options
//! (`-v`, `-e`, `-n`, `-x`, `-t`...), so every line is the one `tcpdump -r`
//! prints for that packet: tcpdump's protocol printers are tcpdump's life's
//! work, and a second copy of them would always lag behind. tcpdump runs
//! on sluice's libpcap where `sluice exec` finds it, else on the system's
//! (it only reads the pipe). The hand-off is said once on standard error.
//!
//! Without tcpdump (or with `SLUICE_TCPDUMP=none`), sluice prints its own
//! one-line summaries — tcpdump `-q -nn`'s lines for IP, TCP, UDP, ARP and
//! ICMP echo — and says what to install; the options only tcpdump's
//! decoders honour (`-v`, `-S`, `-E`...) are refused then.

use super::print::{Options, Printer};
use super::{io_msg, Fail, Stdout};
use clap::ArgAction;
use sluice::capture::{CaptureFormat, CaptureWriter, Packet};
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

/// tcpdump's printing options that only its decoders honour, passed on to
/// it as they are.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DecodeArgs {
    /// More detail in each packet's decode (-v, -vv, -vvv), as tcpdump prints it.
    #[arg(short = 'v', action = ArgAction::Count)]
    pub verbose: u8,
    /// Make standard output line buffered (each packet's lines as soon as they are printed).
    #[arg(short = 'l')]
    pub line_buffered: bool,
    /// Print absolute TCP sequence numbers, not relative ones.
    #[arg(short = 'S', long = "absolute-tcp-sequence-numbers")]
    pub absolute_seq: bool,
    /// Print a packet number at the start of each line.
    #[arg(short = '#', long = "number")]
    pub number: bool,
    /// Do not verify IP, TCP and UDP checksums in the decode.
    #[arg(short = 'K', long = "dont-verify-checksums")]
    pub no_checksums: bool,
    /// Print host names without their domain.
    #[arg(short = 'N')]
    pub no_domain: bool,
    /// Print BGP AS numbers in ASDOT notation.
    #[arg(short = 'b')]
    pub asdot: bool,
    /// Detect 802.11s draft mesh headers.
    #[arg(short = 'H')]
    pub mesh: bool,
    /// Print undecoded NFS handles.
    #[arg(short = 'u')]
    pub nfs_handles: bool,
    /// Decrypt IPsec ESP with these secrets (tcpdump's -E spi@ipaddr algo:secret,...).
    #[arg(short = 'E', value_name = "SECRET")]
    pub esp_secret: Option<String>,
    /// Check TCP-MD5 signatures with this secret.
    #[arg(short = 'M', value_name = "SECRET")]
    pub md5_secret: Option<String>,
    /// Load this SMI MIB module for SNMP decodes (may be repeated).
    #[arg(short = 'm', value_name = "MODULE")]
    pub mib: Vec<String>,
    /// Decode the packets as this type (tcpdump's -T: rtp, snmp, vxlan, ...).
    #[arg(short = 'T', value_name = "TYPE")]
    pub packet_type: Option<String>,
}

impl DecodeArgs {
    /// The first option given that only tcpdump's decoders honour.
    pub fn needs_tcpdump(&self) -> Option<&'static str> {
        (self.verbose > 0)
            .then_some("-v")
            .or_else(|| self.printing_only().into_iter().find(|f| *f != "-#"))
    }

    /// The first option given that only changes printed lines (for the
    /// refusals of `--count`, `--verdicts` and `-w` without `--print`);
    /// `-v` also counts packets written by a live `-w`, and `-l` is
    /// harmless, so neither is one.
    pub fn printing_flag(&self) -> Option<&'static str> {
        self.printing_only().into_iter().next()
    }

    /// The printing options given, `-v` and `-l` aside.
    fn printing_only(&self) -> Vec<&'static str> {
        [
            (self.absolute_seq, "-S"),
            (self.no_checksums, "-K"),
            (self.no_domain, "-N"),
            (self.asdot, "-b"),
            (self.mesh, "-H"),
            (self.nfs_handles, "-u"),
            (self.esp_secret.is_some(), "-E"),
            (self.md5_secret.is_some(), "-M"),
            (!self.mib.is_empty(), "-m"),
            (self.packet_type.is_some(), "-T"),
            (self.number, "-#"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, flag)| flag)
        .collect()
    }
}

/// Everything that decides how a packet is printed: sluice's options,
/// tcpdump's options, and sluice's own printer's options.
pub struct Style<'a> {
    /// `-n` given this many times.
    pub numeric: u8,
    /// `-q`.
    pub quick: bool,
    /// `-U`.
    pub unbuffered: bool,
    /// `--time-stamp-precision nano`.
    pub nanos: bool,
    /// `-x`, `-X` and `-A` given this many times.
    pub hex: u8,
    /// `-X`.
    pub hex_ascii: u8,
    /// `-A`.
    pub ascii: u8,
    /// `-t` given this many times.
    pub ts: u8,
    /// `-e`.
    pub link: bool,
    /// The options passed on to tcpdump.
    pub decode: &'a DecodeArgs,
    /// The capture file's name, for tcpdump's banner (`None`: a live
    /// capture, where sluice's own banner says it all).
    pub input: Option<&'a str>,
    /// The own printer's options.
    pub own: Options,
}

impl Style<'_> {
    /// tcpdump's arguments for these options: `-r -` and every printing option.
    pub fn tcpdump_args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["-r".into(), "-".into()];
        let repeat = |flag: char, n: u8| format!("-{}", flag.to_string().repeat(n.into()));
        let d = self.decode;
        for (flag, n) in [
            ('n', self.numeric),
            ('v', d.verbose),
            ('t', self.ts),
            ('x', self.hex),
            ('X', self.hex_ascii),
            ('A', self.ascii),
        ] {
            if n > 0 {
                a.push(repeat(flag, n));
            }
        }
        for (on, flag) in [
            (self.quick, "-q"),
            (self.link, "-e"),
            (self.unbuffered, "-U"),
            (d.line_buffered, "-l"),
            (d.absolute_seq, "-S"),
            (d.number, "-#"),
            (d.no_checksums, "-K"),
            (d.no_domain, "-N"),
            (d.asdot, "-b"),
            (d.mesh, "-H"),
            (d.nfs_handles, "-u"),
        ] {
            if on {
                a.push(flag.into());
            }
        }
        if self.nanos {
            a.push("--time-stamp-precision=nano".into());
        }
        for (flag, value) in [
            ("-E", &d.esp_secret),
            ("-M", &d.md5_secret),
            ("-T", &d.packet_type),
        ] {
            if let Some(v) = value {
                a.extend([flag.to_string(), v.clone()]);
            }
        }
        for m in &d.mib {
            a.extend(["-m".to_string(), m.clone()]);
        }
        a
    }
}

/// Where printed packets go: tcpdump, or sluice's own printer.
pub enum Lines {
    /// Packets handed to tcpdump through a pipe.
    Tcpdump(Box<Decoder>),
    /// sluice's own one-line summaries.
    Own(Printer),
}

impl Lines {
    /// The printer for these options: tcpdump where it is installed,
    /// else sluice's own (said on standard error), or an error naming
    /// what to install when an option needs tcpdump. `format` is the
    /// capture format the packets are written to tcpdump in.
    pub fn open(style: &Style<'_>, format: &CaptureFormat) -> Result<Lines, Fail> {
        match find_tcpdump() {
            Some(tcpdump) => Ok(Lines::Tcpdump(Box::new(Decoder::start(
                &tcpdump, style, format,
            )?))),
            None => {
                if let Some(flag) = style.decode.needs_tcpdump() {
                    return Err(Fail(format!(
                        "{flag} is printed by tcpdump's decoders, and tcpdump is not installed: \
                         install it (apt-get install tcpdump)"
                    )));
                }
                eprintln!(
                    "sluice: tcpdump is not installed, so sluice prints its own short lines \
                     (tcpdump -q -nn's for IP, TCP, UDP, ARP and ICMP echo); \
                     install tcpdump (apt-get install tcpdump) for tcpdump's decode"
                );
                Ok(Lines::Own(Printer::new(style.own)))
            }
        }
    }

    /// Print one accepted packet.
    pub fn packet(&mut self, pkt: &Packet<'_>, out: &mut Stdout) -> Result<(), Fail> {
        match self {
            Lines::Tcpdump(d) => d.packet(pkt),
            Lines::Own(p) => out.put(&p.packet(pkt)),
        }
    }

    /// Push what is buffered on to tcpdump (live capture, `-U`).
    pub fn flush(&mut self) -> Result<(), Fail> {
        match self {
            Lines::Tcpdump(d) => d.flush(),
            Lines::Own(_) => Ok(()),
        }
    }

    /// The end of the packets: tcpdump reads to the end and must exit well.
    pub fn finish(self) -> Result<(), Fail> {
        match self {
            Lines::Tcpdump(d) => d.finish(),
            Lines::Own(_) => Ok(()),
        }
    }
}

/// The tcpdump program to hand packets to: `$SLUICE_TCPDUMP` (`none`:
/// no hand-off), else `tcpdump` on `PATH` or in `/usr/sbin`, `/usr/bin`.
pub fn find_tcpdump() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("SLUICE_TCPDUMP") {
        return (v != "none" && !v.is_empty()).then(|| PathBuf::from(v));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into()])
        .map(|d| d.join("tcpdump"))
        .find(|p| p.is_file())
}

/// A tcpdump process reading the accepted packets from a pipe.
pub struct Decoder {
    child: Child,
    pipe: Option<CaptureWriter<ChildStdin>>,
    /// Passes tcpdump's standard error on; true when tcpdump said its
    /// standard output was closed.
    relay: Option<std::thread::JoinHandle<bool>>,
    /// Flush the pipe after every packet (`-U`, `-l`).
    flush_each: bool,
}

impl Decoder {
    /// Start `tcpdump -r -` with the printing options of `style`.
    fn start(
        tcpdump: &std::path::Path,
        style: &Style<'_>,
        format: &CaptureFormat,
    ) -> Result<Decoder, Fail> {
        let args = style.tcpdump_args();
        let mut cmd = Command::new(tcpdump);
        // A process group of its own: Ctrl-C stops sluice, which then
        // closes the pipe, and tcpdump prints every packet it was given.
        cmd.args(&args)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let on = match super::exec::library_path() {
            Some(dir) => {
                let mut path = dir.into_os_string();
                if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
                    path.push(":");
                    path.push(old);
                }
                cmd.env("LD_LIBRARY_PATH", path);
                "sluice's libpcap"
            }
            None => "the system's libpcap",
        };
        let mut child = cmd
            .spawn()
            .map_err(|e| Fail(format!("cannot run {}: {}", tcpdump.display(), io_msg(&e))))?;
        eprintln!(
            "sluice: tcpdump prints the accepted packets ({} {}, on {on})",
            tcpdump.display(),
            args.join(" ")
        );
        // tcpdump's messages pass through, its banner naming the input.
        let relay = child.stderr.take().map(|err| {
            let from = style.input.map(|i| format!("reading from file {i},"));
            std::thread::spawn(move || {
                let mut stderr = std::io::stderr();
                let mut closed = false;
                for line in std::io::BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    // A reader that went away (`| head`) ends the run
                    // quietly, as it does without tcpdump.
                    if line.starts_with("tcpdump: Unable to write output: Broken pipe") {
                        closed = true;
                        continue;
                    }
                    let line = match (line.strip_prefix("reading from file -,"), &from) {
                        (Some(rest), Some(from)) => format!("{from}{rest}"),
                        (Some(_), None) => continue,
                        (None, _) => line,
                    };
                    let _ = writeln!(stderr, "{line}");
                }
                closed
            })
        });
        let stdin = child.stdin.take().expect("piped standard input");
        let pipe = CaptureWriter::new(stdin, "the pipe to tcpdump", format);
        let mut d = Decoder {
            child,
            pipe: None,
            relay,
            flush_each: style.unbuffered || style.decode.line_buffered,
        };
        match pipe {
            Ok(p) => d.pipe = Some(p),
            Err(e) => return Err(d.ended(Some(e.to_string()))),
        }
        Ok(d)
    }

    /// Hand one packet to tcpdump.
    fn packet(&mut self, pkt: &Packet<'_>) -> Result<(), Fail> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(());
        };
        let mut done = pipe.write_packet(pkt);
        if done.is_ok() && self.flush_each {
            done = pipe.flush();
        }
        done.map_err(|e| self.ended(Some(e.to_string())))
    }

    /// Push buffered packets to tcpdump.
    fn flush(&mut self) -> Result<(), Fail> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(());
        };
        pipe.flush().map_err(|e| self.ended(Some(e.to_string())))
    }

    /// Close the pipe and wait for tcpdump.
    fn finish(mut self) -> Result<(), Fail> {
        let closed = self.pipe.take().map(|p| p.finish().map(drop));
        match self.wait() {
            Ok(()) => match closed {
                Some(Err(e)) => Err(Fail(e.to_string())),
                _ => Ok(()),
            },
            Err(e) => Err(e),
        }
    }

    /// The failure when writing to tcpdump failed: tcpdump has ended.
    fn ended(&mut self, why: Option<String>) -> Fail {
        self.pipe = None;
        match self.wait() {
            Err(e) => e,
            Ok(()) => Fail(why.unwrap_or_else(|| "tcpdump ended early".into())),
        }
    }

    /// Wait for tcpdump: its exit status as a failure, a closed standard
    /// output (`| head`) as the quiet end it is for sluice too.
    fn wait(&mut self) -> Result<(), Fail> {
        let status = self
            .child
            .wait()
            .map_err(|e| Fail(format!("tcpdump: {}", io_msg(&e))))?;
        let closed = self.relay.take().is_some_and(|t| t.join().unwrap_or(false));
        use std::os::unix::process::ExitStatusExt;
        if status.success() {
            Ok(())
        } else if closed || status.signal() == Some(13) {
            // SIGPIPE: whoever read standard output went away.
            Err(super::stdout_failed(&std::io::Error::from(
                std::io::ErrorKind::BrokenPipe,
            )))
        } else {
            Err(Fail(format!(
                "tcpdump, printing the packets, ended with {status}"
            )))
        }
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // An error elsewhere: close the pipe, let tcpdump print what it has.
        drop(self.pipe.take());
        let _ = self.child.wait();
        if let Some(t) = self.relay.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::print::Dump;
    use super::*;

    #[test]
    fn tcpdump_gets_every_printing_option() {
        let decode = DecodeArgs {
            verbose: 2,
            number: true,
            packet_type: Some("vxlan".into()),
            mib: vec!["A".into()],
            ..DecodeArgs::default()
        };
        let style = Style {
            numeric: 2,
            quick: true,
            unbuffered: false,
            nanos: true,
            hex: 0,
            hex_ascii: 2,
            ascii: 0,
            ts: 4,
            link: true,
            decode: &decode,
            input: Some("x.pcap"),
            own: Options {
                ts: 4,
                nanos: true,
                link: true,
                dump: Dump::None,
                big_endian: false,
                number: true,
            },
        };
        assert_eq!(
            style.tcpdump_args().join(" "),
            "-r - -nn -vv -tttt -XX -q -e -# --time-stamp-precision=nano -T vxlan -m A"
        );
        assert_eq!(decode.needs_tcpdump(), Some("-v"));
        assert_eq!(decode.printing_flag(), Some("-m"));
        assert_eq!(DecodeArgs::default().printing_flag(), None);
    }
}
