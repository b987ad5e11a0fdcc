//! A filter set merged into one classifier for one link type: machine
//! code (the default) or walked in Rust.

use crate::{compile::compile_each, FilterLine};
use sluice_classifier::merged::{Compiled, Merged};
use sluice_classifier::tree::DecisionTree;
use sluice_classifier::{sort_ids, Auto, Engine};
use sluice_filter::ProgramBuilder;
use sluice_native::NativeAuto;
use std::sync::Arc;

/// Every filter of a set compiled for merging with `builder`'s link type
/// and settings (on every core), in set order; or every filter that does
/// not compile.
///
/// ```
/// use sluice_filter::{LinkType, Program};
/// let set = sluice_split::filter_pairs([("a", "tcp"), ("b", "udp prt 1")]).unwrap();
/// let bad = sluice_split::compile_set(&set, &Program::builder(LinkType::EN10MB)).unwrap_err();
/// assert_eq!(bad[0].index, 1);
/// ```
pub fn compile_set(
    filters: &[FilterLine],
    builder: &ProgramBuilder,
) -> Result<Vec<Compiled>, Vec<Rejected>> {
    let mut compiled = Vec::with_capacity(filters.len());
    each_compiled(filters, builder, |_, c| compiled.push(c))?;
    Ok(compiled)
}

/// Each filter of the set compiled (on every core) and handed to `take`
/// on this thread, in set order, as soon as it and those before it are
/// compiled; from the first that does not compile on, the rest are only
/// checked, and every one that does not compile is reported.
fn each_compiled(
    filters: &[FilterLine],
    builder: &ProgramBuilder,
    mut take: impl FnMut(usize, Compiled),
) -> Result<(), Vec<Rejected>> {
    let texts: Vec<&str> = filters.iter().map(|f| f.expression.as_str()).collect();
    let mut rejected = Vec::new();
    compile_each(builder, &texts, |index, c| match c {
        Ok(c) if rejected.is_empty() => take(index, c),
        Ok(_) => {}
        Err(error) => rejected.push(Rejected { index, error }),
    });
    match rejected.is_empty() {
        true => Ok(()),
        false => Err(rejected),
    }
}

/// A filter of the set that does not compile: its position in the set
/// and why (the error keeps the column).
#[derive(Debug)]
pub struct Rejected {
    /// Position in the filter set, from 0.
    pub index: usize,
    /// The compile error.
    pub error: sluice_filter::Error,
}

/// The filters of a set merged for one link type: the default engine as
/// machine code, or walked in Rust.
///
/// ```
/// use sluice_filter::{LinkType, Program};
/// use sluice_split::{filter_pairs, Merging, MergingScratch};
/// let set = filter_pairs([("v4", "ip"), ("tcp", "tcp")]).unwrap();
/// let m = Merging::build(&set, &Program::builder(LinkType::EN10MB), true).unwrap();
/// let mut frame = [0u8; 60];
/// frame[12] = 8; // IPv4, protocol 0
/// let (mut s, mut ids) = (MergingScratch::default(), Vec::new());
/// m.classify(&frame, 60, &mut s, &mut ids);
/// assert_eq!(ids, vec![0]);
/// ```
pub enum Merging {
    /// Machine code (Cranelift).
    Native(NativeAuto),
    /// The same structure walked in Rust.
    Rust(Auto<Merged, DecisionTree>),
}

/// The priority of filter `index` of `n`: earlier filters get higher
/// ones, so the first-match winner is the first filter that matches.
fn priority(n: usize, index: usize) -> i32 {
    i32::try_from(n - index).unwrap_or(i32::MAX)
}

/// Per-reader memory of either engine.
#[derive(Default)]
pub struct MergingScratch {
    native: <NativeAuto as Engine>::Scratch,
    rust: <Auto<Merged, DecisionTree> as Engine>::Scratch,
    /// One bit per filter id, for [`sort_ids`].
    bits: Vec<u64>,
}

impl Merging {
    /// All filters merged with `builder`'s link type and settings
    /// (compiled on every core); earlier filters get higher priorities,
    /// so the first-match winner is the first filter that matches. Every
    /// filter that does not compile is reported.
    pub fn build(
        filters: &[FilterLine],
        builder: &ProgramBuilder,
        native: bool,
    ) -> Result<Merging, Vec<Rejected>> {
        // Each filter is inserted as soon as it and those before it are
        // compiled, while the other threads compile the rest.
        let mut merged = Merging::empty(native);
        each_compiled(filters, builder, |index, c| {
            merged.insert(index as u32, Arc::new(c), priority(filters.len(), index))
        })?;
        merged.update();
        Ok(merged)
    }

    /// Filters already compiled (in set order, as [`compile_set`] gives
    /// them, or read back from a shipped set) merged into one classifier.
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// use sluice_split::{compile_set, filter_pairs, Merging, MergingScratch};
    /// let set = filter_pairs([("all", "")]).unwrap();
    /// let m = Merging::from_compiled(compile_set(&set, &Program::builder(LinkType::EN10MB)).unwrap(), false);
    /// assert_eq!(m.classify_first(&[0; 60], 60, &mut MergingScratch::default()), Some(0));
    /// ```
    pub fn from_compiled(compiled: Vec<Compiled>, native: bool) -> Merging {
        let mut merged = Merging::empty(native);
        let n = compiled.len();
        for (index, c) in compiled.into_iter().enumerate() {
            merged.insert(index as u32, Arc::new(c), priority(n, index));
        }
        merged.update();
        merged
    }

    fn empty(native: bool) -> Merging {
        match native {
            true => Merging::Native(NativeAuto::empty()),
            false => Merging::Rust(Auto::empty()),
        }
    }

