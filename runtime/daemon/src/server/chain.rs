//! A flow's elements after its filters (FFPF's filters with persistent
//! memory): `(iface,eth0) -> (BPF,"tcp") -> (hashcount,10)` runs the
//! hash counter in the daemon on every packet the flow's filters accept,
//! its table in a shared MBuf the client maps read-only.
//!
//! The rule: an element is any of runtime/flow's filter classes, one per
//! stage, built only after the policy allowed the whole flow (classes and
//! external functions) for the user the kernel named; it never reads a
//! file (an `@FILE` argument is refused: the client sends the text). A
//! packet reaches the flow only when every element passes it; an element
//! that fails ends the flow, with its message in the status.

use crate::proto::Memory;
use sluice_capture::Packet;
use sluice_flow::buffer::MBuf;
use sluice_flow::class::{BuildEnv, Classes, Element, Pkt};
use sluice_flow::policy::ElemShape;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// Most elements after a flow's filters.
pub(crate) const MAX_ELEMENTS: usize = 16;

/// Most MBuf words of one flow's elements together (256 MiB).
const MAX_MBUF_WORDS: usize = 64 << 20;

/// One element as a client asked for it, checked.
#[derive(Clone, Debug)]
pub(crate) struct Asked {
    /// The class's canonical name.
    pub(crate) class: String,
    pub(crate) args: Vec<String>,
    /// Words of MBuf it needs.
    pub(crate) words: usize,
    /// What the policy sees of it.
    pub(crate) shape: ElemShape,
}

/// Check one element of a flow specification (class, arguments, no
/// `@FILE`): what it is, or the column and message of the error.
pub(crate) fn check(e: &sluice_flow::spec::Element) -> Result<Asked, (usize, String)> {
    let classes = Classes::builtin();
    let Some(c) = classes.filter(&e.class) else {
        let hint = match classes.source(&e.class) {
            Some(_) => format!(
                "{} is a packet source; a daemon flow's source is (iface,NAME)",
                e.class
            ),
            None => format!(
                "unknown filter class {:?} (known: {})",
                e.class,
                classes.names().join(", ")
            ),
        };
        return Err((e.column, hint));
    };
    let arg_at = |arg: Option<usize>, offset: usize| match arg {
        Some(i) => e.arg_columns.get(i).copied().unwrap_or(e.column) + offset,
        None => e.column,
    };
    if !c.files(&e.args).is_empty() {
        return Err((
            arg_at(Some(0), 0),
            "the daemon never opens files: read the program in the client and send its text".into(),
        ));
    }
    let info = c.check(&e.args).map_err(|ae| {
        (
            arg_at(ae.arg, ae.offset),
            format!("{}: {}", e.class, ae.message),
        )
    })?;
    let args: Vec<&str> = e.args.iter().map(String::as_str).collect();
    let mut shape = ElemShape::new(c.name(), false, &args);
    shape.externs = info.externs;
    Ok(Asked {
        class: c.name().to_ascii_lowercase(),
        args: e.args.clone(),
        words: info.mbuf_words,
        shape,
    })
}

/// One running element and its memory.
struct Stage {
    class: String,
    elem: Box<dyn Element>,
    mbuf: Arc<MBuf>,
}

/// A flow's running elements.
pub(crate) struct Chain {
    stages: Vec<Stage>,
    /// Ran since they last published their memory.
    dirty: bool,
    /// Why the flow ended, if an element failed.
    pub(crate) failed: Option<String>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let classes: Vec<&str> = self.stages.iter().map(|s| s.class.as_str()).collect();
        write!(f, "Chain({classes:?})")
    }
}

impl Chain {
    /// Build checked elements for packets of `linktype`, each with its
    /// memory in a shared region.
    pub(crate) fn build(asked: &[Asked], linktype: u16) -> Result<Chain, String> {
        let words: usize = asked.iter().map(|a| a.words).sum();
        if words > MAX_MBUF_WORDS {
            return Err(format!(
                "the flow's elements ask for {} bytes of memory, more than the daemon's {}",
                words * 4,
                MAX_MBUF_WORDS * 4
            ));
        }
        let classes = Classes::builtin();
        let env = BuildEnv {
            linktypes: vec![(linktype, false)],
            ..BuildEnv::default()
        };
        let mut stages = Vec::new();
        for a in asked {
            let c = classes
                .filter(&a.class)
                .ok_or_else(|| format!("unknown filter class {:?}", a.class))?;
            let elem = c
                .build(&a.args, &env)
                .map_err(|e| format!("{}: {}", a.class, e.message))?;
            let mbuf =
                MBuf::in_region(a.words).map_err(|e| format!("{}: its memory: {e}", a.class))?;
            stages.push(Stage {
                class: a.class.clone(),
                elem,
                mbuf: Arc::new(mbuf),
            });
        }
        Ok(Chain {
            stages,
            dirty: false,
            failed: None,
        })
    }

