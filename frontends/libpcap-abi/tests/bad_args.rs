//! Every exported function, called the way a careless C program calls it:
//! NULL and closed handles, made-up pointers, unknown link types, random
//! expressions, random and hostile BPF programs, random bytes as file
//! names and names. Each call must return libpcap's error code (with a
//! message where libpcap gives one) and never crash; valid calls around
//! them keep working. Generated inputs come from seeded generators, so a
//! failure reproduces from its seed.

// These tests call the library's C entry points.
#![allow(unsafe_code)]

use pcap::*;
use sluice_testsupport::{corpus, Rng};
use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr::{null, null_mut};

/// A pointer no one allocated as a handle (never dereferenced: the
/// registry says no first).
fn made_up(rng: &mut Rng) -> *mut pcap_t {
    (rng.next_u64() as usize & !7 | 8) as *mut pcap_t
}

fn err(p: *mut pcap_t) -> String {
    // SAFETY: pcap_geterr always returns a NUL-terminated string.
    unsafe { CStr::from_ptr(pcap_geterr(p)) }
        .to_string_lossy()
        .into_owned()
}

fn sample() -> CString {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sample.pcap");
    CString::new(root.to_str().unwrap()).unwrap()
}

#[test]
fn null_unknown_and_closed_handles_get_error_codes() {
    let mut rng = Rng::new(0x5eed);
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    // SAFETY: a real file name and error buffer.
    let closed = unsafe { pcap_open_offline(sample().as_ptr(), errbuf.as_mut_ptr()) };
    assert!(!closed.is_null());
    // SAFETY: a handle of this library, closed once.
    unsafe { pcap_close(closed) };
    let mut handles = vec![null_mut(), closed];
    handles.extend((0..50).map(|_| made_up(&mut rng)));
    for p in handles {
        let mut prog = bpf_program {
            bf_len: 0,
            bf_insns: null_mut(),
        };
        let mut hdr: *mut pcap_pkthdr = null_mut();
        let mut data: *const u8 = null();
        let mut st = pcap_stat::default();
        let mut dlts: *mut c_int = null_mut();
        // SAFETY: every call gets a pointer that is not a live handle; the
        // library must look it up and refuse.
        unsafe {
            assert_eq!(pcap_datalink(p), PCAP_ERROR);
            assert_eq!(pcap_snapshot(p), PCAP_ERROR);
            assert_eq!(pcap_is_swapped(p), PCAP_ERROR);
            assert_eq!(pcap_major_version(p), PCAP_ERROR);
            assert_eq!(
                pcap_compile(p, &mut prog, c"tcp".as_ptr(), 1, 0),
                PCAP_ERROR
            );
            assert_eq!(pcap_setfilter(p, &mut prog), PCAP_ERROR);
            assert_eq!(pcap_loop(p, 1, None, null_mut()), PCAP_ERROR);
            assert_eq!(pcap_dispatch(p, 1, None, null_mut()), PCAP_ERROR);
            assert_eq!(pcap_next_ex(p, &mut hdr, &mut data), PCAP_ERROR);
            assert!(pcap_next(p, null_mut()).is_null());
            assert_eq!(pcap_stats(p, &mut st), PCAP_ERROR);
            assert_eq!(pcap_list_datalinks(p, &mut dlts), PCAP_ERROR);
            assert_eq!(pcap_set_datalink(p, 1), PCAP_ERROR);
            assert!(pcap_dump_open(p, c"/dev/null".as_ptr()).is_null());
            assert!(pcap_file(p).is_null());
            assert_eq!(pcap_fileno(p), -1);
            assert_eq!(pcap_get_selectable_fd(p), -1);
            assert_eq!(pcap_set_snaplen(p, 100), PCAP_ERROR);
            assert_eq!(pcap_activate(p), PCAP_ERROR);
            assert_eq!(pcap_setdirection(p, PCAP_D_IN), PCAP_ERROR);
            assert_eq!(pcap_setnonblock(p, 1, null_mut()), PCAP_ERROR);
            assert_eq!(pcap_inject(p, b"x".as_ptr().cast(), 1), PCAP_ERROR);
            pcap_breakloop(p);
            pcap_perror(p, c"test".as_ptr());
            assert!(!err(p).is_empty());
            pcap_close(p);
        }
    }
}

