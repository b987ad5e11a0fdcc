//! The `bpf(2)` system call: load a program, run it on one packet, create
//! maps and read and write their elements, attach a program to an
//! interface's XDP hook through a link; and an interface's index.
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
const BPF_BTF_LOAD: libc::c_int = 18;
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

/// `union bpf_attr` for BPF_PROG_LOAD, up to `func_info_cnt`.
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
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    pad: u32,
}

/// `union bpf_attr` for BPF_BTF_LOAD, up to `btf_log_level` (and the
/// padding to 8 bytes).
#[repr(C)]
#[derive(Default)]
struct BtfLoad {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
    pad: u32,
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

/// Load a BTF blob (type information: programs with subprograms need
/// one that names each).
pub fn btf_load(blob: &[u8]) -> std::io::Result<OwnedFd> {
    let mut attr = BtfLoad {
        btf: blob.as_ptr() as u64,
        btf_size: blob.len() as u32,
        ..Default::default()
    };
    let fd = bpf(BPF_BTF_LOAD, &mut attr)?;
    Ok(own(fd as libc::c_int))
}

/// Load `insns` (encoded) as a program of `prog_type`; with `log`, the
/// verifier writes its log there (log level 1); with `funcs`, the BTF
/// and its `bpf_func_info` records (instruction, type id: two words
/// each), one per subprogram.
pub fn prog_load(
    prog_type: u32,
    insns: &[u64],
    name: &str,
    log: Option<&mut Vec<u8>>,
    funcs: Option<(&OwnedFd, &[[u32; 2]])>,
) -> std::io::Result<OwnedFd> {
    let license = b"BSD\0";
    let mut attr = ProgLoad {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..Default::default()
    };
    if let Some((btf, info)) = funcs {
        attr.prog_btf_fd = btf.as_raw_fd() as u32;
        attr.func_info_rec_size = 8;
        attr.func_info = info.as_ptr() as u64;
        attr.func_info_cnt = info.len() as u32;
    }
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
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_DELETE_ELEM: libc::c_int = 3;

/// `union bpf_attr` for BPF_MAP_CREATE, up to `map_name`.
#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `union bpf_attr` for the BPF_MAP_*_ELEM commands.
#[repr(C)]
#[derive(Default)]
struct MapElem {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// Create a map; its descriptor is owned.
pub fn map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> std::io::Result<OwnedFd> {
    let mut attr = MapCreate {
        map_type,
        key_size,
        value_size,
        max_entries,
        ..Default::default()
    };
    for (d, s) in attr.map_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    let fd = bpf(BPF_MAP_CREATE, &mut attr)?;
    Ok(own(fd as libc::c_int))
}

/// Set `key` to `value` (`key` and `value` exactly the map's sizes: the
/// caller checks).
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> std::io::Result<()> {
    let mut attr = MapElem {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// Remove `key`.
pub fn map_delete(map: &OwnedFd, key: &[u8]) -> std::io::Result<()> {
    let mut attr = MapElem {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(|_| ())
}

/// Read `key`'s value into `value` (for a per-CPU map, one value per
/// possible CPU, each rounded up to 8 bytes: the caller sizes it).
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> std::io::Result<()> {
    let mut attr = MapElem {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map(|_| ())
}

const BPF_PROG_GET_NEXT_ID: libc::c_int = 11;
const BPF_MAP_GET_NEXT_ID: libc::c_int = 12;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;

/// `union bpf_attr` for the GET_NEXT_ID commands.
#[repr(C)]
#[derive(Default)]
struct NextId {
    start_id: u32,
    next_id: u32,
    open_flags: u32,
}

/// `union bpf_attr` for BPF_OBJ_GET_INFO_BY_FD.
#[repr(C)]
#[derive(Default)]
struct InfoByFd {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// Every id of the system's programs (`maps` false) or maps (true),
/// from the kernel's id table.
pub fn system_ids(maps: bool) -> std::io::Result<Vec<u32>> {
    let cmd = if maps {
        BPF_MAP_GET_NEXT_ID
    } else {
        BPF_PROG_GET_NEXT_ID
    };
    let mut out = Vec::new();
    let mut attr = NextId::default();
    loop {
        match bpf(cmd, &mut attr) {
            Ok(_) => {
                out.push(attr.next_id);
                attr.start_id = attr.next_id;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
            Err(e) => return Err(e),
        }
    }
}

/// The kernel's id of a program or map (both infos start with
/// `type`, `id`).
pub fn object_id(fd: &OwnedFd) -> std::io::Result<u32> {
    let mut info = [0u64; 1];
    info_by_fd(fd, &mut info)?;
    // `id` is the second u32: the high half of the first u64 here.
    Ok(u32::from_ne_bytes(
        info[0].to_ne_bytes()[4..].try_into().expect("4 bytes"),
    ))
}

/// The start of the kernel's info struct of `fd`'s program or map, as
/// many bytes as `info` holds.
fn info_by_fd(fd: &OwnedFd, info: &mut [u64]) -> std::io::Result<()> {
    let mut attr = InfoByFd {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: (8 * info.len()) as u32,
        info: info.as_mut_ptr() as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).map(|_| ())
}

const BPF_ENABLE_STATS: libc::c_int = 32;

/// Turn on the kernel's run-time statistics of every program
/// (`BPF_STATS_RUN_TIME`) while the returned descriptor is open.
pub fn enable_stats() -> std::io::Result<OwnedFd> {
    let mut attr: u32 = 0;
    let fd = bpf(BPF_ENABLE_STATS, &mut attr)?;
    Ok(own(fd as libc::c_int))
}

/// A program's `run_time_ns` and `run_cnt` (`struct bpf_prog_info`,
/// offsets 192 and 200).
pub fn run_stats(fd: &OwnedFd) -> std::io::Result<(u64, u64)> {
    let mut info = [0u64; 26];
    info_by_fd(fd, &mut info)?;
    Ok((info[24], info[25]))
}
