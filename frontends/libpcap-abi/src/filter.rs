//! Filters: `pcap_compile` runs sluice's compiler (libpcap master's
//! meaning) and hands C a `struct bpf_program`; `pcap_setfilter` installs
//! it as sluice's native code (and, live, in the kernel); the classic
//! BPF helpers (`bpf_filter`, `bpf_validate`, `bpf_image`, `bpf_dump`)
//! run on sluice's interpreter, verifier and printer.
//!
//! Programs compiled here are remembered by their instructions, so that
//! `pcap_setfilter` of one of them runs the native code made from the
//! expression itself; any other program (built by hand, read from a
//! file) is verified and lifted to sluice's intermediate form.

use crate::handle::{handle_or, pcap_t, Kind, Source, BAD_HANDLE};
use crate::types::*;
use sluice_bpf::Insn;
use sluice_capture::CaptureFormat;
use sluice_filter::{LinkType, Program, SystemResolver};
use sluice_pcap::ast::{Expr, Other};
use std::ffi::{c_char, c_int, c_uint};
use std::sync::{Arc, Mutex};

/// A program `pcap_setfilter` installs.
#[derive(Clone)]
pub(crate) struct Installed {
    pub(crate) program: Arc<Program>,
    /// Compiled from an expression with `vlan`: it reads a VLAN tag in
    /// the frame, so on a live capture it judges the frame with the tag
    /// the kernel took off put back. Any other program judges the frame
    /// as the kernel saw it, as libpcap's kernel filter does.
    pub(crate) reads_vlan_tags: bool,
}

/// The most recently compiled programs, by instructions.
static COMPILED: Mutex<Vec<(Vec<Insn>, Installed)>> = Mutex::new(Vec::new());
const REMEMBERED: usize = 64;

fn remember(p: &Installed) {
    let mut c = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if c.len() >= REMEMBERED {
        c.remove(0);
    }
    c.push((p.program.bpf().to_vec(), p.clone()));
}

/// The program for these instructions: one compiled here, or the
/// instructions verified and lifted.
pub(crate) fn program_of(insns: Vec<Insn>) -> Result<Installed, String> {
    {
        let c = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = c.iter().rev().find(|(i, _)| *i == insns) {
            return Ok(p.clone());
        }
    }
    if !libpcap_valid(&insns) {
        return Err("BPF program is not valid".into());
    }
    Program::from_bpf(insns)
        .map(|p| Installed {
            program: Arc::new(p),
            reads_vlan_tags: false,
        })
        .map_err(|e| format!("BPF program is not valid: {e}"))
}

/// Whether an expression uses the `vlan` keyword.
fn uses_vlan(text: &str) -> bool {
    sluice_pcap::parser::parse(text).is_ok_and(|e| {
        e.leaves()
            .iter()
            .any(|l| matches!(l, Expr::Other(Other::Vlan(_), _)))
    })
}

/// The instructions of a C program, copied; `None` for NULL or empty.
///
/// # Safety
/// `fp` NULL or a `bpf_program` whose `bf_insns` holds `bf_len` entries.
pub(crate) unsafe fn insns_of(fp: *const bpf_program) -> Option<Vec<Insn>> {
    // SAFETY: as documented.
    let fp = unsafe { fp.as_ref() }?;
    if fp.bf_insns.is_null() || fp.bf_len == 0 || fp.bf_len > 1 << 20 {
        return None;
    }
    // SAFETY: the caller vouches for bf_len instructions.
    let raw = unsafe { std::slice::from_raw_parts(fp.bf_insns, fp.bf_len as usize) };
    Some(
        raw.iter()
            .map(|r| Insn {
                code: r.code,
                jt: r.jt,
                jf: r.jf,
                k: r.k,
            })
            .collect(),
    )
}

/// The message programs print for a compile error: libpcap's words for
/// an expression (see [`crate::wording`]); sluice's for the others.
/// (`sluice filter` shows sluice's own messages, with the column.)
fn message(text: &str, dlt: c_int, e: &sluice_filter::Error) -> String {
    match e {
        sluice_filter::Error::Expression(c) => crate::wording::libpcap_message(text, dlt, c),
        other => other.to_string(),
    }
}