    /// Generates the machine code of what was inserted (nothing to do for
    /// the Rust walk).
    fn update(&mut self) {
        if let Merging::Native(m) = self {
            m.update();
        }
    }

    fn insert(&mut self, id: u32, c: Arc<Compiled>, priority: i32) {
        match self {
            Merging::Native(m) => m.insert(id, c, priority),
            Merging::Rust(m) => m.insert(id, c, priority),
        }
    }

    /// Every filter accepting the packet, into `out` (in the engine's
    /// order).
    pub fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut MergingScratch, out: &mut Vec<u32>) {
        match self {
            Merging::Native(m) => m.classify(pkt, wirelen, &mut s.native, out),
            Merging::Rust(m) => m.classify(pkt, wirelen, &mut s.rust, out),
        }
    }

    /// `out[i]` gets packet `i`'s filters (in the engine's order), the
    /// packets ahead prefetched and looked up in the flow cache as
    /// [`Merging::classify`] does.
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// use sluice_split::{filter_pairs, Merging, MergingScratch};
    /// let set = filter_pairs([("all", "len > 0")]).unwrap();
    /// let m = Merging::build(&set, &Program::builder(LinkType::EN10MB), true).unwrap();
    /// let mut out = vec![Vec::new(); 2];
    /// m.classify_batch(&[(&[0u8; 60][..], 60), (&[][..], 0)], &mut MergingScratch::default(), &mut out);
    /// assert_eq!(out, vec![vec![0], vec![]]);
    /// ```
    pub fn classify_batch(
        &self,
        pkts: &[(&[u8], u32)],
        s: &mut MergingScratch,
        out: &mut [Vec<u32>],
    ) {
        match self {
            Merging::Native(m) => m.classify_batch(pkts, &mut s.native, out),
            Merging::Rust(m) => m.classify_batch(pkts, &mut s.rust, out),
        }
    }

    /// Every filter accepting the packet, into `out` in increasing id
    /// (set) order.
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// use sluice_split::{filter_pairs, Merging, MergingScratch};
    /// let set = filter_pairs([("all", "len > 0"), ("v4", "ip")]).unwrap();
    /// let m = Merging::build(&set, &Program::builder(LinkType::EN10MB), true).unwrap();
    /// let mut frame = [0u8; 60];
    /// frame[12] = 8;
    /// let (mut s, mut ids) = (MergingScratch::default(), Vec::new());
    /// m.classify_sorted(&frame, 60, &mut s, &mut ids);
    /// assert_eq!(ids, vec![0, 1]);
    /// ```
    pub fn classify_sorted(
        &self,
        pkt: &[u8],
        wirelen: u32,
        s: &mut MergingScratch,
        out: &mut Vec<u32>,
    ) {
        self.classify(pkt, wirelen, s, out);
        sort_ids(out, &mut s.bits);
    }

    /// The first filter (in set order) accepting the packet.
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut MergingScratch) -> Option<u32> {
        match self {
            Merging::Native(m) => m.classify_first(pkt, wirelen, &mut s.native),
            Merging::Rust(m) => m.classify_first(pkt, wirelen, &mut s.rust),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter_pairs;
    use sluice_filter::{LinkType, Program};

    fn set(bad: &[usize]) -> Vec<FilterLine> {
        let pairs: Vec<(String, String)> = (0..300)
            .map(|i| {
                let e = match (bad.contains(&i), i % 3) {
                    (true, _) => format!("udp prt {i}"),
                    (_, 0) => format!("ether[{}] = {}", i % 60, i % 7),
                    (_, 1) => format!("ether[{}] > {} or tcp port {i}", i % 50, i % 200),
                    _ => format!("ip and not udp and len > {}", i % 90),
                };
                (format!("f{i}"), e)
            })
            .collect();
        filter_pairs(pairs).unwrap()
    }

    /// Inserted while the rest compile, the filters are the same
    /// classifier as inserted after all compiled; a set with bad filters
    /// reports each of them, wherever they fall among the threads' blocks.
    #[test]
    fn building_while_compiling_is_building_after() {
        let builder = Program::builder(LinkType::EN10MB);
        let filters = set(&[]);
        let compiled = compile_set(&filters, &builder).unwrap();
        for native in [false, true] {
            let streamed = Merging::build(&filters, &builder, native).unwrap();
            let after = Merging::from_compiled(compiled.clone(), native);
            // A scratch is one reader's, of one classifier.
            let (mut s, mut t) = (MergingScratch::default(), MergingScratch::default());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut matched = 0;
            for k in 0..400u32 {
                let mut frame = vec![0u8; 20 + (k as usize * 7) % 100];
                for (i, byte) in frame.iter_mut().enumerate() {
                    *byte = (k.wrapping_mul(2_654_435_761) >> (i % 24)) as u8 % 9;
                }
                if frame.len() > 23 && k % 2 == 0 {
                    frame[12..14].copy_from_slice(&[8, 0]);
                    frame[14] = 0x45;
                    frame[23] = 6;
                }
                let len = frame.len() as u32;
                streamed.classify_sorted(&frame, len, &mut s, &mut a);
                after.classify_sorted(&frame, len, &mut t, &mut b);
                assert_eq!(a, b, "frame {frame:02x?}");
                matched += a.len();
                let first = (
                    streamed.classify_first(&frame, len, &mut s),
                    after.classify_first(&frame, len, &mut t),
                );
                assert_eq!(first.0, first.1);
            }
            assert!(matched > 4_000, "{matched} matches");
        }
        let bad = [0, 7, 8, 9, 150, 299];
        let rejected = Merging::build(&set(&bad), &builder, true).err().unwrap();
        let at: Vec<usize> = rejected.iter().map(|r| r.index).collect();
        assert_eq!(at, bad);
    }
}
