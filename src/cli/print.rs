//! Packets printed as tcpdump prints them: the timestamp formats of
//! `-t`…`-ttttt` (micro- or nanoseconds), the one-line summary (`-e` for
//! the link header), and the `-x`/`-xx`/`-X`/`-XX`/`-A` dumps in tcpdump's
//! layout.

use sluice::capture::Packet;
use std::fmt::Write;

/// Which dump follows each packet's line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dump {
    /// None.
    None,
    /// `-x` (`link`: `-xx`, from the link header on).
    Hex { link: bool },
    /// `-X` (`-XX`): hex and ASCII side by side.
    HexAscii { link: bool },
    /// `-A` (`-AA`): ASCII.
    Ascii { link: bool },
}

impl Dump {
    /// tcpdump's choice among its flags: `-X` wins over `-x`, which wins
    /// over `-A`; doubled flags dump the link header too.
    pub fn from_flags(x: u8, big_x: u8, a: u8) -> Dump {
        if big_x > 0 {
            Dump::HexAscii {
                link: big_x > 1 || x > 1,
            }
        } else if x > 0 {
            Dump::Hex { link: x > 1 }
        } else if a > 0 {
            Dump::Ascii { link: a > 1 }
        } else {
            Dump::None
        }
    }
}

/// How packets are printed.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// How many `-t` flags: 0 time of day, 1 none, 2 seconds since 1970,
    /// 3 delta since the previous packet printed, 4 date and time, 5 delta
    /// since the first packet printed.
    pub ts: u8,
    /// Nanoseconds instead of microseconds (`--time-stamp-precision nano`).
    pub nanos: bool,
    /// The link header first (`-e`).
    pub link: bool,
    /// The dump after the line.
    pub dump: Dump,
    /// The capture's byte order (NULL and ENC links).
    pub big_endian: bool,
    /// Each line starts with the packet's number (`-#`).
    pub number: bool,
}

/// Prints packets one after the other (deltas need the previous one).
pub struct Printer {
    opts: Options,
    first: Option<i128>,
    prev: Option<i128>,
    printed: u64,
}

fn nanos_of(p: &Packet<'_>) -> i128 {
    i128::from(p.ts_sec) * 1_000_000_000 + i128::from(p.ts_nsec)
}

impl Printer {
    /// A printer with these options.
    pub fn new(opts: Options) -> Printer {
        Printer {
            opts,
            first: None,
            prev: None,
            printed: 0,
        }
    }

    /// The fraction of a second in the chosen precision.
    fn frac(&self, nsec: u32) -> String {
        if self.opts.nanos {
            format!("{nsec:09}")
        } else {
            format!("{:06}", nsec / 1000)
        }
    }

    /// A time of day (`HH:MM:SS`) or date and time in the local time zone.
    fn local(sec: i64, date: bool) -> String {
        let fmt = if date {
            "%Y-%m-%d %H:%M:%S"
        } else {
            "%H:%M:%S"
        };
        match chrono::DateTime::from_timestamp(sec, 0) {
            Some(t) => t.with_timezone(&chrono::Local).format(fmt).to_string(),
            None => format!("{sec}"),
        }
    }