/// Compiles `text` for a DLT value; the message on failure.
fn compile(
    text: &str,
    dlt: c_int,
    snaplen: c_int,
    optimize: bool,
    file: Option<bool>,
    netmask: BpfU32,
) -> Result<Arc<Program>, String> {
    let linktype = u32::try_from(dlt)
        .ok()
        .and_then(LinkType::from_number)
        .ok_or_else(|| format!("unknown data link type {dlt}"))?;
    // libpcap: a snapshot length of 0 accepts no byte of any packet; a
    // negative one is taken as unsigned.
    if snaplen == 0 {
        return Err("snaplen of 0 rejects all packets".into());
    }
    let snaplen = snaplen as u32;
    let program = Program::builder(linktype)
        .snaplen(snaplen)
        .optimize(optimize)
        // A handle on a capture file compiles with libpcap's savefile rule
        // (in the file's byte order), one without a file with this host's.
        .offline(file.is_some())
        .capture_big_endian(file.unwrap_or(cfg!(target_endian = "big")))
        .netmask((netmask != PCAP_NETMASK_UNKNOWN).then_some(netmask))
        .resolver(Arc::new(SystemResolver))
        .expression(text)
        .map_err(|e| message(text, dlt, &e))?;
    let installed = Installed {
        program: Arc::new(program),
        reads_vlan_tags: uses_vlan(text),
    };
    remember(&installed);
    Ok(installed.program)
}

/// Fills `fp` with a malloc'd copy of the program's instructions.
///
/// # Safety
/// `fp` is writable.
unsafe fn fill(fp: *mut bpf_program, program: &Program) -> Result<(), String> {
    let bpf = program.bpf();
    // SAFETY: malloc of bpf.len() instructions, checked for NULL.
    let out = unsafe { libc::malloc(std::mem::size_of_val(bpf).max(1)) }.cast::<bpf_insn>();
    if out.is_null() {
        return Err("malloc: Cannot allocate memory".into());
    }
    for (i, insn) in bpf.iter().enumerate() {
        // SAFETY: i < bpf.len(), the allocation's length.
        unsafe {
            out.add(i).write(bpf_insn {
                code: insn.code,
                jt: insn.jt,
                jf: insn.jf,
                k: insn.k,
            })
        };
    }
    // SAFETY: fp is writable (caller).
    unsafe {
        (*fp).bf_len = bpf.len() as c_uint;
        (*fp).bf_insns = out;
    }
    Ok(())
}

/// The text of a C expression argument (NULL is the empty expression,
/// which accepts everything, as in libpcap).
///
/// # Safety
/// `s` NULL or a C string.
unsafe fn expression<'a>(s: *const c_char) -> Result<std::borrow::Cow<'a, str>, String> {
    // SAFETY: as documented.
    match unsafe { crate::cstr(s) } {
        None => Ok("".into()),
        Some(c) => c
            .to_str()
            .map(Into::into)
            .map_err(|_| "the filter expression is not UTF-8".to_string()),
    }
}

/// `pcap_compile`: compiles a pcap filter expression for the handle's
/// link type and snapshot length. 0, or -1 with `pcap_geterr` saying why.
///
/// # Safety
/// `p` NULL or from this library; `fp` NULL or writable; `text` NULL or
/// a C string.
#[no_mangle]
pub unsafe extern "C" fn pcap_compile(
    p: *mut pcap_t,
    fp: *mut bpf_program,
    text: *const c_char,
    optimize: c_int,
    netmask: BpfU32,
) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return h.fail(
                PCAP_ERROR_NOT_ACTIVATED,
                "not-yet-activated pcap_t passed to pcap_compile",
            );
        }
        if fp.is_null() {
            return h.fail(PCAP_ERROR, "pcap_compile: NULL program pointer");
        }
        // SAFETY: as documented.
        let text = match unsafe { expression(text) } {
            Ok(t) => t,
            Err(e) => return h.fail(PCAP_ERROR, &e),
        };
        let file = match &*h.source.lock() {
            Source::Offline(o) => match o.reader.format() {
                CaptureFormat::Pcap { big_endian, .. }
                | CaptureFormat::PcapNg { big_endian, .. } => Some(big_endian),
            },
            _ => None,
        };
        match compile(
            &text,
            h.dlt.get(),
            h.snapshot.get(),
            optimize != 0,
            file,
            netmask,
        ) {
            // SAFETY: fp checked non-NULL and writable per the contract.
            Ok(prog) => match unsafe { fill(fp, &prog) } {
                Ok(()) => 0,
                Err(e) => h.fail(PCAP_ERROR, &e),
            },
            Err(e) => h.fail(PCAP_ERROR, &e),
        }
    })
}

