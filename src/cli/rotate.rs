//! tcpdump's rotation options for `-w FILE` (`-C`, `-G`, `-W`): how the
//! command reads them and refuses combinations that mean nothing. The
//! rotation itself is [`sluice::capture::sink::Rotation`].
//!
//! The rule: what `-C`, `-G` and `-W` mean is decided in the sink; this
//! module only turns the command line into a [`Rule`].

use super::usage;
use sluice::capture::sink::{valid_pattern, Rule};

/// tcpdump's rotation options for `-w` (flattened into `sluice filter`).
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct RotateArgs {
    /// With -w: start a new file when the current one is larger than SIZE
    /// million bytes (FILE, then FILE1, FILE2…), as tcpdump's -C.
    #[arg(short = 'C', value_name = "SIZE", value_parser = parse_size)]
    pub size: Option<u64>,
    /// With -w: start a new file every SECS seconds (checked as packets
    /// are written); FILE is a strftime pattern in local time
    /// (out-%Y%m%d-%H%M%S.pcap).
    #[arg(short = 'G', value_name = "SECS", value_parser = clap::value_parser!(u32).range(1..))]
    pub seconds: Option<u32>,
    /// With -C: a ring of N files (FILE0…, numbered with the digits of
    /// N-1, the oldest overwritten); with -G alone: stop after N files.
    #[arg(short = 'W', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub files: Option<u32>,
}

/// The largest `-C`: its bytes must fit a signed 64-bit file offset.
const MAX_SIZE: u64 = i64::MAX as u64 / 1_000_000;

/// `-C`'s argument, in bytes: a whole number of millions of bytes, as
/// Debian's tcpdump 4.99 reads it (no k/m/g suffix; a leading `+` and
/// leading zeros are fine).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "invalid file size {text} (a number of millions of bytes)"
        ));
    }
    let too_large = || format!("file size {text} is too large");
    let n: u64 = digits.parse().map_err(|_| too_large())?;
    match n {
        0 => Err(format!("invalid file size {text} (must be at least 1)")),
        n if n > MAX_SIZE => Err(too_large()),
        n => Ok(n * 1_000_000),
    }
}

impl RotateArgs {
    /// The rotation rule these options ask for.
    pub fn rule(&self) -> Rule {
        Rule {
            size: self.size,
            seconds: self.seconds,
            files: self.files,
        }
    }

    /// Whether any of `-C`, `-G`, `-W` was given.
    pub fn any(&self) -> bool {
        self.size.is_some() || self.seconds.is_some() || self.files.is_some()
    }

    /// Refuse combinations that mean nothing (usage error, status 2):
    /// rotation without a `-w` file (or with `-w -`), `-W` alone, and with
    /// `-G` a file name that is not a strftime pattern.
    pub fn check(&self, write: Option<&str>) {
        if !self.any() {
            return;
        }
        let flags: Vec<&str> = [
            (self.size.is_some(), "-C"),
            (self.seconds.is_some(), "-G"),
            (self.files.is_some(), "-W"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, f)| *f)
        .collect();
        let flags = flags.join(", ");
        match write {
            None => usage(&format!("{flags}: rotating output files needs -w FILE")),
            Some("-") => usage(&format!(
                "{flags}: standard output (-w -) cannot be rotated, -w needs a file"
            )),
            Some(path) => {
                if self.files.is_some() && self.size.is_none() && self.seconds.is_none() {
                    usage("-W sets how many files -C or -G make: add -C or -G");
                }
                if self.seconds.is_some() && !valid_pattern(path) {
                    usage(&format!(
                        "-w {path}: with -G the name is a strftime pattern, and this one is not valid (write %% for a %)"
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_millions_of_bytes() {
        assert_eq!(parse_size("1"), Ok(1_000_000));
        assert_eq!(parse_size("+02"), Ok(2_000_000));
        assert_eq!(parse_size("9223372036854"), Ok(9_223_372_036_854_000_000));
        for bad in ["0", "", "1k", "1m", "1g", "1.5", "-1", " 1", "x"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_size("9223372036855"),
            Err("file size 9223372036855 is too large".into())
        );
    }

    #[test]
    fn usage_rules() {
        // (The refusals exit; they are run as commands in tests/cli.)
        assert!(!RotateArgs::default().any());
        let r = RotateArgs {
            size: Some(1),
            seconds: Some(1),
            files: Some(1),
        };
        assert!(r.rule().any());
        RotateArgs::default().check(None);
        r.check(Some("out-%H"));
    }
}
