//! Fuzzes the flow specification parser, the classes' argument checks and
//! authorisation of what was written (`@FILE` included): any input must
//! give a flow definition or an error with a column inside (or just past)
//! the text, never a panic, and nothing is read before the policy allows
//! it (authorisation opens no file).
#![no_main]

use libfuzzer_sys::fuzz_target;

/// A policy with every kind of rule, paths included.
const POLICY: &str = "deny source=file:/etc\nallow source=file:/tmp/,replay,iface:lo class=bpf,sampler,dpf,fpl-2\nallow read=/tmp\nallow extern=*\nrequire sampler before strsearch\ncallback every>=16\n";

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
        match flow.populate(text) {
            Err(sluice_flow::Error::Spec(e)) => assert!(e.column >= 1, "{e}"),
            Err(_) => {}
            // Authorisation of whatever was written, `@FILE` included:
            // paths are resolved, nothing is opened or read.
            Ok(()) => {
                let policy = sluice_flow::policy::Policy::parse(POLICY, "fuzz.policy").unwrap();
                let cred = sluice_flow::policy::Credentials { uid: 65534, gids: vec![65534] };
                if let Err(sluice_flow::Error::Spec(e)) = flow.authorise(&policy, &cred) {
                    assert!(e.column >= 1 && e.column <= len + 1, "{e}");
                }
            }
        }
    }
});