#[test]
fn null_arguments_on_a_live_handle_are_refused() {
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    // SAFETY: a real file name and error buffer.
    let p = unsafe { pcap_open_offline(sample().as_ptr(), errbuf.as_mut_ptr()) };
    assert!(!p.is_null());
    // SAFETY: a live handle with NULL out-pointers, which must be refused.
    unsafe {
        assert_eq!(
            pcap_compile(p, null_mut(), c"tcp".as_ptr(), 1, 0),
            PCAP_ERROR
        );
        assert_eq!(pcap_setfilter(p, null_mut()), PCAP_ERROR);
        assert_eq!(err(p), "No filter specified");
        assert_eq!(pcap_next_ex(p, null_mut(), null_mut()), PCAP_ERROR);
        assert_eq!(pcap_stats(p, null_mut()), PCAP_ERROR);
        assert_eq!(err(p), "Statistics aren't available from savefiles");
        assert_eq!(pcap_list_datalinks(p, null_mut()), PCAP_ERROR);
        assert!(pcap_dump_open(p, null()).is_null());
        // NULL callback: packets are read and dropped, as a count.
        assert_eq!(pcap_dispatch(p, -1, None, null_mut()), 14);
        assert_eq!(pcap_dispatch(p, -1, None, null_mut()), 0);
        pcap_close(p);
        assert!(pcap_open_offline(null(), errbuf.as_mut_ptr()).is_null());
        assert!(pcap_open_offline(c"/nonexistent".as_ptr(), null_mut()).is_null());
        assert!(pcap_fopen_offline(null_mut(), errbuf.as_mut_ptr()).is_null());
        assert!(
            pcap_open_offline_with_tstamp_precision(sample().as_ptr(), 7, errbuf.as_mut_ptr())
                .is_null()
        );
        // An unknown precision is microseconds, as in libpcap.
        let dead = pcap_open_dead_with_tstamp_precision(1, 100, 9);
        assert_eq!(pcap_get_tstamp_precision(dead), PCAP_TSTAMP_PRECISION_MICRO);
        pcap_close(dead);
        pcap_freecode(null_mut());
        pcap_freealldevs(null_mut());
        pcap_free_datalinks(null_mut());
        pcap_dump(null_mut(), null(), null());
        pcap_dump_close(null_mut());
        assert_eq!(pcap_dump_flush(null_mut()), PCAP_ERROR);
        assert_eq!(pcap_dump_ftell(null_mut()), -1);
        assert_eq!(bpf_filter(null(), null(), 0, 0), u32::MAX);
        assert_eq!(bpf_validate(null(), 5), 0);
        assert_eq!(pcap_offline_filter(null(), null(), null()), 0);
        assert_eq!(pcap_datalink_name_to_val(null()), -1);
        assert_eq!(pcap_tstamp_type_name_to_val(null()), -1);
        assert!(pcap_findalldevs(null_mut(), errbuf.as_mut_ptr()) < 0);
        assert_eq!(
            pcap_lookupnet(null(), null_mut(), null_mut(), errbuf.as_mut_ptr()),
            PCAP_ERROR
        );
        assert!(pcap_ether_aton(null()).is_null());
        assert!(pcap_nametoaddr(null()).is_null());
        assert_eq!(pcap_nametoport(null(), null_mut(), null_mut()), 0);
        assert!(pcap_next_etherent(null_mut()).is_null());
        assert!(!bpf_image(null(), 0).is_null());
        bpf_dump(null(), 1);
    }
}

/// A random string of expression-ish words and bytes.
fn random_text(rng: &mut Rng) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "tcp",
        "udp",
        "host",
        "port",
        "and",
        "or",
        "not",
        "(",
        ")",
        "ip6",
        "1.2.3.4",
        "80",
        "vlan",
        "ether[0]",
        "&",
        "=",
        "0",
        "protochain",
        "geneve",
        "len",
        "<",
        "*",
        "foo",
        "-",
        "::1",
        "net",
        "/",
        "24",
        "mpls",
        "ppp",
        "radio[0]",
    ];
    let mut t = Vec::new();
    for _ in 0..rng.below(8) {
        if rng.chance(10) {
            t.extend(rng.bytes(3).into_iter().map(|b| b.max(1)));
        } else {
            t.extend_from_slice(rng.pick(WORDS).as_bytes());
        }
        t.push(b' ');
    }
    t
}

#[test]
fn random_expressions_on_random_link_types_compile_or_say_why() {
    let mut rng = Rng::new(0xc0de);
    let (mut compiled, mut refused) = (0, 0);
    for _ in 0..600 {
        let dlt = if rng.chance(70) {
            rng.pick(&[0, 1, 9, 12, 101, 104, 105, 113, 127, 192, 228, 229, 276])
        } else {
            rng.next_u32() as c_int
        };
        let p = pcap_open_dead(dlt, rng.range(0, 70_000) as c_int);
        let text = CString::new(random_text(&mut rng)).unwrap();
        let mut prog = bpf_program {
            bf_len: 0,
            bf_insns: null_mut(),
        };
        // SAFETY: a live handle, a C string and an out-program.
        let r =
            unsafe { pcap_compile(p, &mut prog, text.as_ptr(), rng.below(2) as c_int, u32::MAX) };
        if r == 0 {
            assert!(prog.bf_len > 0);
            // SAFETY: the program just compiled.
            unsafe {
                assert_eq!(bpf_validate(prog.bf_insns, prog.bf_len as c_int), 1);
                pcap_freecode(&mut prog);
            }
            compiled += 1;
        } else {
            refused += 1;
            assert_eq!(r, PCAP_ERROR);
            assert!(!err(p).is_empty(), "no message for {text:?}");
        }
        // SAFETY: the handle opened above.
        unsafe { pcap_close(p) };
    }
    // Both outcomes must have been exercised.
    assert!(
        compiled > 50 && refused > 50,
        "{compiled} compiled, {refused} refused"
    );
}

