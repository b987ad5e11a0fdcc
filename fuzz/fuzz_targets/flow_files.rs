//! Fuzzes the text of `@FILE` programs in flows (`BPF`, `CSPF`, `DPF`,
//! `FPL-2`, as the group hands them to the classes once the policy allowed
//! them): any content must be accepted or refused, never panic, and a
//! refusal must quote no word of the file after the position it names
//! (issue 36: errors never repeat a file).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_flow::bpf::{BpfClass, LanguageClass};
use sluice_flow::class::{BuildEnv, FilterClass, Files};
use sluice_flow::fpl::FplClass;
use std::collections::HashSet;

const PATH: &str = "/fuzz/prog";

/// The words of the text, lower case (as the redaction compares them).
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut files = Files::default();
    files.insert(PATH, text.to_string());
    let env = BuildEnv {
        linktypes: vec![(1, false)],
        files: files.clone(),
    };
    let file_words = words(text);
    let at = format!("@{PATH}");
    let classes: [(&dyn FilterClass, String); 5] = [
        (&BpfClass, at.clone()),
        (&BpfClass, format!("dpf:{at}")),
        (&LanguageClass::cspf(), at.clone()),
        (&LanguageClass::dpf(), at.clone()),
        (&FplClass::new(), at.clone()),
    ];
    for (class, arg) in classes {
        let args = [arg];
        assert_eq!(class.files(&args), [PATH.to_string()]);
        // At populate nothing is read: the check passes on the name alone.
        assert!(class.check(&args).is_ok());
        let checked = class.check_loaded(&args, &files).map(|_| ());
        let built = class.build(&args, &env).map(|_| ());
        for e in [checked.err(), built.err()].into_iter().flatten() {
            // What follows "PATH: line L, column C: " (or "PATH: ") is
            // the message about the file; no word of the file is in it.
            let m = &e.message;
            let Some(at) = m.find(PATH) else {
                continue;
            };
            let tail = &m[at + PATH.len()..];
            let tail = match tail.find("column ") {
                Some(c) => &tail[c..],
                None => tail,
            };
            // The link type a BPF expression was compiled for is ours.
            let tail = tail.rsplit_once(" (link type ").map_or(tail, |(t, _)| t);
            for w in tail.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                let w = w.to_lowercase();
                if w.is_empty() || ["line", "column", "fpl", "cspf", "dpf"].contains(&w.as_str()) {
                    continue;
                }
                if w.chars().all(|c| c.is_ascii_digit()) {
                    continue; // line and column numbers
                }
                assert!(!file_words.contains(&w), "{w:?} of the file in {m:?}");
            }
        }
    }
});
