//! `bpf_filter` and `pcap_offline_filter` at native speed: a program is
//! verified, lifted and compiled to sluice's native code once, and the
//! code is kept by the program's instructions, so a caller that passes
//! the same `bpf_insn` array for every packet (libtrace does, once per
//! packet and filter) pays the compile once.
//!
//! The rule: the verdict is the one the instructions give, whatever
//! happened to the array since. Each thread remembers the last few
//! arrays it was given (by address) with a copy of their instructions,
//! and compares the copy with the array on every call (a few words:
//! cheaper than interpreting); a program changed in place is looked up
//! again, by its instructions, in a cache shared by all threads. A
//! program sluice cannot compile (one the verifier refuses but libpcap's
//! interpreter runs) is run by sluice's interpreter, as before.
//!
//! `bpf_filter` is not told the program's length: the instructions it
//! may read are those reachable from the first. Jumps go forward only,
//! so whether an instruction is reachable depends on the ones before it:
//! comparing the remembered copy in order, only at instructions that
//! were reachable in it, reads only instructions the program now given
//! can reach too.

use crate::types::bpf_insn;
use sluice_bpf::Insn;
use sluice_filter::{Program, Runner};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How a program is run.
#[derive(Clone)]
enum Code {
    /// sluice's native code (or its interpreter where there is none).
    Compiled(Arc<Program>),
    /// Instructions the verifier refuses, run by the interpreter as given.
    Interpreted(Arc<[Insn]>),
}

impl Code {
    #[inline]
    fn run(&self, data: &[u8], wirelen: u32) -> u32 {
        match self {
            Code::Compiled(p) => p.run_with(Runner::host_default(), data, wirelen),
            Code::Interpreted(i) => sluice_bpf::run(i, data, wirelen),
        }
    }
}

/// Programs compiled so far, by instructions (bounded: emptied when full).
static SHARED: Mutex<Option<HashMap<Vec<Insn>, Code>>> = Mutex::new(None);
const SHARED_MAX: usize = 1024;

/// The code for these instructions, compiled on first sight.
fn code_for(insns: Vec<Insn>) -> Code {
    let mut shared = crate::handle::lock(&SHARED);
    let map = shared.get_or_insert_with(HashMap::new);
    if let Some(c) = map.get(&insns) {
        return c.clone();
    }
    let code = match Program::from_bpf(insns.clone()) {
        Ok(p) => Code::Compiled(Arc::new(p)),
        Err(_) => Code::Interpreted(insns.clone().into()),
    };
    if map.len() >= SHARED_MAX {
        map.clear();
    }
    map.insert(insns, code.clone());
    code
}

/// One array a thread was given: where, its instructions as 64-bit
/// words, and which of them are reachable (`None`: all).
struct Seen {
    at: usize,
    /// Given with its length (`pcap_offline_filter`), or not.
    sized: bool,
    words: Vec<u64>,
    reachable: Option<Vec<u32>>,
    code: Code,
}

/// How many arrays each thread remembers (libtrace's tracestats runs
/// three filters by turns).
const PER_THREAD: usize = 8;

thread_local! {
    static SEEN: RefCell<Vec<Seen>> = const { RefCell::new(Vec::new()) };
}

#[inline]
fn word(i: &bpf_insn) -> u64 {
    u64::from(i.code) | u64::from(i.jt) << 16 | u64::from(i.jf) << 24 | u64::from(i.k) << 32
}

/// Whether the array at `pc` still holds `s`'s instructions.
///
/// # Safety
/// `pc` is a program an interpreter may run (its reachable instructions
/// are readable).
#[inline]
unsafe fn still(s: &Seen, pc: *const bpf_insn) -> bool {
    match &s.reachable {
        None => s.words.iter().enumerate().all(|(i, w)| {
            // SAFETY: every index of the copy was reachable, and the
            // instructions before it are unchanged (see the module doc).
            *w == word(unsafe { &*pc.add(i) })
        }),
        Some(r) => r.iter().all(|&i| {
            // SAFETY: as above, for the reachable indexes.
            s.words[i as usize] == word(unsafe { &*pc.add(i as usize) })
        }),
    }
}

