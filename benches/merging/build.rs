//! Building the default engine from filter texts, timed in its three
//! parts, with the memory it took.
//!
//! As `sluice split` does: each expression becomes a [`Program`] (parsed,
//! the IR, classic BPF) and its accepting paths ([`Compiled::new`]), on
//! every core ([`sluice::merge::compile_all`]); they
//! are inserted into a [`NativeAuto`] (which starts as tuple space search
//! and moves to the decision tree past four shapes, replaying the inserts);
//! [`NativeAuto::update`] generates the machine code.

use sluice::classifier::merged::Compiled;
use sluice::classifier::Engine;
use sluice::native::NativeAuto;
use sluice::{LinkType, Program};
use sluice_testsupport::rss;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The snapshot length filters are compiled for (`sluice`'s default).
pub const SNAPLEN: u32 = 262_144;

/// Compile one expression for Ethernet as `sluice` does; a failure stops
/// the run (every expression of both sets compiles).
pub fn program(text: &str) -> Program {
    Program::builder(LinkType::EN10MB)
        .snaplen(SNAPLEN)
        .build(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// A program's paths, for the merged engines.
pub fn compiled(p: &Program) -> Compiled {
    match p.ir() {
        Some(ir) => Compiled::new(ir.clone()),
        None => Compiled::from_bpf(p.bpf()),
    }
}

/// Priority of filter `i` of `n`: earlier filters win, as in `sluice split`.
pub fn priority(i: usize, n: usize) -> i32 {
    i32::try_from(n - i).unwrap_or(i32::MAX)
}

/// Build and drop a small engine and one filter's native code, so that
/// what every process pays once (the code generator's set-up, the first
/// code pages) is not counted as the first set's.
pub fn warm_up() {
    let texts = ["tcp port 80".to_string(), "udp".to_string()];
    let built = Built::new(&texts);
    drop(built);
    let _ = program("tcp port 80").native();
}

/// The default engine holding a filter set, and what building it took.
pub struct Built {
    /// Each filter's paths (shared with the engine).
    pub compiled: Vec<Arc<Compiled>>,
    /// The engine, its code up to date.
    pub engine: NativeAuto,
    /// Compiling the expressions (program and paths).
    pub compile: Duration,
    /// Inserting them into the engine (the structure).
    pub structure: Duration,
    /// Generating machine code ([`NativeAuto::update`]).
    pub code: Duration,
    /// Growth of the process's RSS over the three.
    pub rss_growth: usize,
}

impl Built {
    /// Build the default engine for `texts`.
    pub fn new(texts: &[String]) -> Built {
        let rss0 = rss();
        let t = Instant::now();
        // As `sluice split` compiles them: on every core.
        let builder = Program::builder(LinkType::EN10MB).snaplen(SNAPLEN);
        let compiled: Vec<Arc<Compiled>> = sluice::merge::compile_all(&builder, texts)
            .into_iter()
            .zip(texts)
            .map(|(c, t)| Arc::new(c.unwrap_or_else(|e| panic!("{t}: {e}"))))
            .collect();
        let compile = t.elapsed();
        let t = Instant::now();
        let mut engine = NativeAuto::empty();
        for (i, c) in compiled.iter().enumerate() {
            engine.insert(i as u32, c.clone(), priority(i, texts.len()));
        }
        let structure = t.elapsed();
        let t = Instant::now();
        engine.update();
        let code = t.elapsed();
        let rss_growth = rss().saturating_sub(rss0);
        Built {
            compiled,
            engine,
            compile,
            structure,
            code,
            rss_growth,
        }
    }

    /// Which structure the default engine chose.
    pub fn structure_name(&self) -> &'static str {
        if self.engine.is_tree() {
            "tree"
        } else {
            "tuple space"
        }
    }

    /// Bytes of the structure by its own statistics: the tree's estimate,
    /// or tuple space's hash tables and their packed copies.
    pub fn structure_bytes(&self) -> usize {
        match (self.engine.tree(), self.engine.groups()) {
            (Some(t), _) => t.tree().stats().bytes,
            (_, Some(g)) => g.merged().table_bytes() + g.packed_bytes(),
            _ => 0,
        }
    }

    /// Bytes of machine code in use.
    pub fn code_bytes(&self) -> usize {
        match (self.engine.tree(), self.engine.groups()) {
            (Some(t), _) => t.native_stats().code_bytes,
            (_, Some(g)) => g.native_stats().code_bytes,
            _ => 0,
        }
    }

    /// One line on the structure, for the progress output.
    pub fn describe(&self) -> String {
        match (self.engine.tree(), self.engine.groups()) {
            (Some(t), _) => {
                let s = t.tree().stats();
                let n = t.native_stats();
                format!(
                    "tree: {} nodes, {} tables, {} conditions, {} fields, {} run whole, {} bytes; code: {} units, {} functions, {} bytes",
                    s.nodes, s.tables, s.conds, s.fields, s.whole, s.bytes, n.units, n.shapes, n.code_bytes
                )
            }
            (_, Some(g)) => format!(
                "tuple space: {} groups, {} run whole, {} bytes of tables; code: {} bytes",
                g.merged().groups(),
                g.merged().whole(),
                self.structure_bytes(),
                g.native_stats().code_bytes
            ),
            _ => String::new(),
        }
    }

    /// Tree nodes and tables (0, 0 for tuple space).
    pub fn tree_size(&self) -> (usize, usize) {
        self.engine.tree().map_or((0, 0), |t| {
            let s = t.tree().stats();
            (s.nodes, s.tables)
        })
    }
}
