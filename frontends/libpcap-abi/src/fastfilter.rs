//! `bpf_filter` and `pcap_offline_filter` at native speed: a program is
//! verified, lifted and compiled to sluice's native code once, and the
//! code is kept by the program's instructions, so a caller that passes
//! the same `bpf_insn` array for every packet (libtrace does, once per
//! packet and filter) pays the compile once.
//!
//! The rule: the verdict is the one the instructions give, whatever
//! happened to the array since. The arrays seen last are remembered by
//! address (a small table shared by all threads, without locks) with a
//! copy of their instructions, and the copy is compared with the array on
//! every call (a word per instruction: cheaper than interpreting); a program
//! changed in place is looked up again, by its instructions, in a map of
//! every program compiled. A program sluice cannot compile (one the
//! verifier refuses but libpcap's interpreter runs) is run by sluice's
//! interpreter. What is remembered is never freed (another thread may be
//! running it), so it is bounded: past [`PROGRAMS_MAX`] programs or
//! [`ENTRIES_MAX`] arrays, a new one is interpreted, as before.
//!
//! `bpf_filter` is not told the program's length: the instructions it
//! may read are those up to the last one reachable from the first. Jumps
//! go forward only, so once the instructions before index `i` are known
//! to be the remembered ones, every index their jumps reach is within
//! the array: the copy is compared in runs that never go past what the
//! instructions already compared can reach.

use crate::types::bpf_insn;
use sluice_bpf::Insn;
use sluice_filter::Program;
use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

