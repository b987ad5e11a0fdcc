//! The kernel pre-filter: a classic BPF program the kernel runs on every
//! packet before it reaches the ring, so rejected packets cost no copy.
//!
//! The rule: the kernel's program may accept more than the user's filter
//! (user space filters every packet again), never less. The kernel sees a
//! VLAN-tagged frame with its tag taken off, where the user's filter sees
//! it put back (as libpcap shows it); so tagged frames are always let
//! through, and the user's program only decides the untagged ones.

use sluice_bpf::Insn;

/// The kernel's limit on a classic BPF program's length (`BPF_MAXINSNS`).
pub const MAX_INSNS: usize = 4096;

/// `SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT`: the ancillary load of "the
/// kernel took a VLAN tag off this frame".
const VLAN_TAG_PRESENT: u32 = (-0x1000i32 + 48) as u32;

/// A program ready for `SO_ATTACH_FILTER`.
#[derive(Clone)]
pub struct KernelFilter {
    code: Vec<libc::sock_filter>,
}

impl std::fmt::Debug for KernelFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelFilter({} instructions)", self.code.len())
    }
}

impl KernelFilter {
    /// The kernel form of `program` for a capture of link type
    /// `linktype`, or `None` when it cannot be one (too long for the
    /// kernel, or a cooked capture, whose frames the kernel sees without
    /// their cooked header).
    ///
    /// ```
    /// use sluice_bpf::{Insn, op::*};
    /// let accept = [Insn::stmt(BPF_RET | BPF_K, 262144)];
    /// let k = sluice_live::KernelFilter::new(&accept, 1).unwrap();
    /// assert_eq!(k.len(), 4); // the VLAN check, then the program
    /// assert!(sluice_live::KernelFilter::new(&accept, 276).is_none());
    /// ```
    pub fn new(program: &[Insn], linktype: u16) -> Option<KernelFilter> {
        use sluice_bpf::op::*;
        let mut code = Vec::with_capacity(program.len() + 3);
        match linktype {
            crate::interfaces::ETHERNET => {
                // ldb vlan_present; jeq #0 -> program; ret #262144
                code.push(Insn::stmt(BPF_LD | BPF_B | BPF_ABS, VLAN_TAG_PRESENT));
                code.push(Insn::jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0));
                code.push(Insn::stmt(BPF_RET | BPF_K, 262144));
            }
            crate::interfaces::RAW => {}
            _ => return None,
        }
        code.extend_from_slice(program);
        if code.len() > MAX_INSNS || program.is_empty() {
            return None;
        }
        Some(KernelFilter {
            code: code
                .iter()
                .map(|i| libc::sock_filter {
                    code: i.code,
                    jt: i.jt,
                    jf: i.jf,
                    k: i.k,
                })
                .collect(),
        })
    }

    /// The program that accepts every packet whole.
    pub fn accept_all() -> KernelFilter {
        KernelFilter {
            code: vec![libc::sock_filter {
                code: sluice_bpf::op::BPF_RET | sluice_bpf::op::BPF_K,
                jt: 0,
                jf: 0,
                k: u32::MAX,
            }],
        }
    }

    /// Its instructions.
    pub fn code(&self) -> &[libc::sock_filter] {
        &self.code
    }

    /// Its number of instructions.
    pub fn len(&self) -> usize {
        self.code.len()
    }

    /// Whether it has no instructions (never: a program ends in `ret`).
    pub fn is_empty(&self) -> bool {
        self.code.is_empty()
    }
}
