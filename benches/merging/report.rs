//! Results as TSV: one row per measured set, columns by name, appended to
//! `SLUICE_MERGING_OUT/SECTION.tsv` (with a header when the file is new)
//! or printed. Absent figures are `-`. `scripts/merging-report.py` reads
//! them by column name.

use crate::config::Config;
use std::fmt::Display;
use std::io::Write;

/// One TSV row under construction.
#[derive(Default)]
pub struct Record {
    cells: Vec<(&'static str, String)>,
}

impl Record {
    /// Add a column.
    pub fn put(&mut self, key: &'static str, value: impl Display) -> &mut Record {
        self.cells.push((key, value.to_string()));
        self
    }

    /// Add a column of a number with `digits` decimals.
    pub fn num(&mut self, key: &'static str, value: f64, digits: usize) -> &mut Record {
        self.put(key, format!("{value:.digits$}"))
    }

    /// Add a column that may be absent (`-`).
    pub fn opt(&mut self, key: &'static str, value: Option<f64>, digits: usize) -> &mut Record {
        match value {
            Some(v) => self.num(key, v, digits),
            None => self.put(key, "-"),
        }
    }

    fn header(&self) -> String {
        let keys: Vec<&str> = self.cells.iter().map(|(k, _)| *k).collect();
        keys.join("\t")
    }

    fn line(&self) -> String {
        let values: Vec<&str> = self.cells.iter().map(|(_, v)| v.as_str()).collect();
        values.join("\t")
    }

    /// Write the row of `section` (see the module doc).
    pub fn write(&self, cfg: &Config, section: &str) {
        match &cfg.out {
            None => println!("{section}\n{}\n{}", self.header(), self.line()),
            Some(dir) => {
                let path = dir.join(format!("{section}.tsv"));
                let head = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| t.lines().next().map(str::to_string));
                let mut text = String::new();
                match head {
                    None => text.push_str(&format!("{}\n", self.header())),
                    Some(h) if h != self.header() => {
                        panic!("{}: other columns than this row's", path.display())
                    }
                    Some(_) => {}
                }
                text.push_str(&format!("{}\n", self.line()));
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(text.as_bytes()))
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
    }
}