    /// A time difference as ` HH:MM:SS.frac` (`-` for a negative one).
    fn delta(&self, ns: i128) -> String {
        let sign = if ns < 0 { '-' } else { ' ' };
        let ns = ns.unsigned_abs();
        let secs = ns / 1_000_000_000;
        let frac = self.frac((ns % 1_000_000_000) as u32);
        format!(
            "{sign}{:02}:{:02}:{:02}.{frac}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }

    /// The timestamp column with the space after it (empty for `-t`).
    pub fn timestamp(&mut self, p: &Packet<'_>) -> String {
        let now = nanos_of(p);
        let first = *self.first.get_or_insert(now);
        let prev = self.prev.replace(now).unwrap_or(now);
        let frac = self.frac(p.ts_nsec);
        match self.opts.ts {
            0 => format!("{}.{frac} ", Self::local(p.ts_sec, false)),
            1 => String::new(),
            2 => format!("{}.{frac} ", p.ts_sec),
            3 => format!("{} ", self.delta(now - prev)),
            4 => format!("{}.{frac} ", Self::local(p.ts_sec, true)),
            _ => format!("{} ", self.delta(now - first)),
        }
    }

    /// Everything printed for one packet, newline included.
    pub fn packet(&mut self, p: &Packet<'_>) -> String {
        let d = sluice::summary::describe(p.linktype, self.opts.big_endian, p.data, p.wirelen);
        self.printed += 1;
        let mut out = match self.opts.number {
            true => format!("{:5}  ", self.printed),
            false => String::new(),
        };
        out.push_str(&self.timestamp(p));
        out.push_str(if self.opts.link {
            &d.with_link
        } else {
            &d.line
        });
        let from = |link: bool| {
            if link {
                0
            } else {
                d.link_len.min(p.data.len())
            }
        };
        match self.opts.dump {
            Dump::None => {}
            Dump::Hex { link } if link || p.data.len() > d.link_len => {
                hex(&mut out, &p.data[from(link)..], false)
            }
            Dump::HexAscii { link } if link || p.data.len() > d.link_len => {
                hex(&mut out, &p.data[from(link)..], true)
            }
            Dump::Ascii { link } if link || p.data.len() > d.link_len => {
                ascii(&mut out, &p.data[from(link)..])
            }
            _ => {}
        }
        out.push('\n');
        out
    }
}

/// `-x`/`-X` lines: `\n\t0x0010:  4500 0054 …` with 16 bytes a line, in
/// pairs; with `ascii`, the hex column padded and the bytes as text
/// (`.` for anything but visible characters, space included) after two
/// spaces.
pub fn hex(out: &mut String, data: &[u8], ascii: bool) {
    for (i, line) in data.chunks(16).enumerate() {
        let _ = write!(out, "\n\t0x{:04x}:  ", i * 16);
        let mut h = String::with_capacity(40);
        for (j, pair) in line.chunks(2).enumerate() {
            if j > 0 {
                h.push(' ');
            }
            for b in pair {
                let _ = write!(h, "{b:02x}");
            }
        }
        if ascii {
            let _ = write!(out, "{h:<39}  ");
            out.extend(line.iter().map(|&b| {
                if (0x21..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            }));
        } else {
            out.push_str(&h);
        }
    }
}

/// `-A`: the bytes as text after a line break: printing characters, space,
/// tab and line feed as they are, a carriage return before a line feed left
/// out, anything else as `.`.
pub fn ascii(out: &mut String, data: &[u8]) {
    out.push('\n');
    for (i, &b) in data.iter().enumerate() {
        match b {
            b'\r' if data.get(i + 1) == Some(&b'\n') => {}
            b'\t' | b'\n' | 0x20..=0x7e => out.push(b as char),
            _ => out.push('.'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_flags_choose_as_tcpdump_does() {
        assert_eq!(Dump::from_flags(1, 2, 0), Dump::HexAscii { link: true });
        assert_eq!(Dump::from_flags(2, 0, 1), Dump::Hex { link: true });
        assert_eq!(Dump::from_flags(0, 0, 1), Dump::Ascii { link: false });
    }

    fn opts(ts: u8) -> Options {
        Options {
            ts,
            nanos: false,
            link: false,
            dump: Dump::None,
            big_endian: false,
            number: false,
        }
    }

    #[test]
    fn numbers() {
        let a = Packet::new(1_700_000_000, 0, 1, &[]);
        let mut p = Printer::new(Options {
            number: true,
            ..opts(1)
        });
        assert!(p.packet(&a).starts_with("    1  "));
        assert!(p.packet(&a).starts_with("    2  "));
    }

    #[test]
    fn timestamps() {
        let a = Packet::new(1_700_000_000, 0, 1, &[]);
        let b = Packet::new(1_700_000_001, 1_000_000, 1, &[]);
        let mut p = Printer::new(opts(2));
        assert_eq!(p.timestamp(&a), "1700000000.000000 ");
        let mut p = Printer::new(opts(3));
        assert_eq!(p.timestamp(&a), " 00:00:00.000000 ");
        assert_eq!(p.timestamp(&b), " 00:00:01.001000 ");
        assert_eq!(p.timestamp(&a), "-00:00:01.001000 ");
        let mut p = Printer::new(Options {
            nanos: true,
            ..opts(5)
        });
        assert_eq!(p.timestamp(&b), " 00:00:00.000000000 ");
        assert_eq!(Printer::new(opts(1)).timestamp(&a), "");
    }

    #[test]
    fn dumps() {
        let mut s = String::new();
        hex(&mut s, &[0x45, 0, 0x41], false);
        assert_eq!(s, "\n\t0x0000:  4500 41");
        let mut s = String::new();
        hex(&mut s, &[0x45, 0, 0x41], true);
        assert_eq!(s, format!("\n\t0x0000:  4500 41{}  E.A", " ".repeat(32)));
        let mut s = String::new();
        hex(&mut s, b"a b", true);
        assert!(s.ends_with("  a.b"), "{s}");
        let mut s = String::new();
        ascii(&mut s, b"GET /\r\nx\r\0");
        assert_eq!(s, "\nGET /\nx..");
        assert_eq!(Dump::from_flags(1, 2, 0), Dump::HexAscii { link: true });
        assert_eq!(Dump::from_flags(0, 0, 1), Dump::Ascii { link: false });
    }
}
