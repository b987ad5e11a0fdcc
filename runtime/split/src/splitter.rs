//! Which filters of a set accept each packet of a capture: one merged
//! classifier per link type met (a pcapng file may have several), built
//! the first time the link type is seen and then shared by every run and
//! thread that uses the set.

use crate::{BadFilter, FilterLine, Merging, MergingScratch, SplitError};
use sluice_filter::{LinkType, Program, ProgramBuilder};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// How a split compiles and delivers.
///
/// ```
/// let o = sluice_split::Options::default();
/// assert!(o.native && !o.first_match);
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Each packet goes only to the first filter (in set order) that
    /// accepts it.
    pub first_match: bool,
    /// The merged filters as machine code (else walked in Rust).
    pub native: bool,
    /// What an accepted packet returns when compiling (tcpdump's 262144).
    pub snaplen: u32,
    /// Where `LANG:@path` filter files are read from.
    pub dir: Option<PathBuf>,
    /// Fragment dispatch (MPF section 3): later fragments of an IP
    /// datagram go to the filters that took its first fragment, held
    /// within these limits when they come first.
    pub fragments: Option<sluice_fragments::Limits>,
    /// MPF: every filter a `bpf:` program, MPF instructions allowed, in
    /// one MPF set ([`crate::mpf_set`]); not with `first_match` or
    /// `fragments`.
    pub mpf: Option<sluice_mpf::Config>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            first_match: false,
            native: true,
            snaplen: 262_144,
            dir: None,
            fragments: None,
            mpf: None,
        }
    }
}

/// A filter set, compiled for each link type (and capture byte order) the
/// first time it is asked for; shared by threads.
///
/// ```
/// use sluice_capture::Packet;
/// use sluice_split::{filter_pairs, Options, Splitter};
/// let set = filter_pairs([("v4", "ip"), ("all", "")]).unwrap();
/// let all = Splitter::new(set.clone(), Options::default());
/// let first = Splitter::new(set, Options { first_match: true, ..Options::default() });
/// let mut frame = [0u8; 60];
/// frame[12] = 8;
/// let pkt = Packet::new(0, 0, 1, &frame);
/// assert_eq!(all.classifier(false).classify(&pkt).unwrap(), &[0, 1]);
/// assert_eq!(first.classifier(false).classify(&pkt).unwrap(), &[0]);
/// ```
pub struct Splitter {
    filters: Vec<FilterLine>,
    options: Options,
    compiled: Mutex<HashMap<(u16, bool), Arc<Merging>>>,
}

impl Splitter {
    /// A filter set to split with.
    pub fn new(filters: Vec<FilterLine>, options: Options) -> Splitter {
        Splitter {
            filters,
            options,
            compiled: Mutex::default(),
        }
    }

    /// The filter set.
    pub fn filters(&self) -> &[FilterLine] {
        &self.filters
    }

    /// How it splits.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The set merged for a link type and a capture byte order (it
    /// matters on NULL and ENC links), compiled on the first call.
    pub fn merged(&self, linktype: u16, big_endian: bool) -> Result<Arc<Merging>, SplitError> {
        if self.filters.is_empty() {
            return Err(SplitError::NoFilters);
        }
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = compiled.get(&(linktype, big_endian)) {
            return Ok(m.clone());
        }
        let (lt, builder) = self.builder(linktype, big_endian)?;
        let merged = Merging::build(&self.filters, &builder, self.options.native)
            .map_err(|r| self.rejected(lt, r))?;
        let merged = Arc::new(merged);
        compiled.insert((linktype, big_endian), merged.clone());
        Ok(merged)
    }

    /// Every filter compiled for merging for a link type and byte order,
    /// in set order (on every core), or every filter that does not.
    pub(crate) fn compile_set(
        &self,
        linktype: u16,
        big_endian: bool,
    ) -> Result<Vec<sluice_classifier::merged::Compiled>, SplitError> {
        let (lt, builder) = self.builder(linktype, big_endian)?;
        crate::merging::compile_set(&self.filters, &builder).map_err(|r| self.rejected(lt, r))
    }

    /// The link type and the builder the set compiles with for it.
    fn builder(
        &self,
        linktype: u16,
        big_endian: bool,
    ) -> Result<(LinkType, ProgramBuilder), SplitError> {
        let lt =
            LinkType::from_number(u32::from(linktype)).ok_or(SplitError::LinkType(linktype))?;
        let builder = Program::builder(lt)
            .snaplen(self.options.snaplen)
            .capture_big_endian(big_endian)
            .dir(self.options.dir.as_deref());
        Ok((lt, builder))
    }

