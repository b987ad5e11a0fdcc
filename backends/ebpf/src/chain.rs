//! A chain of eBPF programs in the kernel, as the groups' chain
//! ([`crate::MultiFilter`]) and the decision tree's ([`crate::TreeFilter`])
//! load them: program `k` ends with a tail call to program `k + 1`
//! through a `BPF_MAP_TYPE_PROG_ARRAY`, the first one is what runs (a
//! test run, a socket's filter, an interface's XDP program); and the
//! per-CPU counters both keep.
//!
//! Rule: everything is an owned descriptor, never pinned. The programs
//! and the array refer to each other; the kernel empties the array when
//! its last descriptor closes, and then frees them all.

use crate::multi::{map_err, COUNTER, MAP_PROG_ARRAY, MAX_PROGRAMS};
use crate::{load_program, sys, test_run, test_run_xdp, Error, Insn, Mode};
use std::os::fd::{AsRawFd, OwnedFd};

/// The programs of a chain, loaded, and its program array.
#[derive(Debug)]
pub(crate) struct Chain {
    progs: Vec<OwnedFd>,
    insns: Vec<usize>,
    /// Held for the chain: closing it empties it.
    array: OwnedFd,
    mode: Mode,
}

impl Chain {
    /// A chain with its program array and no program yet (its programs'
    /// tail calls name the array, so it exists before they are emitted).
    pub(crate) fn new(mode: Mode) -> Result<Chain, Error> {
        let array = sys::map_create(MAP_PROG_ARRAY, 4, 4, MAX_PROGRAMS as u32, "sluice_chain")
            .map_err(map_err("creating the program chain"))?;
        Ok(Chain {
            progs: Vec::new(),
            insns: Vec::new(),
            array,
            mode,
        })
    }

    /// Verify and load `programs`, program `k` at entry `k` of the array.
    pub(crate) fn load(&mut self, programs: &[Vec<Insn>]) -> Result<(), Error> {
        for (k, insns) in programs.iter().enumerate() {
            let fd = load_program(insns, self.mode)?;
            if k > 0 {
                sys::map_update(
                    &self.array,
                    &(k as u32).to_ne_bytes(),
                    &(fd.as_raw_fd() as u32).to_ne_bytes(),
                )
                .map_err(map_err("chaining a program"))?;
            }
            self.progs.push(fd);
            self.insns.push(insns.len());
        }
        Ok(())
    }

    /// The programs' type.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// The program array.
    pub(crate) fn array(&self) -> &OwnedFd {
        &self.array
    }

    /// Run a packet `repeat` times by the kernel's test run: (the
    /// result, the mean ns per run).
    pub(crate) fn bench(&self, pkt: &[u8], wirelen: u32, repeat: u32) -> Result<(u32, u32), Error> {
        match self.mode {
            Mode::TestRun => test_run(&self.progs[0], pkt, wirelen, repeat),
            // The frame is whole: its length is the wire length.
            Mode::Xdp => test_run_xdp(&self.progs[0], pkt, repeat),
            Mode::Socket => panic!("a socket filter chain runs only on a socket"),
        }
    }

    /// Attach the chain ([`Mode::Xdp`]) to `iface` through a link.
    pub(crate) fn attach_xdp(&self, iface: &str) -> Result<crate::XdpLink, Error> {
        assert_eq!(
            self.mode,
            Mode::Xdp,
            "only XDP programs attach to an interface"
        );
        crate::XdpLink::attach_fd(&self.progs[0], iface)
    }

    /// The first program.
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.progs[0]
    }

    /// Instructions of each program.
    pub(crate) fn instructions(&self) -> &[usize] {
        &self.insns
    }

    /// The kernel's ids of the programs, and of the array.
    pub(crate) fn kernel_ids(&self) -> Result<(Vec<u32>, u32), Error> {
        let id = |fd: &OwnedFd| sys::object_id(fd).map_err(map_err("reading an object's id"));
        let progs = self.progs.iter().map(id).collect::<Result<_, _>>()?;
        Ok((progs, id(&self.array)?))
    }

    /// The first program's run-time statistics: (total ns, runs).
    pub(crate) fn run_stats(&self) -> Result<(u64, u64), Error> {
        sys::run_stats(&self.progs[0]).map_err(map_err("reading the program's statistics"))
    }
}

/// Entry `key` of a per-CPU counter map (`{count, seen}` per CPU): the
/// count summed over `cpus` CPUs.
pub(crate) fn count_of(counters: &OwnedFd, key: u32, cpus: usize) -> Result<u64, Error> {
    let mut buf = vec![0u8; COUNTER * cpus];
    sys::map_lookup(counters, &key.to_ne_bytes(), &mut buf)
        .map_err(map_err("reading a counter"))?;
    Ok(buf
        .chunks_exact(COUNTER)
        .map(|c| u64::from_ne_bytes(c[..8].try_into().expect("8 bytes")))
        .sum())
}
