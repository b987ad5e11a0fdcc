//! Nothing of a filter set stays in the kernel: a chain of programs and
//! its maps (the merged classifier's or the decision tree's), once dropped, are gone from the system's lists of programs
//! and maps, and none of their descriptors is open. Alone in its test
//! binary so that no other test loads programs meanwhile. Where the
//! kernel refuses BPF the test says SKIPPED, unless `SLUICE_LIVE_REQUIRED`
//! is set.

use sluice_ebpf::{Error, Filter, Mode};
use sluice_ir::arbitrary;

/// Descriptors of this process that are BPF programs or maps.
fn bpf_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().starts_with("anon_inode:bpf"))
        .count()
}

/// A chain of programs with its maps (counters, chain, groups) is gone
/// from the system's lists of programs and maps once dropped: the
/// kernel's own ids, not only this process's descriptors (a program
/// array and the programs in it refer to each other; closing the array's
/// last descriptor empties it).
#[test]
fn a_dropped_filter_set_leaves_no_program_or_map_in_the_system() {
    use sluice_classifier::merged::Compiled;
    use sluice_ebpf::multi::{MultiFilter, Options};
    let filters: Vec<(u32, Compiled)> = arbitrary::hand_built_filters()
        .into_iter()
        .enumerate()
        .map(|(i, p)| (i as u32, Compiled::new(Filter::new(p, 1))))
        .collect();
    let refs: Vec<(u32, &Compiled)> = filters.iter().map(|(i, c)| (*i, c)).collect();
    let before = bpf_fds();
    let mut ids = (Vec::new(), Vec::new());
    for mode in [Mode::TestRun, Mode::Socket] {
        let opts = Options {
            budget: 1000,
            ..Default::default()
        };
        let m = match MultiFilter::build(&refs, mode, opts) {
            Ok(m) => m,
            Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
                eprintln!("SKIPPED: the kernel refuses BPF here ({e})");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert!(m.programs() > 1, "a chain");
        if mode == Mode::TestRun {
            m.run(&[0u8; 60], 60).unwrap();
        }
        let (p, maps) = m.kernel_ids().unwrap();
        let (sp, sm) = sluice_ebpf::system_ids().unwrap();
        assert!(p.iter().all(|i| sp.contains(i)) && maps.iter().all(|i| sm.contains(i)));
        ids.0.extend(p);
        ids.1.extend(maps);
    }
    // The same of the decision tree's chain.
    for mode in [Mode::TestRun, Mode::Socket] {
        let opts = sluice_ebpf::tree::Options {
            budget: 400,
            ..Default::default()
        };
        let m = sluice_ebpf::TreeFilter::build(&refs, mode, opts).unwrap();
        assert!(m.programs() > 1, "a chain");
        if mode == Mode::TestRun {
            m.run(&[0u8; 60], 60).unwrap();
        }
        let (p, maps) = m.kernel_ids().unwrap();
        ids.0.extend(p);
        ids.1.extend(maps);
    }
    assert_eq!(bpf_fds(), before);
    // The kernel frees programs and maps after an RCU grace period (and a
    // program array's entries from a work queue): wait for it, up to 10 s.
    let t = std::time::Instant::now();
    loop {
        let (sp, sm) = sluice_ebpf::system_ids().unwrap();
        let left: Vec<u32> = ids
            .0
            .iter()
            .filter(|i| sp.contains(i))
            .chain(ids.1.iter().filter(|i| sm.contains(i)))
            .copied()
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "still in the system after 10 s: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
