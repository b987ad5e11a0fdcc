//! Where accepted packets go: capture files written safely.
//!
//! * [`OutputFile`]: one capture file, never clobbered and never left half
//!   written under its name ([`Placement`] says how it is put in place).
//! * [`Rotation`]: one output over a series of files by a [`Rule`]
//!   (tcpdump's `-C`, `-G`, `-W`).
//! * [`FileSet`]: one file per filter in a directory, put in place all
//!   together or not at all.
//! * [`stale_temporaries`] and [`remove_temporaries`]: what a killed run
//!   left behind, and what a dying one must not.
//!
//! The rule: every writer of sluice writes through [`OutputFile`]; no
//! other code creates a capture file.
//!
//! ```
//! use sluice_capture::{CaptureFormat, Packet};
//! use sluice_capture::sink::{OutputFile, Placement};
//! let path = std::env::temp_dir().join(format!("sluice-sink-doc-{}.pcap", std::process::id()));
//! let mut out = OutputFile::create(path.to_str().unwrap(), &CaptureFormat::pcap(1, 65535), Placement::Replace)?;
//! out.write(&Packet::new(1, 0, 1, &[0u8; 42]))?;
//! out.finish()?;
//! assert_eq!(std::fs::metadata(&path).unwrap().len(), 24 + 16 + 42);
//! std::fs::remove_file(&path).unwrap();
//! # Ok::<(), sluice_capture::sink::OutputError>(())
//! ```

mod file;
mod rotate;
mod set;

pub use file::{
    io_message, out_dir, remove_temporaries, stale_temporaries, write_text, OutputError,
    OutputFile, Placement, StaleTemporary,
};
pub use rotate::{valid_pattern, Rotation, Rule};
pub use set::FileSet;
