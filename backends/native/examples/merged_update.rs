//! What an update of the native merged classifier costs with 10,000 TCP
//! session filters installed (one group probed in its table): a key-only
//! insert (no code), a filter of a new shape (one new function), a change
//! to a small group (its function only). `SESSIONS=N` changes the count.
//!
//! ```sh
//! cargo run --release -p sluice-native --example merged_update
//! ```

use sluice_classifier::merged::{Compiled, Merged};
use sluice_ir::{Filter, Pred, Size, Val};
use sluice_native::merged::NativeMerged;
use std::time::Instant;

#[allow(dead_code)]
#[path = "../src/merged/fixtures.rs"]
mod fixtures;
use fixtures::session;

fn main() {
    let n: u32 = std::env::var("SESSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let mut m = Merged::default();
    m.insert(0, &Compiled::new(Filter::new(session(1, 2, 3, 4), 1)), 0);
    let keys: Vec<u32> = (1..n)
        .flat_map(|i| {
            [
                0x800,
                6,
                0x0a00_0000 + i,
                0xc0a8_0001,
                1024 + i % 50_000,
                80,
            ]
        })
        .collect();
    assert!(m.insert_key_block(1, 0, 6, keys.into(), 0));
    let t = Instant::now();
    let mut nm = NativeMerged::from_merged(m);
    println!(
        "{n} sessions: first build {:.0} us, {:?}",
        t.elapsed().as_secs_f64() * 1e6,
        nm.native_stats()
    );
    let report = |what: &str, nm: &NativeMerged, t: Instant| {
        let s = nm.native_stats();
        println!(
            "{what}: insert + update {:.1} us (update {:.1} us, compiling {:.1} us), {} compilations so far, {} functions",
            t.elapsed().as_secs_f64() * 1e6,
            s.last_update.as_secs_f64() * 1e6,
            s.last_compile.as_secs_f64() * 1e6,
            s.compilations,
            s.units
        );
    };
    let mut id = n;
    for round in 0..3 {
        let t = Instant::now();
        nm.insert_keyed(
            id,
            0,
            &[0x800, 6, 0x0b00_0000 + round, 0xc0a8_0001, 999, 80],
            0,
        );
        id += 1;
        nm.update();
        report("key-only insert", &nm, t);
    }
    let shapes = [
        Pred::and(vec![
            Pred::eq(Val::load_abs(12, Size::Half), 0x800),
            Pred::eq(Val::load_abs(23, Size::Byte), 17),
        ]),
        Pred::eq(Val::load_abs(12, Size::Half), 0x86dd),
        Pred::and(vec![
            Pred::eq(Val::load_abs(12, Size::Half), 0x800),
            Pred::eq(Val::load_abs(23, Size::Byte), 17),
            Pred::eq(Val::load(Val::ip_hdr_len(14), 16, Size::Half), 53),
        ]),
    ];
    for p in shapes {
        let t = Instant::now();
        nm.insert(id, &Compiled::new(Filter::new(p, 1)), 0);
        id += 1;
        nm.update();
        report("new shape", &nm, t);
    }
    for k in [54, 55, 56] {
        let t = Instant::now();
        let p = Pred::and(vec![
            Pred::eq(Val::load_abs(12, Size::Half), 0x800),
            Pred::eq(Val::load_abs(23, Size::Byte), 17),
            Pred::eq(Val::load(Val::ip_hdr_len(14), 16, Size::Half), k),
        ]);
        nm.insert(id, &Compiled::new(Filter::new(p, 1)), 0);
        id += 1;
        nm.update();
        report("key added to a small group (keys in code)", &nm, t);
    }
}