#[test]
fn random_programs_are_refused_or_run_safely_on_every_packet() {
    let mut rng = Rng::new(0xb0f);
    let captures: Vec<_> = corpus::pcaps().into_iter().take(40).collect();
    let captures = if captures.is_empty() {
        vec![std::path::PathBuf::from(sample().to_str().unwrap())]
    } else {
        captures
    };
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    let (mut valid_programs, mut packets) = (0, 0);
    for round in 0..300 {
        let n = rng.range(1, 12);
        let mut insns: Vec<bpf_insn> = (0..n)
            .map(|_| bpf_insn {
                code: if rng.chance(80) {
                    rng.pick(&[
                        0x20, 0x28, 0x30, 0x40, 0x48, 0x50, 0x00, 0x01, 0x61, 0x07, 0x87, 0x15,
                        0x25, 0x45, 0x05, 0x04, 0x34, 0x94, 0x06, 0x16, 0x02, 0x03,
                    ])
                } else {
                    rng.next_u32() as u16
                },
                jt: rng.below(4) as u8,
                jf: rng.below(4) as u8,
                k: if rng.chance(50) {
                    rng.below(80) as u32
                } else {
                    rng.next_u32()
                },
            })
            .collect();
        if rng.chance(70) {
            insns.push(bpf_insn {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: 65535,
            });
        }
        let mut prog = bpf_program {
            bf_len: insns.len() as u32,
            bf_insns: insns.as_mut_ptr(),
        };
        let path = CString::new(captures[round % captures.len()].to_str().unwrap()).unwrap();
        // SAFETY: a real file, a valid program description (the
        // instructions may be nonsense: that is the test), NULL callbacks.
        unsafe {
            let p = pcap_open_offline(path.as_ptr(), errbuf.as_mut_ptr());
            if p.is_null() {
                continue;
            }
            let valid = bpf_validate(insns.as_ptr(), insns.len() as c_int) == 1;
            valid_programs += usize::from(valid);
            let set = pcap_setfilter(p, &mut prog);
            // libpcap's checks are looser than sluice's verifier (`ret x`
            // passes them): a program they refuse is always refused.
            assert!(
                set != 0 || valid,
                "setfilter took what validate refuses: {insns:?}"
            );
            let valid = set == 0;
            let mut hdr: *mut pcap_pkthdr = null_mut();
            let mut data: *const u8 = null();
            let mut reads = 0;
            while pcap_next_ex(p, &mut hdr, &mut data) == 1 {
                let bytes = std::slice::from_raw_parts(data, (*hdr).caplen as usize);
                let offline = pcap_offline_filter(&prog, hdr, data);
                if valid {
                    assert_ne!(offline, 0, "setfilter passed a packet the program rejects");
                    let direct =
                        bpf_filter(insns.as_ptr(), bytes.as_ptr(), (*hdr).len, (*hdr).caplen);
                    assert_eq!(direct as c_int, offline);
                }
                reads += 1;
                packets += 1;
                if reads > 200 {
                    break;
                }
            }
            pcap_close(p);
        }
    }
    assert!(
        valid_programs > 30 && packets > 1000,
        "{valid_programs} valid programs, {packets} packets"
    );
}

#[test]
fn random_names_and_files_are_refused_cleanly() {
    let mut rng = Rng::new(0xf11e);
    let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
    let dir = std::env::temp_dir().join(format!("sluice-abi-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..200 {
        let name: Vec<u8> = random_text(&mut rng)
            .into_iter()
            .filter(|&b| b != 0)
            .collect();
        let name = CString::new(name).unwrap();
        // SAFETY: C strings and error buffers.
        unsafe {
            let _ = pcap_datalink_name_to_val(name.as_ptr());
            let _ = pcap_tstamp_type_name_to_val(name.as_ptr());
            let _ = pcap_nametoeproto(name.as_ptr());
            let a = pcap_ether_aton(name.as_ptr());
            libc::free(a.cast());
            let p = pcap_create(name.as_ptr(), errbuf.as_mut_ptr());
            pcap_close(p);
        }
        // A file of random bytes, sometimes starting like a capture.
        let mut bytes = match rng.below(3) {
            0 => vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0],
            1 => vec![0x0a, 0x0d, 0x0d, 0x0a],
            _ => Vec::new(),
        };
        let len = rng.below(200);
        bytes.extend(rng.bytes(len));
        let path = dir.join(format!("{i}.pcap"));
        std::fs::write(&path, &bytes).unwrap();
        let c = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a real path and error buffer; NULL callbacks.
        unsafe {
            let p = pcap_open_offline(c.as_ptr(), errbuf.as_mut_ptr());
            if p.is_null() {
                assert_ne!(errbuf[0], 0, "no message for a refused file");
                continue;
            }
            let r = pcap_loop(p, -1, None, null_mut());
            assert!(r == 0 || r == PCAP_ERROR);
            if r == PCAP_ERROR {
                assert!(!err(p).is_empty());
            }
            pcap_close(p);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
