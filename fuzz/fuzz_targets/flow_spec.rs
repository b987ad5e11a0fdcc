//! Fuzzes the flow specification parser and the classes' argument checks:
//! any input must give a flow definition or an error with a column inside
//! (or just past) the text, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let len = text.chars().count();
        match sluice_flow::spec::parse(text) {
            Ok(g) => {
                // Printing and parsing again gives the same graph.
                let again = sluice_flow::spec::parse(&g.to_string()).expect("reparse");
                assert_eq!(again.stages.len(), g.stages.len());
            }
            Err(e) => assert!(e.column >= 1 && e.column <= len + 1, "{e}"),
        }
        let group = sluice_flow::Group::new(sluice_flow::GroupConfig {
            slots: 1,
            slot_bytes: 1,
            ibuf_entries: 1,
            ..Default::default()
        }).unwrap();
        let mut flow = sluice_flow::Flow::create(&group);
        if let Err(sluice_flow::Error::Spec(e)) = flow.populate(text) {
            assert!(e.column >= 1, "{e}");
        }
    }
});
