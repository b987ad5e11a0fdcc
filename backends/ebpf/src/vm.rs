//! A user-space interpreter of the programs this crate emits, for
//! counting: it runs a loaded test-run chain on a packet as the kernel's
//! `BPF_PROG_TEST_RUN` does and counts the eBPF instructions it executes
//! (the kernel keeps no such count, and this machine has no hardware
//! counters to read the JIT's).
//!
//! Rule: it knows only what sluice's emitters use — the ALU and jump
//! classes, memory loads and stores, `ld_imm64` of a map or a function,
//! and the helpers `map_lookup_elem`, `tail_call`, `skb_load_bytes` and
//! `bpf_loop` — on memory it models: the stack of each frame, the packet,
//! the `__sk_buff` fields the emitters read, and the maps (arrays read
//! from the kernel's as they are touched; per-CPU arrays as one CPU's).
//! A pointer is a region and an offset, so an access out of its region
//! is an error, never a read of the wrong memory. Anything else is an
//! error, not a guess.

use crate::insn::{op, Insn};
use crate::{sys, Error};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

/// A map as the interpreter sees it.
pub(crate) enum Map<'a> {
    /// An array (or one CPU of a per-CPU array): `entries` of `value`
    /// bytes, read from `fd` when first touched (`None`: zeros).
    Array {
        value: usize,
        entries: u32,
        fd: Option<&'a OwnedFd>,
    },
    /// A program array: entry `k` is program `k` of the chain.
    Programs(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Region {
    Stack(usize),
    Packet,
    Ctx,
    Value(i32, u32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    S(u64),
    P(Region, i64),
    Map(i32),
    Func(usize),
}

/// The interpreter of one chain: its programs and maps.
pub(crate) struct Vm<'a> {
    progs: &'a [Vec<Insn>],
    maps: HashMap<i32, Map<'a>>,
    values: HashMap<(i32, u32), Vec<u8>>,
    /// Pointers stored in memory, by where they were stored.
    spilled: HashMap<(Region, i64), V>,
    frames: Vec<Vec<u8>>,
    /// A packet or context access's bytes (read-only regions).
    scratch: Vec<u8>,
    insns: u64,
}

const STACK: usize = 512;
const CTX: usize = 84;
const LOOP_MAX: u64 = 1 << 23;

fn bad(what: impl Into<String>) -> Error {
    Error::Unsupported(format!("counting interpreter: {}", what.into()))
}

impl<'a> Vm<'a> {
    /// A chain of `progs` (the first runs first) with its maps by
    /// descriptor.
    pub(crate) fn new(progs: &'a [Vec<Insn>], maps: Vec<(&'a OwnedFd, Map<'a>)>) -> Vm<'a> {
        Vm {
            progs,
            maps: maps
                .into_iter()
                .map(|(fd, m)| (fd.as_raw_fd(), m))
                .collect(),
            values: HashMap::new(),
            spilled: HashMap::new(),
            frames: Vec::new(),
            scratch: Vec::new(),
            insns: 0,
        }
    }

    /// Run packet `pkt` (as the test run pads it: `data`) with `cb[0]`
    /// its length and `cb[1]` `wirelen`: the program's return value and
    /// the instructions executed.
    pub(crate) fn run(&mut self, data: &[u8], len: u32, wirelen: u32) -> Result<(u64, u64), Error> {
        let mut ctx = [0u8; CTX];
        ctx[0..4].copy_from_slice(&(data.len() as u32).to_ne_bytes());
        ctx[48..52].copy_from_slice(&len.to_ne_bytes());
        ctx[52..56].copy_from_slice(&wirelen.to_ne_bytes());
        if data.len() >= 14 {
            ctx[16..18].copy_from_slice(&[data[12], data[13]]);
        }
        self.insns = 0;
        self.spilled.clear();
        self.frames.clear();
        let mut prog = 0;
        loop {
            match self.call(prog, 0, [V::P(Region::Ctx, 0), V::S(0)], data, &ctx)? {
                Exit::Return(r) => return Ok((r, self.insns)),
                Exit::Tail(k) => prog = k,
            }
        }
    }

    /// Run program `prog` from `pc` in a new frame with r1, r2 given.
    fn call(
        &mut self,
        prog: usize,
        pc: usize,
        args: [V; 2],
        data: &[u8],
        ctx: &[u8],
    ) -> Result<Exit, Error> {
        let code = self.progs.get(prog).ok_or_else(|| bad("no such program"))?;
        let frame = self.frames.len();
        self.frames.push(vec![0u8; STACK]);
        let mut r = [V::S(0); 11];
        r[1] = args[0];
        r[2] = args[1];
        r[10] = V::P(Region::Stack(frame), STACK as i64);
        let mut pc = pc;
        loop {
            let i = *code
                .get(pc)
                .ok_or_else(|| bad(format!("pc {pc} past the end")))?;
            self.insns += 1;
            if self.insns > LOOP_MAX {
                return Err(bad("too many instructions"));
            }
            pc += 1;
            let class = i.code & 0x07;
            let (d, s) = (i.dst as usize, i.src as usize);
            match class {
                0x04 | 0x07 => {
                    let wide = class == 0x07;
                    let o = i.code & 0xf0;
                    let src = if i.code & op::X != 0 {
                        r[s]
                    } else {
                        V::S(i.imm as i64 as u64)
                    };
                    r[d] = alu(o, r[d], src, wide, i)?;
                }
                0x05 | 0x06 => {
                    let o = i.code & 0xf0;
                    match o {
                        op::EXIT => {
                            self.frames.pop();
                            return Ok(Exit::Return(scalar(r[0])?));
                        }
                        op::CALL => {
                            let v = self.helper(i.imm, &mut r, prog, data, ctx)?;
                            if let Some(k) = v {
                                self.frames.pop();
                                return Ok(Exit::Tail(k));
                            }
                        }
                        op::JA => {
                            let off = if class == 0x06 {
                                i.imm as i64
                            } else {
                                i.off as i64
                            };
                            pc = (pc as i64 + off) as usize;
                        }
                        op::JCOND => {}
                        _ => {
                            let src = if i.code & op::X != 0 {
                                r[s]
                            } else {
                                V::S(i.imm as i64 as u64)
                            };
                            if jump(o, r[d], src, class == 0x06)? {
                                pc = (pc as i64 + i.off as i64) as usize;
                            }
                        }
                    }
                }
                0x00 => {
                    // ld_imm64: a constant, a map, or a function.
                    let next = *code.get(pc).ok_or_else(|| bad("ld_imm64 cut"))?;
                    pc += 1;
                    r[d] = match i.src {
                        0 => V::S((i.imm as u32 as u64) | ((next.imm as u32 as u64) << 32)),
                        1 => V::Map(i.imm),
                        4 => V::Func((pc as i64 - 1 + i.imm as i64) as usize),
                        x => return Err(bad(format!("ld_imm64 source {x}"))),
                    };
                }
                0x01 => {
                    let size = width(i.code);
                    r[d] = self.load(r[s], i.off as i64, size, data, ctx)?;
                }
                0x02 | 0x03 => {
                    let size = width(i.code);
                    let v = if class == 0x03 {
                        r[s]
                    } else {
                        V::S(i.imm as i64 as u64)
                    };
                    self.store(r[d], i.off as i64, size, v)?;
                }
                _ => return Err(bad(format!("class {class:#x}"))),
            }
        }
    }

    /// A helper call: its result in r0 (r1-r5 then lost); `Some(k)` for
    /// a tail call taken to program `k`.
    fn helper(
        &mut self,
        id: i32,
        r: &mut [V; 11],
        prog: usize,
        data: &[u8],
        ctx: &[u8],
    ) -> Result<Option<usize>, Error> {
        r[0] = match id {
            1 => {
                let V::Map(fd) = r[1] else {
                    return Err(bad("lookup without a map"));
                };
                let key = self.load(r[2], 0, 4, data, ctx)?;
                let key = scalar(key)? as u32;
                match self.maps.get(&fd) {
                    Some(Map::Array { entries, .. }) if key < *entries => {
                        V::P(Region::Value(fd, key), 0)
                    }
                    Some(Map::Array { .. }) => V::S(0),
                    _ => return Err(bad("lookup in an unknown map")),
                }
            }
            12 => {
                let V::Map(fd) = r[2] else {
                    return Err(bad("tail call without a map"));
                };
                let k = scalar(r[3])? as usize;
                match self.maps.get(&fd) {
                    Some(Map::Programs(n)) if k < *n => return Ok(Some(k)),
                    Some(Map::Programs(_)) => V::S(u64::MAX),
                    _ => return Err(bad("tail call through an unknown map")),
                }
            }
            26 => {
                let off = scalar(r[2])? as usize;
                let len = scalar(r[4])? as usize;
                match data.get(off..off + len) {
                    Some(b) => {
                        for (k, byte) in b.iter().enumerate() {
                            self.store(r[3], k as i64, 1, V::S(u64::from(*byte)))?;
                        }
                        V::S(0)
                    }
                    None => V::S((-14i64) as u64),
                }
            }
            181 => {
                let n = scalar(r[1])?;
                let V::Func(pc) = r[2] else {
                    return Err(bad("bpf_loop without a function"));
                };
                let arg = r[3];
                let mut done = 0;
                for k in 0..n {
                    done += 1;
                    let Exit::Return(ret) = self.call(prog, pc, [V::S(k), arg], data, ctx)? else {
                        return Err(bad("a tail call in a callback"));
                    };
                    if ret == 1 {
                        break;
                    }
                }
                V::S(done)
            }
            x => return Err(bad(format!("helper {x}"))),
        };
        for reg in &mut r[1..=5] {
            *reg = V::S(0);
        }
        Ok(None)
    }

    /// The region's bytes for an access of `size` at `off`.
    fn bytes(
        &mut self,
        reg: Region,
        off: i64,
        size: usize,
        data: &[u8],
        ctx: &[u8],
    ) -> Result<&mut [u8], Error> {
        let oob = || bad(format!("{size} bytes at {off} of {reg:?}"));
        let off = usize::try_from(off).map_err(|_| oob())?;
        let buf: &mut [u8] = match reg {
            Region::Stack(f) => self.frames.get_mut(f).ok_or_else(oob)?,
            Region::Value(fd, k) => {
                if !self.values.contains_key(&(fd, k)) {
                    let Some(Map::Array {
                        value, fd: from, ..
                    }) = self.maps.get(&fd)
                    else {
                        return Err(oob());
                    };
                    let mut v = vec![0u8; *value];
                    if let Some(from) = from {
                        sys::map_lookup(from, &k.to_ne_bytes(), &mut v).map_err(Error::Run)?;
                    }
                    self.values.insert((fd, k), v);
                }
                self.values.get_mut(&(fd, k)).expect("just put")
            }
            // Read-only: copied out for the caller (writes are refused).
            Region::Packet => {
                self.scratch = data.get(off..off + size).ok_or_else(oob)?.to_vec();
                return Ok(&mut self.scratch[..]);
            }
            Region::Ctx => {
                self.scratch = ctx.get(off..off + size).ok_or_else(oob)?.to_vec();
                return Ok(&mut self.scratch[..]);
            }
        };
        buf.get_mut(off..off + size).ok_or_else(oob)
    }

    fn load(&mut self, at: V, off: i64, size: usize, data: &[u8], ctx: &[u8]) -> Result<V, Error> {
        let V::P(reg, base) = at else {
            return Err(bad(format!("load through {at:?}")));
        };
        let off = base + off;
        if size == 8 {
            if let Some(v) = self.spilled.get(&(reg, off)) {
                return Ok(*v);
            }
        }
        if reg == Region::Ctx {
            // The frame's bounds, as pointers.
            match (off, size) {
                (76, 4) => return Ok(V::P(Region::Packet, 0)),
                (80, 4) => return Ok(V::P(Region::Packet, data.len() as i64)),
                _ => {}
            }
        }
        let b = self.bytes(reg, off, size, data, ctx)?;
        let mut w = [0u8; 8];
        w[..size].copy_from_slice(b);
        Ok(V::S(u64::from_le_bytes(w)))
    }

    fn store(&mut self, at: V, off: i64, size: usize, v: V) -> Result<(), Error> {
        let V::P(reg, base) = at else {
            return Err(bad(format!("store through {at:?}")));
        };
        if matches!(reg, Region::Packet | Region::Ctx) {
            return Err(bad("a store to the packet or its context"));
        }
        let off = base + off;
        self.spilled
            .retain(|(r, o), _| *r != reg || *o + 8 <= off || off + size as i64 <= *o);
        let x = match v {
            V::S(x) => x,
            other if size == 8 => {
                self.spilled.insert((reg, off), other);
                0
            }
            other => return Err(bad(format!("a part of {other:?} stored"))),
        };
        let b = self.bytes(reg, off, size, &[], &[])?;
        b.copy_from_slice(&x.to_le_bytes()[..size]);
        Ok(())
    }
}

/// How a program ended.
enum Exit {
    Return(u64),
    Tail(usize),
}

fn scalar(v: V) -> Result<u64, Error> {
    match v {
        V::S(x) => Ok(x),
        other => Err(bad(format!("{other:?} where a number was wanted"))),
    }
}

fn width(code: u8) -> usize {
    match code & 0x18 {
        op::B => 1,
        op::H => 2,
        op::W => 4,
        _ => 8,
    }
}

/// One ALU instruction; pointers move by scalars, two pointers into one
/// region subtract to a scalar.
fn alu(o: u8, a: V, b: V, wide: bool, i: Insn) -> Result<V, Error> {
    if o == op::MOV && wide {
        return Ok(b);
    }
    match (a, b) {
        (V::P(r, x), V::S(y)) if wide && (o == op::ADD || o == op::SUB) => {
            let y = y as i64;
            return Ok(V::P(r, if o == op::ADD { x + y } else { x - y }));
        }
        (V::S(x), V::P(r, y)) if wide && o == op::ADD => return Ok(V::P(r, x as i64 + y)),
        (V::P(r, x), V::P(q, y)) if wide && o == op::SUB && r == q => {
            return Ok(V::S((x - y) as u64))
        }
        _ => {}
    }
    let (x, y) = (scalar_or(a, o)?, scalar(b)?);
    let (x, y) = if wide {
        (x, y)
    } else {
        (x as u32 as u64, y as u32 as u64)
    };
    let sh = if wide { 63 } else { 31 };
    let v = match o {
        op::ADD => x.wrapping_add(y),
        op::SUB => x.wrapping_sub(y),
        op::MUL => x.wrapping_mul(y),
        op::DIV => x.checked_div(y).unwrap_or(0),
        op::MOD => x.checked_rem(y).unwrap_or(x),
        op::OR => x | y,
        op::AND => x & y,
        op::XOR => x ^ y,
        op::LSH => x << (y & sh),
        op::RSH => x >> (y & sh),
        op::MOV => y,
        op::NEG => x.wrapping_neg(),
        op::END => {
            // To big-endian of `imm` bits (from little-endian here).
            let x = match i.imm {
                16 => (x as u16).to_be() as u64,
                32 => (x as u32).to_be() as u64,
                _ => x.to_be(),
            };
            return Ok(V::S(x));
        }
        _ => return Err(bad(format!("ALU operation {o:#x}"))),
    };
    Ok(V::S(if wide { v } else { v as u32 as u64 }))
}

/// A register as a number for `o` (a move ignores what was there).
fn scalar_or(a: V, o: u8) -> Result<u64, Error> {
    match (a, o) {
        (_, op::MOV) => Ok(0),
        (V::S(x), _) => Ok(x),
        (other, _) => Err(bad(format!("ALU {o:#x} on {other:?}"))),
    }
}

/// A conditional jump's test; pointers compare with pointers of their
/// region (bounds checks) and with zero (a lookup's result).
fn jump(o: u8, a: V, b: V, narrow: bool) -> Result<bool, Error> {
    let (x, y) = match (a, b) {
        (V::S(x), V::S(y)) => (x, y),
        (V::P(r, x), V::P(q, y)) if r == q => (x as u64, y as u64),
        (V::P(..), V::S(0)) => (1, 0),
        (a, b) => return Err(bad(format!("compare {a:?} with {b:?}"))),
    };
    let (x, y) = if narrow {
        (x as u32 as u64, y as u32 as u64)
    } else {
        (x, y)
    };
    let (sx, sy) = if narrow {
        (x as u32 as i32 as i64, y as u32 as i32 as i64)
    } else {
        (x as i64, y as i64)
    };
    Ok(match o {
        op::JEQ => x == y,
        op::JNE => x != y,
        op::JGT => x > y,
        op::JGE => x >= y,
        op::JLT => x < y,
        op::JLE => x <= y,
        op::JSET => x & y != 0,
        0x60 => sx > sy,
        0x70 => sx >= sy,
        0xc0 => sx < sy,
        0xd0 => sx <= sy,
        _ => return Err(bad(format!("jump {o:#x}"))),
    })
}
