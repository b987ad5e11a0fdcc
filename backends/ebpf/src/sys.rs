//! The `bpf(2)` system call: load a program, run it on one packet, attach
//! it to an interface's XDP hook through a link; and an interface's index.
//!
//! Rule: this is the crate's only unsafe code; each call passes the kernel
//! a `union bpf_attr` prefix laid out as linux/bpf.h declares it, with
//! every pointer in it valid for the call's duration, and every file
//! descriptor the kernel returns is owned at once ([`OwnedFd`]), so it is
//! closed on drop.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_TEST_RUN: libc::c_int = 10;
const BPF_LINK_CREATE: libc::c_int = 28;
const BPF_LINK_UPDATE: libc::c_int = 29;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;

/// `union bpf_attr` for BPF_LINK_CREATE, up to `flags` (XDP takes nothing
/// after it).
#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `union bpf_attr` for BPF_LINK_UPDATE, up to `old_prog_fd`.
#[repr(C)]
#[derive(Default)]
struct LinkUpdate {
    link_fd: u32,
    new_prog_fd: u32,
    flags: u32,
    old_prog_fd: u32,
}

/// `union bpf_attr` for BPF_PROG_LOAD, up to `expected_attach_type`.
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for BPF_PROG_TEST_RUN, up to `batch_size` (and the
/// padding to 8 bytes, zero as the kernel requires).
#[repr(C)]
#[derive(Default)]
struct TestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    pad: u32,
}

fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of
    // `union bpf_attr` for `cmd`, of the size passed; the kernel reads
    // and writes only within that size, and every pointer inside it was
    // set by the caller to memory that outlives this call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Load `insns` (encoded) as a program of `prog_type`; with `log`, the
/// verifier writes its log there (log level 1).
pub fn prog_load(
    prog_type: u32,
    insns: &[u64],
    name: &str,
    log: Option<&mut Vec<u8>>,
) -> std::io::Result<OwnedFd> {
    let license = b"BSD\0";
    let mut attr = ProgLoad {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..Default::default()
    };
    for (d, s) in attr.prog_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    if let Some(buf) = log {
        attr.log_level = 1;
        attr.log_size = buf.len() as u32;
        attr.log_buf = buf.as_mut_ptr() as u64;
        let r = bpf(BPF_PROG_LOAD, &mut attr);
        return r.map(|fd| own(fd as libc::c_int));
    }
    let fd = bpf(BPF_PROG_LOAD, &mut attr)?;
    Ok(own(fd as libc::c_int))
}

fn own(fd: libc::c_int) -> OwnedFd {
    // SAFETY: the kernel just returned `fd` as a new descriptor that no
    // one else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Run the program once per `repeat` on `data` with context `ctx`
/// (a `struct __sk_buff` prefix): (return value, mean ns per run).
pub fn test_run(
    prog: &OwnedFd,
    data: &[u8],
    ctx: &[u8],
    repeat: u32,
) -> std::io::Result<(u32, u32)> {
    let mut attr = TestRun {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: data.len() as u32,
        data_in: data.as_ptr() as u64,
        repeat,
        ctx_size_in: ctx.len() as u32,
        ctx_in: if ctx.is_empty() {
            0
        } else {
            ctx.as_ptr() as u64
        },
        ..Default::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok((attr.retval, attr.duration))
}

/// Attach an XDP program to interface `ifindex` through a BPF link, in
/// the XDP mode `flags` asks (`XDP_FLAGS_*`): the link's descriptor. The
/// kernel detaches the program when the last descriptor of the link
/// closes, so a killed process leaves nothing attached.
pub fn xdp_link(prog: &OwnedFd, ifindex: u32, flags: u32) -> std::io::Result<OwnedFd> {
    let mut attr = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    let fd = bpf(BPF_LINK_CREATE, &mut attr)?;
    Ok(own(fd as libc::c_int))
}

/// Put `prog` in place of the program of `link`, atomically.
pub fn link_update(link: &OwnedFd, prog: &OwnedFd) -> std::io::Result<()> {
    let mut attr = LinkUpdate {
        link_fd: link.as_raw_fd() as u32,
        new_prog_fd: prog.as_raw_fd() as u32,
        ..Default::default()
    };
    bpf(BPF_LINK_UPDATE, &mut attr).map(|_| ())
}

/// The index of the interface `name`.
pub fn ifindex(name: &str) -> std::io::Result<u32> {
    let name = std::ffi::CString::new(name).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    match unsafe { libc::if_nametoindex(name.as_ptr()) } {
        0 => Err(std::io::Error::last_os_error()),
        i => Ok(i),
    }
}
