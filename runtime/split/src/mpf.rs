//! A filter set as MPF programs (`sluice split --mpf`): every filter a
//! `bpf:` program, MPF instructions allowed, all installed in one
//! [`sluice_mpf::MpfSet`], where programs that differ only in their keys
//! run once per packet and postponed packets go out after the packet
//! that lets them through.
//!
//! The rule: filter ids in the set are the filters' positions, so an MPF
//! delivery names the filter it goes to as any other split does.

use crate::FilterLine;
use sluice_filter::{Language, Spec};
use std::path::Path;

/// A filter that is not an MPF program: its position in the set and why.
///
/// ```
/// use sluice_split::{BadProgram, NotMpf};
/// let b = BadProgram { index: 0, why: NotMpf::Language(sluice_filter::Language::Cspf) };
/// assert_eq!(b.why.to_string(), "MPF takes bpf: programs, not cspf");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadProgram {
    /// Position in the filter set, from 0.
    pub index: usize,
    /// What is wrong.
    pub why: NotMpf,
}

/// Why a filter is not an MPF program.
///
/// ```
/// let w = sluice_split::NotMpf::Invalid("bad".into());
/// assert_eq!(w.to_string(), "bad");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotMpf {
    /// It is written in another language.
    #[error("MPF takes bpf: programs, not {}", .0.name())]
    Language(Language),
    /// It is not a valid program (a `bpf:@file` program names its file).
    #[error("{0}")]
    Invalid(String),
}

/// The filters as MPF programs in one set (filter ids in set order);
/// `dir` is where relative `bpf:@path` files are read from. Every filter
/// that is not a `bpf:` program, or not a valid one, is reported.
///
/// ```
/// use sluice_split::{filter_pairs, mpf_set};
/// let set = filter_pairs([("v4", "bpf:4; 40 0 0 12; 21 0 1 2048; 6 0 0 65535; 6 0 0 0")]).unwrap();
/// assert_eq!(mpf_set(&set, None, Default::default()).unwrap().stats().filters, 1);
/// let bad = filter_pairs([("tcp", "tcp")]).unwrap();
/// let why = &mpf_set(&bad, None, Default::default()).unwrap_err()[0].why;
/// assert_eq!(why.to_string(), "MPF takes bpf: programs, not pcap");
/// ```
pub fn mpf_set(
    filters: &[FilterLine],
    dir: Option<&Path>,
    config: sluice_mpf::Config,
) -> Result<sluice_mpf::MpfSet, Vec<BadProgram>> {
    let mut set = sluice_mpf::MpfSet::new(config);
    let mut errors = Vec::new();
    for (index, f) in filters.iter().enumerate() {
        let bad = |why: NotMpf| BadProgram { index, why };
        let spec = match Spec::parse(&f.expression, dir) {
            Ok(s) => s,
            Err(e) => {
                errors.push(bad(NotMpf::Invalid(e.to_string())));
                continue;
            }
        };
        if spec.language != Language::Bpf {
            errors.push(bad(NotMpf::Language(spec.language)));
            continue;
        }
        // As for `bpf:` filters: on one line, ';' separates instructions.
        let text = if spec.file.is_none() && !spec.text.trim_end().contains('\n') {
            spec.text.replace(';', "\n")
        } else {
            spec.text.clone()
        };
        match sluice_mpf::MpfProgram::parse(&text) {
            Ok(p) => {
                set.insert(&p);
            }
            Err(e) => errors.push(bad(NotMpf::Invalid(match &spec.file {
                Some(path) => format!("{path}: {e}"),
                None => e.to_string(),
            }))),
        }
    }
    match errors.is_empty() {
        true => Ok(set),
        false => Err(errors),
    }
}