/// How a program is run.
#[derive(Clone, Copy)]
enum Code {
    /// sluice's native code.
    Native(&'static sluice_native::NativeFilter),
    /// sluice's interpreter: instructions the verifier refuses (libpcap's
    /// interpreter runs them), or a program without native code.
    Interpreted(&'static [Insn]),
}

impl Code {
    #[inline(always)]
    fn run(self, data: &[u8], wirelen: u32) -> u32 {
        match self {
            Code::Native(n) => n.run(data, wirelen),
            Code::Interpreted(i) => sluice_bpf::run(i, data, wirelen),
        }
    }
}

/// At most this many programs are compiled and kept.
pub const PROGRAMS_MAX: usize = 1024;
/// At most this many arrays are remembered.
pub const ENTRIES_MAX: usize = 8192;

/// Every program compiled, by instructions.
static PROGRAMS: Mutex<Option<HashMap<Vec<Insn>, Code>>> = Mutex::new(None);

/// The code for these instructions, compiled on first sight; `None` past
/// [`PROGRAMS_MAX`].
fn code_for(insns: &[Insn]) -> Option<Code> {
    let mut programs = crate::handle::lock(&PROGRAMS);
    let map = programs.get_or_insert_with(HashMap::new);
    if let Some(c) = map.get(insns) {
        return Some(*c);
    }
    if map.len() >= PROGRAMS_MAX {
        return None;
    }
    let code = match Program::from_bpf(insns.to_vec()) {
        Ok(p) => {
            let p: &'static Program = Box::leak(Box::new(p));
            match p.native() {
                Some(n) => Code::Native(n),
                None => Code::Interpreted(p.bpf()),
            }
        }
        Err(_) => Code::Interpreted(Box::leak(insns.to_vec().into_boxed_slice())),
    };
    map.insert(insns.to_vec(), code);
    Some(code)
}

/// One array seen: where, whether its length was given, its bytes, and
/// where each run of the comparison ends (see the module doc).
struct Entry {
    at: usize,
    sized: bool,
    /// The instructions as they were, each read as one 64-bit word.
    words: Box<[u64]>,
    runs: Box<[u32]>,
    code: Code,
}

const SLOTS: usize = 256;
static TABLE: [AtomicPtr<Entry>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
static ENTRIES: AtomicUsize = AtomicUsize::new(0);

#[inline]
fn slot(at: usize, sized: bool) -> usize {
    let h = (at as u64 >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
    (h as usize ^ usize::from(sized)) % SLOTS
}

/// The remembered code for the array at `pc`, if it still holds the
/// instructions it held.
///
/// # Safety
/// `pc` is a program an interpreter may run (with `sized`: `len` bytes of
/// instructions are readable).
#[inline(always)]
unsafe fn remembered(pc: *const bpf_insn, sized: Option<usize>) -> Option<Code> {
    let at = pc as usize;
    let e = TABLE[slot(at, sized.is_some())].load(Ordering::Acquire);
    // SAFETY: entries are leaked, never freed.
    let e = unsafe { e.as_ref() }?;
    if e.at != at || e.sized != sized.is_some() {
        return None;
    }
    if let Some(len) = sized {
        if len != e.words.len() {
            return None;
        }
    }
    let mut from = 0usize;
    for &end in e.runs.iter() {
        let end = end as usize;
        if end == from + 1 {
            // SAFETY: as below.
            if unsafe { pc.add(from).cast::<u64>().read_unaligned() } != e.words[from] {
                return None;
            }
            from = end;
            continue;
        }
        // The whole run at once (no branch per word: vectorised).
        let differ = e.words[from..end]
            .iter()
            .enumerate()
            .fold(0u64, |acc, (i, want)| {
                // SAFETY: the run is within the array: the instructions
                // compared before it reach its end (module doc), or the
                // length was given. Instructions are 8 bytes, 4-aligned.
                let got = unsafe { pc.add(from + i).cast::<u64>().read_unaligned() };
                acc | (got ^ want)
            });
        if differ != 0 {
            return None;
        }
        from = end;
    }
    Some(e.code)
}

/// Remembers the array at `at` (`raw`, its instructions) with its code,
/// compared in `runs`, unless [`ENTRIES_MAX`] are remembered.
fn remember(at: usize, sized: bool, raw: &[bpf_insn], runs: Vec<u32>, code: Code) {
    if ENTRIES.fetch_add(1, Ordering::AcqRel) >= ENTRIES_MAX {
        ENTRIES.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let e = Box::leak(Box::new(Entry {
        at,
        sized,
        words: raw
            .iter()
            // SAFETY: an instruction is 8 plain bytes.
            .map(|r| unsafe { std::ptr::from_ref(r).cast::<u64>().read_unaligned() })
            .collect(),
        runs: runs.into_boxed_slice(),
        code,
    }));
    TABLE[slot(at, sized)].store(e, Ordering::Release);
}

/// Where the comparison's runs end: each run ends at the furthest index
/// the reachable instructions before it can reach, plus one.
fn runs(insns: &[Insn], reachable: &[bool]) -> Vec<u32> {
    let mut out = Vec::new();
    let (mut from, mut reach) = (0usize, 0usize);
    while from < insns.len() {
        let end = (reach + 1).min(insns.len());
        for (k, i) in insns.iter().enumerate().take(end).skip(from) {
            if !reachable[k] {
                continue;
            }
            let next = match i.code & 0x07 {
                0x06 => k,
                0x05 if i.code & 0xf0 == 0x00 => k + 1 + i.k as usize,
                0x05 => k + 1 + usize::from(i.jt.max(i.jf)),
                _ => k + 1,
            };
            reach = reach.max(next);
        }
        out.push(end as u32);
        if end == from {
            break;
        }
        from = end;
    }
    out
}

/// The instructions up to the last one a program starting at `pc` can
/// reach (stopping at libpcap's largest program), as read from memory,
/// unreachable ones in between too: they are within the array.
///
/// # Safety
/// As [`remembered`].
unsafe fn reachable(pc: *const bpf_insn) -> Vec<bpf_insn> {
    const MAX: usize = 1 << 16;
    let mut seen = vec![false; 64];
    let mut todo = vec![0usize];
    let mut end = 0;
    while let Some(i) = todo.pop() {
        if i >= MAX {
            continue;
        }
        if i >= seen.len() {
            seen.resize((i + 1).next_power_of_two().min(MAX), false);
        }
        if seen[i] {
            continue;
        }
        seen[i] = true;
        end = end.max(i + 1);
        // SAFETY: an interpreter running the program reads this one.
        let r = unsafe { *pc.add(i) };
        match r.code & 0x07 {
            0x06 => {}
            0x05 if r.code & 0xf0 == 0x00 => todo.push(i + 1 + r.k as usize),
            0x05 => {
                todo.push(i + 1 + r.jt as usize);
                todo.push(i + 1 + r.jf as usize);
            }
            _ => todo.push(i + 1),
        }
    }
    // SAFETY: indexes below the last reachable one are within the array.
    unsafe { std::slice::from_raw_parts(pc, end) }.to_vec()
}

/// Which instructions can run, starting from the first.
fn reachable_mask(insns: &[Insn]) -> Vec<bool> {
    let mut seen = vec![false; insns.len()];
    let mut todo = vec![0usize];
    while let Some(i) = todo.pop() {
        if i >= insns.len() || seen[i] {
            continue;
        }
        seen[i] = true;
        let r = insns[i];
        match r.code & 0x07 {
            0x06 => {}
            0x05 if r.code & 0xf0 == 0x00 => todo.push(i + 1 + r.k as usize),
            0x05 => {
                todo.push(i + 1 + r.jt as usize);
                todo.push(i + 1 + r.jf as usize);
            }
            _ => todo.push(i + 1),
        }
    }
    seen
}

fn insns_of(raw: &[bpf_insn]) -> Vec<Insn> {
    raw.iter()
        .map(|r| Insn {
            code: r.code,
            jt: r.jt,
            jf: r.jf,
            k: r.k,
        })
        .collect()
}

/// `bpf_filter`'s verdict: the program at `pc` (length unknown) on
/// `data`, a packet `wirelen` long.
///
/// # Safety
/// `pc` is a program an interpreter may run.
#[inline(always)]
pub(crate) unsafe fn filter_unsized(pc: *const bpf_insn, data: &[u8], wirelen: u32) -> u32 {
    // SAFETY: as documented.
    if let Some(code) = unsafe { remembered(pc, None) } {
        return code.run(data, wirelen);
    }
    // SAFETY: as documented.
    let raw = unsafe { reachable(pc) };
    let insns = insns_of(&raw);
    let mask = reachable_mask(&insns);
    // An unreachable instruction in between is never run: a return
    // stands in for it, so that the verifier judges what can run.
    let runnable: Vec<Insn> = insns
        .iter()
        .zip(&mask)
        .map(|(i, r)| {
            if *r {
                *i
            } else {
                Insn {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: 0,
                }
            }
        })
        .collect();
    match code_for(&runnable) {
        Some(code) => {
            remember(pc as usize, false, &raw, runs(&insns, &mask), code);
            code.run(data, wirelen)
        }
        None => sluice_bpf::run(&runnable, data, wirelen),
    }
}

/// `pcap_offline_filter`'s verdict: the `insns.len()` instructions at
/// `insns` on `data`; `None` for a program the verifier refuses.
#[inline(always)]
pub(crate) fn filter_sized(raw: &[bpf_insn], data: &[u8], wirelen: u32) -> Option<u32> {
    // SAFETY: the slice's instructions are readable.
    if let Some(code) = unsafe { remembered(raw.as_ptr(), Some(raw.len())) } {
        return Some(code.run(data, wirelen));
    }
    let insns = insns_of(raw);
    if sluice_bpf::Verifier::userland().verify(&insns).is_err() {
        return None;
    }
    match code_for(&insns) {
        Some(code) => {
            remember(
                raw.as_ptr() as usize,
                true,
                raw,
                vec![raw.len() as u32],
                code,
            );
            Some(code.run(data, wirelen))
        }
        None => Some(sluice_bpf::run(&insns, data, wirelen)),
    }
}