/// `pcap_compile_nopcap`: [`pcap_compile`] without a handle.
///
/// # Safety
/// `fp` NULL or writable; `text` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn pcap_compile_nopcap(
    snaplen: c_int,
    dlt: c_int,
    fp: *mut bpf_program,
    text: *const c_char,
    optimize: c_int,
    netmask: BpfU32,
) -> c_int {
    crate::guard::entry(-1, move || {
        if fp.is_null() {
            return PCAP_ERROR;
        }
        // SAFETY: as documented.
        let Ok(text) = (unsafe { expression(text) }) else {
            return PCAP_ERROR;
        };
        match compile(&text, dlt, snaplen, optimize != 0, None, netmask) {
            // SAFETY: fp checked non-NULL.
            Ok(prog) => match unsafe { fill(fp, &prog) } {
                Ok(()) => 0,
                Err(_) => PCAP_ERROR,
            },
            Err(_) => PCAP_ERROR,
        }
    })
}

/// `pcap_freecode`: frees the instructions of a compiled program.
///
/// # Safety
/// `fp` NULL or a program filled by this library (or malloc'd by C).
#[no_mangle]
pub unsafe extern "C" fn pcap_freecode(fp: *mut bpf_program) {
    crate::guard::entry((), move || {
        // SAFETY: as documented; free(NULL) is a no-op.
        if let Some(fp) = unsafe { fp.as_mut() } {
            // SAFETY: the instructions were malloc'd.
            unsafe { libc::free(fp.bf_insns.cast()) };
            fp.bf_insns = std::ptr::null_mut();
            fp.bf_len = 0;
        }
    })
}

/// `pcap_setfilter`: installs a program; later packets are judged by it
/// (sluice's native code; for a live capture, also in the kernel).
///
/// # Safety
/// `p` NULL or from this library; `fp` NULL or a valid program.
#[no_mangle]
pub unsafe extern "C" fn pcap_setfilter(p: *mut pcap_t, fp: *mut bpf_program) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return h.fail(PCAP_ERROR_NOT_ACTIVATED, crate::types::NOT_ACTIVATED_MSG);
        }
        if h.kind() == Kind::Dead {
            return h.fail(
                PCAP_ERROR,
                "A filter cannot be set on a pcap_open_dead pcap_t",
            );
        }
        if fp.is_null() {
            return h.fail(PCAP_ERROR, "No filter specified");
        }
        // SAFETY: as documented.
        let Some(insns) = (unsafe { insns_of(fp) }) else {
            return h.fail(PCAP_ERROR, "BPF program is not valid");
        };
        let program = match program_of(insns) {
            Ok(p) => p,
            Err(e) => return h.fail(PCAP_ERROR, &e),
        };
        if let Source::Live(l) = &mut *h.source.lock() {
            if let Err(e) = l.set_kernel_filter(&program) {
                return h.fail(PCAP_ERROR, &e);
            }
        }
        h.set_filter(Some(program.program));
        0
    })
}

/// `pcap_offline_filter`: the program's verdict on a packet (0: rejected),
/// run as sluice's native code, compiled once per program (see
/// [`crate::fastfilter`]).
///
/// # Safety
/// `fp` NULL or a valid program; `hdr` and `pkt` NULL or valid for
/// `hdr->caplen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_offline_filter(
    fp: *const bpf_program,
    hdr: *const pcap_pkthdr,
    pkt: *const u8,
) -> c_int {
    crate::guard::pure(0, move || {
        // SAFETY: as documented.
        let (Some(fp), Some(hdr)) = (unsafe { fp.as_ref() }, unsafe { hdr.as_ref() }) else {
            return 0;
        };
        if fp.bf_insns.is_null() || fp.bf_len == 0 || fp.bf_len > 1 << 20 {
            return 0;
        }
        if pkt.is_null() && hdr.caplen > 0 {
            return 0;
        }
        // SAFETY: bf_len instructions, per the contract.
        let insns = unsafe { std::slice::from_raw_parts(fp.bf_insns, fp.bf_len as usize) };
        let data = if pkt.is_null() {
            &[][..]
        } else {
            // SAFETY: caplen bytes, per the contract.
            unsafe { std::slice::from_raw_parts(pkt, hdr.caplen as usize) }
        };
        crate::fastfilter::filter_sized(insns, data, hdr.len).map_or(0, |v| v as c_int)
    })
}

/// `bpf_filter`: runs a program on `buflen` bytes of a packet `wirelen`
/// long (a NULL program accepts everything), as sluice's native code,
/// compiled once per program (see [`crate::fastfilter`]).
///
/// # Safety
/// `pc` NULL or a program that ends in returns; `p` valid for `buflen`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn bpf_filter(
    pc: *const bpf_insn,
    p: *const u8,
    wirelen: c_uint,
    buflen: c_uint,
) -> c_uint {
    crate::guard::pure(0, move || {
        if pc.is_null() {
            return c_uint::MAX;
        }
        let data = if p.is_null() {
            &[][..]
        } else {
            // SAFETY: buflen bytes, per the contract.
            unsafe { std::slice::from_raw_parts(p, buflen as usize) }
        };
        // SAFETY: as documented.
        unsafe { crate::fastfilter::filter_unsized(pc, data, wirelen) }
    })
}

