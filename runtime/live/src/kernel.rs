//! The kernel pre-filter: a classic BPF program the kernel runs on every
//! packet before it reaches the ring, so rejected packets cost no copy.
//!
//! The rule: the kernel's program may accept more than the user's filter
//! (user space filters every packet again), never less. The kernel sees a
//! VLAN-tagged frame with its tag taken off, where the user's filter sees
//! it put back (as libpcap shows it); so on Ethernet a tagged frame is
//! judged by the program rewritten to read the tag from the kernel's
//! ancillary data ([`crate::retag`]), and on other links tagged frames
//! are let through (on cooked captures a double-tagged frame's cooked
//! protocol field, as the ring reports it, is not what the kernel's
//! program loads).
//!
//! A cooked capture's frames reach the kernel's program without their
//! cooked header (the socket is `SOCK_DGRAM`): loads past the header move
//! back by its length, loads of its protocol, packet type, interface and
//! hardware type become the kernel's ancillary loads of the same values,
//! and a program that reads anything else of the header, or the packet's
//! length (20 or 16 bytes shorter for the kernel), stays in user space.

use crate::interfaces::{ETHERNET, LINUX_SLL, LINUX_SLL2, RAW};
use sluice_bpf::op::*;
use sluice_bpf::Insn;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

/// The kernel's limit on a classic BPF program's length (`BPF_MAXINSNS`).
pub const MAX_INSNS: usize = 4096;

/// `SKF_AD_OFF`: where the kernel's ancillary loads start.
const AD: u32 = (-0x1000i32) as u32;
/// `SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT`: the ancillary load of "the
/// kernel took a VLAN tag off this frame".
const VLAN_TAG_PRESENT: u32 = AD + 48;
/// `SKF_AD_PROTOCOL`, `SKF_AD_PKTTYPE`, `SKF_AD_IFINDEX`, `SKF_AD_HATYPE`.
const PROTOCOL: u32 = AD;
const PKTTYPE: u32 = AD + 4;
const IFINDEX: u32 = AD + 8;
const HATYPE: u32 = AD + 28;

/// A cooked header field the kernel can load: offset, load size, and the
/// ancillary load that gives the same value.
type Field = (u32, u16, u32);

/// A cooked header's length and its fields the kernel can load.
fn cooked_layout(linktype: u16) -> Option<(u32, &'static [Field])> {
    match linktype {
        LINUX_SLL2 => Some((
            20,
            &[
                (0, BPF_H, PROTOCOL),
                (4, BPF_W, IFINDEX),
                (8, BPF_H, HATYPE),
                (10, BPF_B, PKTTYPE),
            ],
        )),
        LINUX_SLL => Some((
            16,
            &[
                (0, BPF_H, PKTTYPE),
                (2, BPF_H, HATYPE),
                (14, BPF_H, PROTOCOL),
            ],
        )),
        _ => None,
    }
}

/// `program` with its packet loads moved for the kernel's view of a cooked
/// frame (see the module documentation), or `None` if it reads what the
/// kernel cannot.
fn uncook(program: &[Insn], header: u32, fields: &[Field]) -> Option<Vec<Insn>> {
    program
        .iter()
        .map(|&i| {
            let class = i.code & 0x07;
            let mode = i.code & 0xe0;
            let size = i.code & 0x18;
            if class != BPF_LD && class != BPF_LDX {
                return Some(i);
            }
            match mode {
                BPF_LEN => None,
                BPF_ABS | BPF_IND | BPF_MSH => {
                    let mut i = i;
                    if i.k >= AD {
                        // Already an ancillary load.
                    } else if i.k >= header {
                        i.k -= header;
                    } else if mode == BPF_ABS {
                        let &(_, _, ad) = fields
                            .iter()
                            .find(|&&(at, sz, _)| at == i.k && sz == size)?;
                        i.k = ad;
                    } else {
                        return None;
                    }
                    Some(i)
                }
                _ => Some(i),
            }
        })
        .collect()
}

/// A kernel pre-filter ready to attach to a ring: classic BPF for
/// `SO_ATTACH_FILTER`, or a loaded eBPF socket filter for `SO_ATTACH_BPF`.
#[derive(Clone)]
pub struct KernelFilter {
    form: Form,
}

