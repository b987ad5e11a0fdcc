//! `sluice split -i --engine ebpf --count` with a thousand generated
//! filters of every shape: the set in the kernel as the merged decision
//! tree compiled to eBPF, one program far larger than a socket may hold
//! (the kernel charges the program a socket attaches to its option
//! memory), reached from a small first program by a tail call. The
//! kernel's counts must equal the default engine's on what Debian's
//! tcpdump captured beside it, and libpcap's for a sample of the filters.
#![forbid(unsafe_code)]

use super::net::{frames, libpcap_filter, Bg, Net};
use super::{settle, stat, tcpdump, text};

#[test]
fn a_thousand_generated_filters_count_in_the_kernel_as_libpcap_does() {
    let Some(net) = Net::new("ebpftree") else {
        return;
    };
    let exprs = sluice_workload::filter_set(1000, 4);
    let filters = net.file("filters.txt");
    let lines: Vec<String> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| format!("g{i:04}\t{e}"))
        .collect();
    std::fs::write(&filters, lines.join("\n") + "\n").unwrap();
    // Whole frames of the set's own traffic (most match some filter).
    let traffic: Vec<(Vec<u8>, u32)> = sluice_workload::traffic(1000, 4, 3000)
        .into_iter()
        .filter(|(d, w)| d.len() == *w as usize && d.len() <= 1514)
        .collect();
    let sent_file = net.file("traffic.pcap");
    sluice_workload::write_pcap(&sent_file, &traffic).unwrap();
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let mut run = Bg::start({
        let mut c = net.sluice(&[
            "split",
            "-i",
            "vb",
            "--engine",
            "ebpf",
            "--count",
            "--filters",
            filters.to_str().unwrap(),
        ]);
        c.env("SLUICE_DEBUG", "1");
        c
    });
    run.listening();
    let sent = net.replay(&sent_file);
    settle();
    let a = run.interrupt();
    let t = dump.interrupt();
    let err = text(&a.stderr);
    assert!(a.status.success(), "{err}");
    assert!(t.status.success());
    assert!(err.contains("kernel pre-filter: eBPF, "), "{err}");
    // Only the frames whose VLAN tag the kernel took off reached user
    // space (whole, uncounted: user space counts them); the kernel
    // counted every other frame.
    let captured = frames(&all);
    assert_eq!(captured.len() as u64, sent);
    let tagged = captured
        .iter()
        .filter(|(d, _)| {
            d.len() > 13 && matches!(u16::from_be_bytes([d[12], d[13]]), 0x8100 | 0x88a8)
        })
        .count() as u64;
    assert!(tagged < sent / 2, "{tagged} of {sent} tagged");
    assert_eq!(stat(&err, "received by filter"), tagged, "{err}");
    let kernel = text(&a.stdout);
    let default = text(
        &super::common::sluice(&[
            "split",
            "--count",
            "--filters",
            filters.to_str().unwrap(),
            "-r",
            all.to_str().unwrap(),
        ])
        .stdout,
    );
    assert_eq!(kernel, default);
    let counted: Vec<u64> = kernel
        .lines()
        .map(|l| l.rsplit('\t').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(counted.len(), 1000);
    assert!(counted.iter().sum::<u64>() > sent / 2, "{kernel}");
    // libpcap's count of every 50th filter.
    for i in (0..1000).step_by(50) {
        let want = libpcap_filter(&all, &exprs[i], &net.file("w.pcap")).len() as u64;
        assert_eq!(counted[i], want, "{}", exprs[i]);
    }
}