/// libpcap's own checks of a program (`bpf_validate`'s rules): known
/// load modes and ALU and jump operations, scratch indexes below 16, no
/// division by a constant 0, jumps that land inside, a return last. They
/// are looser than sluice's verifier: `ret x` and any `misc` operation
/// pass, so a program may pass these and still be refused by
/// `pcap_setfilter`, where libpcap would abort when running it.
pub(crate) fn libpcap_valid(prog: &[Insn]) -> bool {
    let len = prog.len();
    if len == 0 {
        return false;
    }
    for (i, p) in prog.iter().enumerate() {
        let ok = match p.code & 0x07 {
            0x00 | 0x01 => match p.code & 0xe0 {
                0x00 | 0x20 | 0x40 | 0xa0 | 0x80 => true,
                0x60 => p.k < 16,
                _ => false,
            },
            0x02 | 0x03 => p.k < 16,
            0x04 => match p.code & 0xf0 {
                0x00 | 0x10 | 0x20 | 0x40 | 0x50 | 0x60 | 0x70 | 0x80 | 0xa0 => true,
                0x30 | 0x90 => p.code & 0x08 != 0 || p.k != 0,
                _ => false,
            },
            0x05 => {
                let from = i + 1;
                match p.code & 0xf0 {
                    0x00 => (from as u64) + u64::from(p.k) < len as u64,
                    0x10 | 0x20 | 0x30 | 0x40 => {
                        from + usize::from(p.jt) < len && from + usize::from(p.jf) < len
                    }
                    _ => false,
                }
            }
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    prog[len - 1].code & 0x07 == 0x06
}

/// `bpf_validate`: 1 when the program passes libpcap's checks, else 0.
///
/// # Safety
/// `f` NULL or valid for `len` instructions.
#[no_mangle]
pub unsafe extern "C" fn bpf_validate(f: *const bpf_insn, len: c_int) -> c_int {
    crate::guard::entry(0, move || {
        let fp = bpf_program {
            bf_len: len.max(0) as c_uint,
            bf_insns: f.cast_mut(),
        };
        // SAFETY: as documented.
        match unsafe { insns_of(&fp) } {
            Some(insns) => c_int::from(libpcap_valid(&insns)),
            None => 0,
        }
    })
}

/// `bpf_image`: one instruction as `tcpdump -d` prints it (a per-thread
/// buffer, valid to the next call).
///
/// # Safety
/// `insn` NULL or a valid instruction.
#[no_mangle]
pub unsafe extern "C" fn bpf_image(insn: *const bpf_insn, n: c_int) -> *mut c_char {
    crate::guard::entry(std::ptr::null_mut(), move || {
        // SAFETY: as documented.
        let Some(r) = (unsafe { insn.as_ref() }) else {
            return crate::names::scratch("(NULL instruction)").cast_mut();
        };
        let i = Insn {
            code: r.code,
            jt: r.jt,
            jf: r.jf,
            k: r.k,
        };
        crate::names::scratch(&sluice_bpf::image(&i, n.max(0) as usize)).cast_mut()
    })
}

extern "C" {
    static mut stdout: *mut libc::FILE;
}

/// `bpf_dump`: prints a program on standard output, as `tcpdump -d`
/// (option 1), `-dd` (2) or `-ddd` (3 and more) do.
///
/// # Safety
/// `p` NULL or a valid program.
#[no_mangle]
pub unsafe extern "C" fn bpf_dump(p: *const bpf_program, option: c_int) {
    crate::guard::entry((), move || {
        // SAFETY: as documented.
        let Some(insns) = (unsafe { insns_of(p) }) else {
            return;
        };
        let text = match option {
            o if o > 2 => sluice_bpf::disasm_ddd(&insns),
            2 => sluice_bpf::disasm_dd(&insns),
            _ => sluice_bpf::disasm_d(&insns),
        };
        let text = if text.ends_with('\n') {
            text
        } else {
            text + "\n"
        };
        let Ok(text) = std::ffi::CString::new(text) else {
            return;
        };
        // SAFETY: C's stdout stream, so the output interleaves with the
        // program's own printf in order.
        unsafe {
            libc::fputs(text.as_ptr(), stdout);
        }
    })
}