/// What a [`KernelFilter`] attaches.
#[derive(Clone)]
enum Form {
    Classic(Vec<libc::sock_filter>),
    /// A `BPF_PROG_TYPE_SOCKET_FILTER` program's descriptor (held until
    /// every ring has it; each socket then holds the program itself) and
    /// its number of instructions.
    Ebpf(Arc<dyn AsFd + Send + Sync>, usize),
}

impl std::fmt::Debug for KernelFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.form {
            Form::Classic(c) => write!(f, "KernelFilter({} instructions)", c.len()),
            Form::Ebpf(_, n) => write!(f, "KernelFilter(eBPF, {n} instructions)"),
        }
    }
}

impl KernelFilter {
    /// The kernel form of `program` for a capture of link type
    /// `linktype`, or `None` when it cannot be one (too long for the
    /// kernel, or reading what the kernel cannot see of a cooked frame).
    ///
    /// ```
    /// use sluice_bpf::{Insn, op::*};
    /// let accept = [Insn::stmt(BPF_RET | BPF_K, 262144)];
    /// let k = sluice_live::KernelFilter::new(&accept, 1).unwrap();
    /// assert_eq!(k.len(), 4); // the VLAN check, then the program
    /// // A cooked v2 frame's length is not the kernel's: stays in user space.
    /// let len = [Insn::stmt(BPF_LD | BPF_W | BPF_LEN, 0), Insn::stmt(BPF_RET | BPF_A, 0)];
    /// assert!(sluice_live::KernelFilter::new(&len, 276).is_none());
    /// ```
    pub fn new(program: &[Insn], linktype: u16) -> Option<KernelFilter> {
        Self::build(program, linktype, true)
    }

    /// The kernel form of `program` as libpcap installs it: run on the
    /// frame as the kernel sees it, a VLAN tag the kernel took off
    /// included (it is not in the frame), so the kernel's verdict is the
    /// final one. `None` as for [`new`](Self::new).
    ///
    /// ```
    /// use sluice_bpf::{Insn, op::*};
    /// let accept = [Insn::stmt(BPF_RET | BPF_K, 262144)];
    /// assert_eq!(sluice_live::KernelFilter::as_kernel_sees(&accept, 1).unwrap().len(), 1);
    /// ```
    pub fn as_kernel_sees(program: &[Insn], linktype: u16) -> Option<KernelFilter> {
        Self::build(program, linktype, false)
    }

    fn build(program: &[Insn], linktype: u16, pass_tagged: bool) -> Option<KernelFilter> {
        let mut code = Vec::with_capacity(program.len() + 3);
        let program = match cooked_layout(linktype) {
            Some((header, fields)) => uncook(program, header, fields)?,
            None if linktype == ETHERNET || linktype == RAW => program.to_vec(),
            None => return None,
        };
        // A frame whose tag the kernel took off: the kernel's view of it
        // is not user space's (libpcap puts the tag back into Ethernet and
        // cooked v1 frames; and with two tags, the cooked protocol field
        // the ring reports is not the one the kernel's program loads).
        if pass_tagged && linktype != RAW {
            // ldb vlan_present; jeq #0 -> program; then for a tagged
            // frame the program rewritten to read the tag where user
            // space sees it (Ethernet), or accept (user space decides).
            let tagged = (linktype == ETHERNET)
                .then(|| crate::retag::retagged(&program))
                .flatten()
                .filter(|r| r.len() <= usize::from(u8::MAX))
                .unwrap_or_else(|| vec![Insn::stmt(BPF_RET | BPF_K, 262144)]);
            code.push(Insn::stmt(BPF_LD | BPF_B | BPF_ABS, VLAN_TAG_PRESENT));
            code.push(Insn::jump(
                BPF_JMP | BPF_JEQ | BPF_K,
                0,
                tagged.len() as u8,
                0,
            ));
            code.extend(tagged);
        }
        code.extend_from_slice(&program);
        if code.len() > MAX_INSNS || program.is_empty() {
            return None;
        }
        Some(KernelFilter {
            form: Form::Classic(
                code.iter()
                    .map(|i| libc::sock_filter {
                        code: i.code,
                        jt: i.jt,
                        jf: i.jf,
                        k: i.k,
                    })
                    .collect(),
            ),
        })
    }