    /// The filters that did not compile for `lt`, as an error.
    fn rejected(&self, lt: LinkType, rejected: Vec<crate::merging::Rejected>) -> SplitError {
        SplitError::Filters(
            rejected
                .into_iter()
                .map(|r| BadFilter {
                    filter: self.filters[r.index].clone(),
                    linktype: lt,
                    error: r.error,
                })
                .collect(),
        )
    }

    /// The set compiled for a link type and byte order, as bytes in the
    /// shipped format ([`crate::shipped`]): what another process loads
    /// with [`Splitter::load`] instead of compiling the set again.
    ///
    /// ```
    /// use sluice_split::{filter_pairs, Options, Splitter};
    /// let set = || Splitter::new(filter_pairs([("web", "tcp port 80")]).unwrap(), Options::default());
    /// let bytes = set().export(1, false)?;
    /// let there = set();
    /// assert_eq!(there.load(&bytes)?, (1, false));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn export(&self, linktype: u16, big_endian: bool) -> Result<Vec<u8>, SplitError> {
        if self.filters.is_empty() {
            return Err(SplitError::NoFilters);
        }
        let compiled = self.compile_set(linktype, big_endian)?;
        Ok(crate::shipped::encode(
            self, linktype, big_endian, &compiled,
        ))
    }

    /// Load a set compiled elsewhere ([`Splitter::export`] of the same
    /// filters and settings, by the same sluice): its link type's merged
    /// classifier is built from it, nothing is compiled. Returns the link
    /// type and byte order it is for.
    ///
    /// ```
    /// use sluice_split::{filter_pairs, Options, Splitter};
    /// let s = Splitter::new(filter_pairs([("a", "tcp")]).unwrap(), Options::default());
    /// assert!(s.load(b"not shipped bytes").is_err());
    /// ```
    pub fn load(&self, bytes: &[u8]) -> Result<(u16, bool), crate::shipped::ShipError> {
        let (linktype, big_endian, compiled) = crate::shipped::decode(self, bytes)?;
        let merged = Arc::new(Merging::from_compiled(compiled, self.options.native));
        self.compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((linktype, big_endian), merged);
        Ok((linktype, big_endian))
    }

    /// The set as one MPF set, for one run (MPF sets keep per-run state:
    /// registered keys and postponed packets).
    ///
    /// ```
    /// use sluice_split::{filter_pairs, Options, Splitter};
    /// let s = Splitter::new(filter_pairs([("a", "bpf:1; 6 0 0 1")]).unwrap(), Options::default());
    /// assert_eq!(s.mpf()?.stats().filters, 1);
    /// # Ok::<(), sluice_split::SplitError>(())
    /// ```
    pub fn mpf(&self) -> Result<sluice_mpf::MpfSet, SplitError> {
        if self.filters.is_empty() {
            return Err(SplitError::NoFilters);
        }
        let config = self.options.mpf.unwrap_or_default();
        crate::mpf_set(&self.filters, self.options.dir.as_deref(), config).map_err(|bad| {
            SplitError::Programs(
                bad.into_iter()
                    .map(|b| (self.filters[b.index].clone(), b.why.to_string()))
                    .collect(),
            )
        })
    }

    /// A classifier for one run over a capture written in this byte order.
    pub fn classifier(&self, big_endian: bool) -> Classify<'_> {
        Classify {
            splitter: self,
            big_endian,
            last: None,
            scratch: MergingScratch::default(),
            ids: Vec::new(),
        }
    }
}

/// One run's classifier: the set's merged filters with this run's memory.
pub struct Classify<'a> {
    splitter: &'a Splitter,
    big_endian: bool,
    last: Option<(u16, Arc<Merging>)>,
    scratch: MergingScratch,
    ids: Vec<u32>,
}

impl Classify<'_> {
    /// The filters accepting a packet, in set order (with first match: the
    /// first of them alone).
    pub fn classify(&mut self, pkt: &sluice_capture::Packet<'_>) -> Result<&[u32], SplitError> {
        let merged = match &self.last {
            Some((lt, m)) if *lt == pkt.linktype => m,
            _ => {
                let m = self.splitter.merged(pkt.linktype, self.big_endian)?;
                &self.last.insert((pkt.linktype, m)).1
            }
        };
        self.ids.clear();
        if self.splitter.options.first_match {
            self.ids
                .extend(merged.classify_first(pkt.data, pkt.wirelen, &mut self.scratch));
        } else {
            merged.classify_sorted(pkt.data, pkt.wirelen, &mut self.scratch, &mut self.ids);
        }
        Ok(&self.ids)
    }
}
