//! Nothing leaks: every program loaded, run or refused leaves no BPF
//! descriptor open once dropped (counted in /proc/self/fd). Alone in its
//! test binary so that no other test loads programs meanwhile. Where the
//! kernel refuses BPF the test says SKIPPED, unless `SLUICE_LIVE_REQUIRED`
//! is set.

use sluice_ebpf::{op, Error, Filter, Insn, Loaded, Mode};
use sluice_ir::arbitrary;

/// Descriptors of this process that are BPF programs or maps.
fn bpf_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().starts_with("anon_inode:bpf"))
        .count()
}

#[test]
fn loaded_run_and_refused_programs_leave_no_descriptor() {
    let before = bpf_fds();
    let mut held = Vec::new();
    for p in arbitrary::hand_built_filters() {
        let f = Filter::new(p, 262144);
        for mode in [Mode::TestRun, Mode::Socket] {
            match Loaded::compile(&f, mode) {
                Ok(l) => held.push(l),
                Err(Error::NotPermitted(e))
                    if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() =>
                {
                    eprintln!("SKIPPED: the kernel refuses BPF here ({e})");
                    return;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    for l in held.iter().filter(|l| l.mode() == Mode::TestRun) {
        l.run(&[0u8; 60], 60).unwrap();
    }
    assert_eq!(bpf_fds(), before + held.len());
    // Refused programs (twice: without and with the verifier's log).
    for _ in 0..3 {
        let refused = Loaded::load(&[Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)], Mode::TestRun);
        assert!(matches!(refused, Err(Error::Refused(..))));
    }
    drop(held);
    assert_eq!(bpf_fds(), before);
}