    /// Whether every element passes the packet (an element that fails
    /// ends the chain: `Err` with its message, and nothing passes after).
    pub(crate) fn passes(&mut self, pkt: &Packet<'_>) -> Result<bool, String> {
        if self.failed.is_some() {
            return Ok(false);
        }
        let p = Pkt {
            data: pkt.data,
            wirelen: pkt.wirelen,
            linktype: pkt.linktype,
            ts_sec: pkt.ts_sec,
            ts_nsec: pkt.ts_nsec,
            big_endian: false,
        };
        self.dirty = true;
        for s in &mut self.stages {
            s.mbuf.begin();
            let r = s.elem.run(&p, &s.mbuf);
            s.mbuf.end();
            match r {
                Ok(0) => return Ok(false),
                Ok(_) => {}
                Err(e) => {
                    let msg = format!("{}: {e}", s.class);
                    self.failed = Some(msg.clone());
                    return Err(msg);
                }
            }
        }
        Ok(true)
    }

    /// Elements that work on a private copy publish it to their MBuf
    /// (after each read of the ring, and before a report).
    pub(crate) fn sync(&mut self) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        for s in &mut self.stages {
            s.elem.sync(&s.mbuf);
        }
    }

    /// What each element reports (counters, top flows), as JSON.
    pub(crate) fn reports(&mut self) -> serde_json::Value {
        self.sync();
        let list: Vec<serde_json::Value> = self
            .stages
            .iter()
            .map(|s| {
                let report = serde_json::from_str(&s.elem.report(&s.mbuf).to_json())
                    .unwrap_or(serde_json::Value::Null);
                serde_json::json!({ "class": s.class, "report": report })
            })
            .collect();
        serde_json::Value::Array(list)
    }

    /// The memories, for the client: what each is, and a read-only
    /// descriptor of each.
    pub(crate) fn memories(&self) -> std::io::Result<(Vec<Memory>, Vec<OwnedFd>)> {
        let mut list = Vec::new();
        let mut fds = Vec::new();
        for s in &self.stages {
            let region = s
                .mbuf
                .region()
                .ok_or_else(|| std::io::Error::other("an element's memory is not shared"))?;
            list.push(Memory {
                class: s.class.clone(),
                words: s.mbuf.len() as u64,
            });
            fds.push(region.read_only_fd()?);
        }
        Ok((list, fds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(text: &str) -> sluice_flow::spec::Element {
        let g = sluice_flow::spec::parse(&format!("(iface,x) -> {text}")).unwrap();
        g.stages[1][0].clone()
    }

    #[test]
    fn a_hash_counter_counts_in_shared_memory() {
        let a = check(&element("(hashcount,3,64)")).unwrap();
        assert_eq!((a.class.as_str(), a.words), ("hashcount", 8 + 16 * 64));
        let mut c = Chain::build(&[a], 1).unwrap();
        // An Ethernet/IPv4/TCP frame, 10.0.0.1:1000 -> 10.0.0.2:80.
        let mut f = vec![0u8; 54];
        f[12] = 8;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        let pkt = Packet::new(1, 0, 1, &f);
        for _ in 0..3 {
            // hashcount passes nothing on without `pass`.
            assert!(!c.passes(&pkt).unwrap());
        }
        let (mem, fds) = c.memories().unwrap();
        assert_eq!(mem.len(), 1);
        let region = sluice_shm::Region::map(fds.into_iter().next().unwrap(), false).unwrap();
        let seen = MBuf::attach(Arc::new(region)).unwrap();
        let top = sluice_flow::stats::top_n(&seen.snapshot(), 3);
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].packets, 3);
        assert_eq!(c.reports()[0]["report"]["top"][0]["packets"], 3);
    }

    #[test]
    fn files_and_sources_are_refused_with_their_column() {
        let (col, msg) = check(&element("(FPL-2,@/etc/shadow)")).unwrap_err();
        assert!(msg.contains("never opens files"), "{msg}");
        assert_eq!(col, 21); // the argument, after "(iface,x) -> (FPL-2,"
        let (_, msg) = check(&element("(file,/etc/passwd)")).unwrap_err();
        assert!(msg.contains("packet source"), "{msg}");
        let (_, msg) = check(&element("(hashcount,x)")).unwrap_err();
        assert!(msg.starts_with("hashcount: "), "{msg}");
    }

    #[test]
    fn a_sampler_passes_one_in_n() {
        let a = check(&element("(sampler,2)")).unwrap();
        let mut c = Chain::build(&[a], 1).unwrap();
        let pkt = Packet::new(1, 0, 1, &[0; 60]);
        let passed = (0..10).filter(|_| c.passes(&pkt).unwrap()).count();
        assert_eq!(passed, 5);
    }
}