    /// A loaded eBPF socket filter (`BPF_PROG_TYPE_SOCKET_FILTER`) of
    /// `insns` instructions as the pre-filter. The same rule holds as for
    /// classic BPF: it may accept more than the user's filter, never less.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// // Any descriptor stands for a program here; attaching checks it.
    /// let fd: std::os::fd::OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    /// let k = sluice_live::KernelFilter::ebpf(Arc::new(fd), 12);
    /// assert_eq!((k.len(), k.is_ebpf()), (12, true));
    /// ```
    pub fn ebpf(prog: Arc<dyn AsFd + Send + Sync>, insns: usize) -> KernelFilter {
        KernelFilter {
            form: Form::Ebpf(prog, insns),
        }
    }

    /// The program that accepts every packet whole.
    pub fn accept_all() -> KernelFilter {
        KernelFilter {
            form: Form::Classic(vec![libc::sock_filter {
                code: BPF_RET | BPF_K,
                jt: 0,
                jf: 0,
                k: u32::MAX,
            }]),
        }
    }

    /// Its classic instructions (none for eBPF).
    pub fn code(&self) -> &[libc::sock_filter] {
        match &self.form {
            Form::Classic(c) => c,
            Form::Ebpf(..) => &[],
        }
    }

    /// The eBPF program's descriptor, when it is one.
    pub fn ebpf_fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.form {
            Form::Classic(_) => None,
            Form::Ebpf(p, _) => Some(p.as_fd()),
        }
    }

    /// Whether it is an eBPF program.
    pub fn is_ebpf(&self) -> bool {
        matches!(self.form, Form::Ebpf(..))
    }

    /// Its number of instructions.
    pub fn len(&self) -> usize {
        match &self.form {
            Form::Classic(c) => c.len(),
            Form::Ebpf(_, n) => *n,
        }
    }

    /// Whether it has no instructions (never: a program ends in `ret`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(size: u16, mode: u16, k: u32) -> Insn {
        Insn::stmt(BPF_LD | size | mode, k)
    }

    #[test]
    fn cooked_loads_move_to_the_kernels_view() {
        let ret = Insn::stmt(BPF_RET | BPF_K, 262144);
        // ip and ip[9] = 6, on cooked v2: the protocol field, then a load
        // past the 20-byte header.
        let p = [
            ld(BPF_H, BPF_ABS, 0),
            Insn::jump(BPF_JMP | BPF_JEQ | BPF_K, 0x800, 0, 3),
            ld(BPF_B, BPF_ABS, 29),
            Insn::stmt(BPF_LDX | BPF_B | BPF_MSH, 20),
            ld(BPF_H, BPF_IND, 22),
            ret,
        ];
        let k = uncook(&p, 20, cooked_layout(LINUX_SLL2).unwrap().1).unwrap();
        assert_eq!(k[0].k, PROTOCOL);
        assert_eq!((k[2].k, k[3].k, k[4].k), (9, 0, 2));
        assert_eq!(
            KernelFilter::new(&p, LINUX_SLL2).unwrap().len(),
            p.len() + 3
        );
        // Cooked v1: the packet type, and the VLAN check first.
        let q = [ld(BPF_H, BPF_ABS, 0), ret];
        let k = uncook(&q, 16, cooked_layout(LINUX_SLL).unwrap().1).unwrap();
        assert_eq!(k[0].k, PKTTYPE);
        assert_eq!(KernelFilter::new(&q, LINUX_SLL).unwrap().len(), 5);
        // A byte of the address, or a one-byte load of a two-byte field,
        // or an indirect load inside the header: user space only.
        for bad in [
            ld(BPF_B, BPF_ABS, 12),
            ld(BPF_B, BPF_ABS, 0),
            ld(BPF_W, BPF_IND, 2),
        ] {
            assert!(
                KernelFilter::new(&[bad, ret], LINUX_SLL2).is_none(),
                "{bad:?}"
            );
        }
        // Other link types are not cooked and not known: nothing.
        assert!(KernelFilter::new(&[ret], 105).is_none());
    }
}