/// The instructions a program starting at `pc` can reach (with their
/// indexes when some in between cannot be reached). The walk stops at
/// returns and at libpcap's largest program.
///
/// # Safety
/// As [`still`].
unsafe fn reachable(pc: *const bpf_insn) -> (Vec<Insn>, Option<Vec<u32>>) {
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
    let holes = seen[..end].iter().any(|s| !s);
    let insns = (0..end)
        .map(|i| {
            if !seen[i] {
                // Never read: a return stands in for it.
                return Insn {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: 0,
                };
            }
            // SAFETY: reached above.
            let r = unsafe { *pc.add(i) };
            Insn {
                code: r.code,
                jt: r.jt,
                jf: r.jf,
                k: r.k,
            }
        })
        .collect();
    let idx = holes.then(|| (0..end as u32).filter(|&i| seen[i as usize]).collect());
    (insns, idx)
}

fn words_of(insns: &[Insn]) -> Vec<u64> {
    insns
        .iter()
        .map(|i| {
            word(&bpf_insn {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
        })
        .collect()
}

/// Remembers `s` as this thread's newest array.
fn remember(seen: &mut Vec<Seen>, s: Seen) {
    if seen.len() >= PER_THREAD {
        seen.pop();
    }
    seen.insert(0, s);
}

/// `bpf_filter`'s verdict: the program at `pc` (length unknown) on
/// `data`, a packet `wirelen` long.
///
/// # Safety
/// `pc` is a program an interpreter may run.
pub(crate) unsafe fn filter_unsized(pc: *const bpf_insn, data: &[u8], wirelen: u32) -> u32 {
    let at = pc as usize;
    // The fast path: an array this thread was given before, unchanged,
    // run in place (the native code calls nothing back).
    let hit = SEEN.with(|seen| {
        let seen = seen.borrow();
        seen.iter()
            // SAFETY: as documented.
            .find(|s| s.at == at && !s.sized && unsafe { still(s, pc) })
            .map(|s| s.code.run(data, wirelen))
    });
    if let Some(v) = hit {
        return v;
    }
    // SAFETY: as documented.
    let (insns, reach) = unsafe { reachable(pc) };
    let words = words_of(&insns);
    let code = code_for(insns);
    let v = code.run(data, wirelen);
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        seen.retain(|s| s.at != at || s.sized);
        remember(
            &mut seen,
            Seen {
                at,
                sized: false,
                words,
                reachable: reach,
                code,
            },
        );
    });
    v
}

/// `pcap_offline_filter`'s verdict: the `insns.len()` instructions at
/// `insns` on `data`; `None` for a program the verifier refuses.
pub(crate) fn filter_sized(insns: &[bpf_insn], data: &[u8], wirelen: u32) -> Option<u32> {
    let at = insns.as_ptr() as usize;
    let hit = SEEN.with(|seen| {
        let seen = seen.borrow();
        seen.iter()
            .find(|s| {
                s.at == at
                    && s.sized
                    && s.words.len() == insns.len()
                    && s.words.iter().zip(insns).all(|(w, i)| *w == word(i))
            })
            .map(|s| s.code.run(data, wirelen))
    });
    if hit.is_some() {
        return hit;
    }
    let prog: Vec<Insn> = insns
        .iter()
        .map(|r| Insn {
            code: r.code,
            jt: r.jt,
            jf: r.jf,
            k: r.k,
        })
        .collect();
    if sluice_bpf::Verifier::userland().verify(&prog).is_err() {
        return None;
    }
    let words = words_of(&prog);
    let code = code_for(prog);
    let v = code.run(data, wirelen);
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        seen.retain(|s| s.at != at || !s.sized);
        remember(
            &mut seen,
            Seen {
                at,
                sized: true,
                words,
                reachable: None,
                code,
            },
        );
    });
    Some(v)
}
