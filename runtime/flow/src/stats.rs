//! Stateful classes that keep their tables in MBuf: the hash counter with
//! top-N flows (FFPF Figure 2b) and the RTSP dynamic-port tracker (§3.3.2).
//!
//! # `(hashcount,TOPN[,SLOTS][,pass])`
//!
//! Counts packets and wire bytes per transport flow (IPv4/IPv6 addresses,
//! protocol, ports, one direction) in an open-addressing hash table in the
//! MBuf, and reports the `TOPN` most active flows (by packets, then bytes).
//! MBuf layout, 32-bit words: a header of [`HASH_HEADER`] words (0: slots,
//! 1: flows in the table, 2–3: packets not counted because their probe
//! sequence was full, 4–5: packets without an IP flow key), then `SLOTS`
//! entries of [`HASH_ENTRY`] words: 0: used (bit 31), family (bits 8–15),
//! protocol (bits 0–7); 1: source port << 16 | destination port; 2–5 source
//! address; 6–9 destination address (IPv4 in word 2 / 6, network order as
//! bytes in memory order); 10–11 packets; 12–13 bytes; 14 the key's hash.
//! The hash is FNV-1a over the key; probing is linear, at most 16 slots.
//! [`top_n`] reads a table from an MBuf snapshot, as an application would.
//! Default `SLOTS`: 4096.
//!
//! # `(rtsp[,control][,SLOTS])`
//!
//! Watches RTSP (TCP port 554) for `SETUP` requests and their `2xx`
//! replies, takes the `client_port=` and `server_port=` ranges of their
//! `Transport:` header, and from then on passes the packets (UDP or TCP)
//! between the two hosts on those ports: the RTP and RTCP streams the
//! session set up. With `control` it passes the RTSP packets too. Result:
//! 1 for a stream packet, 2 for an RTSP packet. MBuf: 4 header words (0:
//! slots, 1: sessions recorded, 2–3: stream packets passed), then `SLOTS`
//! sessions of [`RTSP_ENTRY`] words: 0: used (bit 31), server ports known
//! (bit 0), family (bits 8–15); 1: client ports first << 16 | last; 2:
//! server ports first << 16 | last; 3: a hash of the RTSP session id
//! (`Session:` of the reply; 0 while unknown); 4–7 client address; 8–11
//! server address. A `TEARDOWN` request ends the session it names (every
//! session between the two hosts if it names none): its streams stop
//! passing and its entry is freed. When the table is full the oldest
//! session is replaced. Default `SLOTS`: 64.

use crate::buffer::MBuf;
use crate::class::{at_most, number, ArgError, BuildEnv, ClassInfo, Element, FilterClass, Pkt};
use crate::net::{five_tuple, payload, FiveTuple};
use crate::value::Value;

/// Header words of a hashcount MBuf.
pub const HASH_HEADER: usize = 8;
/// Words per hashcount entry.
pub const HASH_ENTRY: usize = 16;
/// Words per rtsp session.
pub const RTSP_ENTRY: usize = 12;
const PROBES: usize = 16;

/// The `hashcount` class.
///
/// ```
/// use sluice_flow::class::FilterClass;
/// let i = sluice_flow::stats::HashCountClass.check(&["10".into(), "256".into()]).unwrap();
/// assert_eq!(i.mbuf_words, 8 + 16 * 256);
/// ```
pub struct HashCountClass;

struct HashCount {
    top: usize,
    slots: usize,
    pass: bool,
}

fn hash_args(args: &[String]) -> Result<(usize, usize, bool), ArgError> {
    at_most(args, 3, "(hashcount,TOPN[,SLOTS][,pass])")?;
    let top = number(args, 0, "TOPN")? as usize;
    let slots = match args.get(1).map(String::as_str) {
        None | Some("") => 4096,
        Some(_) => number(args, 1, "SLOTS")? as usize,
    };
    if slots == 0 || slots > 1 << 20 {
        return Err(ArgError::at(1, "SLOTS must be between 1 and 1048576"));
    }
    let pass = match args.get(2).map(|s| s.to_ascii_lowercase()).as_deref() {
        None | Some("") => false,
        Some("pass") => true,
        Some(o) => {
            return Err(ArgError::at(
                2,
                format!("expected nothing or 'pass', found {o:?}"),
            ))
        }
    };
    Ok((top, slots, pass))
}

impl FilterClass for HashCountClass {
    fn name(&self) -> &str {
        "hashcount"
    }
    fn aliases(&self) -> &[&str] {
        &["topn"]
    }
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError> {
        let (_, slots, _) = hash_args(args)?;
        Ok(ClassInfo {
            mbuf_words: HASH_HEADER + HASH_ENTRY * slots,
            externs: vec![],
        })
    }
    fn build(&self, args: &[String], _: &BuildEnv) -> Result<Box<dyn Element>, ArgError> {
        let (top, slots, pass) = hash_args(args)?;
        Ok(Box::new(HashCount { top, slots, pass }))
    }
}

fn fnv(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn key_words(k: &FiveTuple) -> [u32; 10] {
    let mut w = [0u32; 10];
    w[0] = 1 << 31 | (k.family as u32) << 8 | k.proto as u32;
    w[1] = (k.sport as u32) << 16 | k.dport as u32;
    for i in 0..4 {
        w[2 + i] = u32::from_ne_bytes(k.src[4 * i..4 * i + 4].try_into().unwrap_or([0; 4]));
        w[6 + i] = u32::from_ne_bytes(k.dst[4 * i..4 * i + 4].try_into().unwrap_or([0; 4]));
    }
    w
}

fn key_of_words(w: &[u32]) -> FiveTuple {
    let mut k = FiveTuple {
        family: (w[0] >> 8) as u8,
        proto: w[0] as u8,
        sport: (w[1] >> 16) as u16,
        dport: w[1] as u16,
        ..FiveTuple::default()
    };
    for i in 0..4 {
        k.src[4 * i..4 * i + 4].copy_from_slice(&w[2 + i].to_ne_bytes());
        k.dst[4 * i..4 * i + 4].copy_from_slice(&w[6 + i].to_ne_bytes());
    }
    k
}

/// One counted flow.
///
/// ```
/// let f = sluice_flow::stats::FlowCount { key: Default::default(), packets: 2, bytes: 120 };
/// assert_eq!(f.packets, 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowCount {
    /// The flow.
    pub key: FiveTuple,
    /// Packets counted.
    pub packets: u64,
    /// Wire bytes counted.
    pub bytes: u64,
}

/// The `n` most active flows of a hashcount table (an MBuf snapshot), by
/// packets, then bytes, then key.
///
/// ```
/// let words = vec![0u32; 8 + 16 * 4];
/// assert!(sluice_flow::stats::top_n(&words, 10).is_empty());
/// ```
pub fn top_n(words: &[u32], n: usize) -> Vec<FlowCount> {
    let mut all: Vec<FlowCount> = words
        .get(HASH_HEADER..)
        .unwrap_or(&[])
        .chunks_exact(HASH_ENTRY)
        .filter(|e| e[0] >> 31 == 1)
        .map(|e| FlowCount {
            key: key_of_words(e),
            packets: e[10] as u64 | (e[11] as u64) << 32,
            bytes: e[12] as u64 | (e[13] as u64) << 32,
        })
        .collect();
    all.sort_by(|a, b| {
        (b.packets, b.bytes)
            .cmp(&(a.packets, a.bytes))
            .then_with(|| {
                (
                    a.key.family,
                    a.key.proto,
                    a.key.src,
                    a.key.dst,
                    a.key.sport,
                    a.key.dport,
                )
                    .cmp(&(
                        b.key.family,
                        b.key.proto,
                        b.key.src,
                        b.key.dst,
                        b.key.sport,
                        b.key.dport,
                    ))
            })
    });
    all.truncate(n);
    all
}

impl Element for HashCount {
    fn run(&mut self, pkt: &Pkt<'_>, mem: &MBuf) -> Result<u32, String> {
        mem.set(0, self.slots as u32);
        let Some((k, _)) = five_tuple(pkt.linktype, pkt.data) else {
            mem.add_u64(4, 1);
            return Ok(self.pass as u32);
        };
        let kw = key_words(&k);
        let mut bytes = [0u8; 40];
        for (i, w) in kw.iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&w.to_ne_bytes());
        }
        let h = fnv(&bytes);
        for probe in 0..PROBES.min(self.slots) {
            let slot = (h as usize + probe) % self.slots;
            let base = HASH_HEADER + slot * HASH_ENTRY;
            let used = mem.get(base) >> 31 == 1;
            if !used {
                for (i, w) in kw.iter().enumerate() {
                    mem.set(base + i, *w);
                }
                mem.set(base + 14, h);
                mem.set(1, mem.get(1) + 1);
            } else if mem.get(base + 14) != h || (0..10).any(|i| mem.get(base + i) != kw[i]) {
                continue;
            }
            mem.add_u64(base + 10, 1);
            mem.add_u64(base + 12, pkt.wirelen as u64);
            return Ok(self.pass as u32);
        }
        mem.add_u64(2, 1);
        Ok(self.pass as u32)
    }

    fn takes_all(&self) -> bool {
        true
    }

    fn report(&self, mem: &MBuf) -> Value {
        let words = mem.snapshot();
        let top = top_n(&words, self.top);
        Value::map([
            (
                "flows",
                Value::U64(words.get(1).copied().unwrap_or(0) as u64),
            ),
            ("overflow", Value::U64(mem.load_u64(2))),
            ("not_ip", Value::U64(mem.load_u64(4))),
            (
                "top",
                Value::List(
                    top.iter()
                        .map(|f| {
                            Value::map([
                                ("flow", Value::Str(f.key.to_string())),
                                ("packets", Value::U64(f.packets)),
                                ("bytes", Value::U64(f.bytes)),
                            ])
                        })
                        .collect(),
                ),
            ),
        ])
    }
}

/// The `rtsp` class.
///
/// ```
/// use sluice_flow::class::FilterClass;
/// let i = sluice_flow::stats::RtspClass.check(&["control".into()]).unwrap();
/// assert_eq!(i.mbuf_words, 4 + 12 * 64);
/// ```
pub struct RtspClass;

struct Rtsp {
    control: bool,
    slots: usize,
    setups: u64,
    replies: u64,
    teardowns: u64,
}

fn rtsp_args(args: &[String]) -> Result<(bool, usize), ArgError> {
    at_most(args, 2, "(rtsp[,control][,SLOTS])")?;
    let control = match args.first().map(|s| s.to_ascii_lowercase()).as_deref() {
        None | Some("") => false,
        Some("control") => true,
        Some(o) => {
            return Err(ArgError::at(
                0,
                format!("expected nothing or 'control', found {o:?}"),
            ))
        }
    };
    let slots = match args.get(1).map(String::as_str) {
        None | Some("") => 64,
        Some(_) => number(args, 1, "SLOTS")? as usize,
    };
    if slots == 0 || slots > 65536 {
        return Err(ArgError::at(1, "SLOTS must be between 1 and 65536"));
    }
    Ok((control, slots))
}

impl FilterClass for RtspClass {
    fn name(&self) -> &str {
        "rtsp"
    }
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError> {
        let (_, slots) = rtsp_args(args)?;
        Ok(ClassInfo {
            mbuf_words: 4 + RTSP_ENTRY * slots,
            externs: vec![],
        })
    }
    fn build(&self, args: &[String], _: &BuildEnv) -> Result<Box<dyn Element>, ArgError> {
        let (control, slots) = rtsp_args(args)?;
        Ok(Box::new(Rtsp {
            control,
            slots,
            setups: 0,
            replies: 0,
            teardowns: 0,
        }))
    }
}

/// A port range `a` or `a-b` at the start of `s`.
fn port_range(s: &str) -> Option<(u16, u16)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(s.len());
    let r = &s[..end];
    let mut it = r.splitn(2, '-');
    let a: u16 = it.next()?.parse().ok()?;
    let b: u16 = match it.next() {
        Some(b) => b.parse().ok()?,
        None => a,
    };
    (a <= b).then_some((a, b))
}

/// The `client_port` and `server_port` ranges of an RTSP message's
/// `Transport:` header.
///
/// ```
/// let m = "SETUP rtsp://x/a RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP;unicast;client_port=8000-8001\r\n\r\n";
/// assert_eq!(sluice_flow::stats::transport_ports(m), Some((Some((8000, 8001)), None)));
/// ```
#[allow(clippy::type_complexity)]
pub fn transport_ports(msg: &str) -> Option<(Option<(u16, u16)>, Option<(u16, u16)>)> {
    let line = msg
        .split('\n')
        .find(|l| l.len() >= 10 && l.as_bytes()[..10].eq_ignore_ascii_case(b"transport:"))?;
    let mut client = None;
    let mut server = None;
    for param in line[10..].split([';', ',']) {
        let p = param.trim();
        if let Some(v) = p.strip_prefix("client_port=") {
            client = client.or(port_range(v));
        } else if let Some(v) = p.strip_prefix("server_port=") {
            server = server.or(port_range(v));
        }
    }
    (client.is_some() || server.is_some()).then_some((client, server))
}

/// The session id of an RTSP message's `Session:` header (without its
/// `;timeout=` parameter).
///
/// ```
/// let m = "TEARDOWN rtsp://x/a RTSP/1.0\r\nCSeq: 9\r\nSession: 4711;timeout=60\r\n\r\n";
/// assert_eq!(sluice_flow::stats::session_id(m), Some("4711"));
/// ```
pub fn session_id(msg: &str) -> Option<&str> {
    let line = msg
        .split('\n')
        .find(|l| l.len() >= 8 && l.as_bytes()[..8].eq_ignore_ascii_case(b"session:"))?;
    let id = line[8..].split(';').next()?.trim();
    (!id.is_empty()).then_some(id)
}

/// A session id as the MBuf holds it: never 0 (0 is "not known").
fn session_word(id: &str) -> u32 {
    // FNV-1a.
    let h = id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    h.max(1)
}

fn addr_words(a: &[u8; 16]) -> [u32; 4] {
    let mut w = [0u32; 4];
    for (i, x) in w.iter_mut().enumerate() {
        *x = u32::from_ne_bytes(a[4 * i..4 * i + 4].try_into().unwrap_or([0; 4]));
    }
    w
}

impl Rtsp {
    fn entry(&self, i: usize) -> usize {
        4 + i * RTSP_ENTRY
    }

    fn same_addr(mem: &MBuf, at: usize, a: &[u32; 4]) -> bool {
        (0..4).all(|i| mem.get(at + i) == a[i])
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        mem: &MBuf,
        family: u8,
        client: &[u8; 16],
        server: &[u8; 16],
        cp: (u16, u16),
        sp: Option<(u16, u16)>,
        session: u32,
    ) {
        let (cw, sw) = (addr_words(client), addr_words(server));
        let cports = (cp.0 as u32) << 16 | cp.1 as u32;
        // The session already recorded (a reply after its SETUP)?
        let mut slot = None;
        for i in 0..self.slots {
            let e = self.entry(i);
            if mem.get(e) >> 31 == 1
                && mem.get(e + 1) == cports
                && Self::same_addr(mem, e + 4, &cw)
                && Self::same_addr(mem, e + 8, &sw)
            {
                slot = Some(i);
                break;
            }
        }
        let i = slot.unwrap_or_else(|| {
            let n = mem.get(1) as usize;
            mem.set(1, mem.get(1).wrapping_add(1));
            n % self.slots
        });
        let e = self.entry(i);
        let known = match sp {
            Some(_) => 1,
            None if slot.is_some() => mem.get(e) & 1,
            None => 0,
        };
        mem.set(e, 1 << 31 | (family as u32) << 8 | known);
        mem.set(e + 1, cports);
        if let Some(sp) = sp {
            mem.set(e + 2, (sp.0 as u32) << 16 | sp.1 as u32);
        } else if slot.is_none() {
            mem.set(e + 2, 0);
        }
        if session != 0 || slot.is_none() {
            mem.set(e + 3, session);
        }
        for k in 0..4 {
            mem.set(e + 4 + k, cw[k]);
            mem.set(e + 8 + k, sw[k]);
        }
    }

    /// End the sessions between `client` and `server` that `session`
    /// names (every one between them when `session` is 0); how many.
    fn teardown(&self, mem: &MBuf, client: &[u8; 16], server: &[u8; 16], session: u32) -> u64 {
        let (cw, sw) = (addr_words(client), addr_words(server));
        let mut ended = 0;
        for i in 0..self.slots {
            let e = self.entry(i);
            if mem.get(e) >> 31 == 1
                && Self::same_addr(mem, e + 4, &cw)
                && Self::same_addr(mem, e + 8, &sw)
                && (session == 0 || mem.get(e + 3) == session)
            {
                mem.set(e, 0);
                ended += 1;
            }
        }
        ended
    }

    fn in_range(port: u16, r: u32) -> bool {
        let (a, b) = ((r >> 16) as u16, r as u16);
        a <= port && port <= b
    }

    fn is_stream(&self, mem: &MBuf, k: &FiveTuple) -> bool {
        let used = (mem.get(1) as usize).min(self.slots);
        let (s, d) = (addr_words(&k.src), addr_words(&k.dst));
        for i in 0..used {
            let e = self.entry(i);
            let flags = mem.get(e);
            if flags >> 31 == 0 {
                continue;
            }
            let known = flags & 1 == 1;
            let (cp, sp) = (mem.get(e + 1), mem.get(e + 2));
            // Server to client.
            if Self::same_addr(mem, e + 8, &s)
                && Self::same_addr(mem, e + 4, &d)
                && Self::in_range(k.dport, cp)
                && (!known || Self::in_range(k.sport, sp))
            {
                return true;
            }
            // Client to server.
            if Self::same_addr(mem, e + 4, &s)
                && Self::same_addr(mem, e + 8, &d)
                && Self::in_range(k.sport, cp)
                && (!known || Self::in_range(k.dport, sp))
            {
                return true;
            }
        }
        false
    }
}

impl Element for Rtsp {
    fn run(&mut self, pkt: &Pkt<'_>, mem: &MBuf) -> Result<u32, String> {
        mem.set(0, self.slots as u32);
        let Some((k, body)) = payload(pkt.linktype, pkt.data) else {
            return Ok(0);
        };
        if k.proto == 6 && (k.sport == 554 || k.dport == 554) {
            let text = String::from_utf8_lossy(body);
            let session = session_id(&text).map_or(0, session_word);
            if k.dport == 554 && text.starts_with("SETUP ") {
                if let Some((Some(cp), sp)) = transport_ports(&text) {
                    self.setups += 1;
                    self.record(mem, k.family, &k.src, &k.dst, cp, sp, session);
                }
            } else if k.dport == 554 && text.starts_with("TEARDOWN ") {
                self.teardowns += self.teardown(mem, &k.src, &k.dst, session);
            } else if k.sport == 554 && text.starts_with("RTSP/") {
                let ok = text.split(' ').nth(1).is_some_and(|c| c.starts_with('2'));
                if let (true, Some((Some(cp), sp))) = (ok, transport_ports(&text)) {
                    self.replies += 1;
                    self.record(mem, k.family, &k.dst, &k.src, cp, sp, session);
                }
            }
            return Ok(if self.control { 2 } else { 0 });
        }
        if matches!(k.proto, 6 | 17) && self.is_stream(mem, &k) {
            mem.add_u64(2, 1);
            return Ok(1);
        }
        Ok(0)
    }

    fn report(&self, mem: &MBuf) -> Value {
        let words = mem.snapshot();
        let mut sessions = Vec::new();
        for i in 0..self.slots {
            let e = self.entry(i);
            let Some(w) = words.get(e..e + RTSP_ENTRY) else {
                break;
            };
            if w[0] >> 31 == 0 {
                continue;
            }
            let fam = (w[0] >> 8) as u8;
            let addr = |at: usize| {
                let mut a = [0u8; 16];
                for k in 0..4 {
                    a[4 * k..4 * k + 4].copy_from_slice(&w[at + k].to_ne_bytes());
                }
                if fam == 6 {
                    std::net::Ipv6Addr::from(a).to_string()
                } else {
                    std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()
                }
            };
            let range = |r: u32| format!("{}-{}", r >> 16, r & 0xffff);
            sessions.push(Value::map([
                ("client", Value::Str(format!("{}:{}", addr(4), range(w[1])))),
                (
                    "server",
                    Value::Str(if w[0] & 1 == 1 {
                        format!("{}:{}", addr(8), range(w[2]))
                    } else {
                        format!("{}:?", addr(8))
                    }),
                ),
            ]));
        }
        Value::map([
            ("setups", Value::U64(self.setups)),
            ("replies", Value::U64(self.replies)),
            ("teardowns", Value::U64(self.teardowns)),
            ("stream_packets", Value::U64(mem.load_u64(2))),
            ("sessions", Value::List(sessions)),
        ])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An Ethernet/IPv4 packet with a TCP or UDP header and payload.
    pub(crate) fn ipv4(
        proto: u8,
        src: [u8; 4],
        sport: u16,
        dst: [u8; 4],
        dport: u16,
        body: &[u8],
    ) -> Vec<u8> {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&[0x08, 0x00]);
        let th = if proto == 6 { 20 } else { 8 };
        let total = 20 + th + body.len();
        p.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0x40,
            0,
            64,
            proto,
            0,
            0,
        ]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        if proto == 6 {
            p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        } else {
            p.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
            p.extend_from_slice(&[0, 0]);
        }
        p.extend_from_slice(body);
        p
    }

    fn pkt(data: &[u8]) -> Pkt<'_> {
        Pkt {
            data,
            wirelen: data.len() as u32,
            linktype: 1,
            ts_sec: 0,
            ts_nsec: 0,
            big_endian: false,
        }
    }

    /// An instance of `class` with `args`, and an MBuf of the size it asks for.
    fn instance(class: &dyn FilterClass, args: &[&str]) -> (MBuf, Box<dyn Element>) {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let m = MBuf::new(class.check(&args).unwrap().mbuf_words);
        (m, class.build(&args, &BuildEnv::default()).unwrap())
    }

    #[test]
    fn hashcount_counts_flows_and_ranks_them() {
        let (m, mut h) = instance(&HashCountClass, &["2", "8"]);
        let a = ipv4(6, [10, 0, 0, 1], 1000, [10, 0, 0, 2], 80, b"x");
        let b = ipv4(17, [10, 0, 0, 3], 53, [10, 0, 0, 4], 999, b"yy");
        let c = ipv4(6, [10, 0, 0, 2], 80, [10, 0, 0, 1], 1000, b"");
        for p in [&a, &b, &a, &c, &a, &b] {
            m.begin();
            assert_eq!(h.run(&pkt(p), &m).unwrap(), 0);
            m.end();
        }
        m.begin();
        h.run(&pkt(&[0u8; 20]), &m).unwrap();
        m.end();
        let top = top_n(&m.snapshot(), 10);
        assert_eq!(top.len(), 3);
        assert_eq!(top[0].packets, 3);
        assert_eq!(top[0].key.to_string(), "10.0.0.1:1000 > 10.0.0.2:80 tcp");
        assert_eq!(top[0].bytes, 3 * a.len() as u64);
        assert_eq!(top[1].packets, 2);
        let r = h.report(&m);
        assert_eq!(r.get("flows"), Some(&Value::U64(3)));
        assert_eq!(r.get("not_ip"), Some(&Value::U64(1)));
        match r.get("top") {
            Some(Value::List(l)) => assert_eq!(l.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hashcount_overflow_is_counted() {
        let (m, mut h) = instance(&HashCountClass, &["1", "2"]);
        for port in 0..5u16 {
            h.run(
                &pkt(&ipv4(17, [1, 1, 1, 1], port, [2, 2, 2, 2], 9, b"")),
                &m,
            )
            .unwrap();
        }
        assert_eq!(m.load_u64(2), 3);
        assert_eq!(top_n(&m.snapshot(), 9).len(), 2);
    }

    #[test]
    fn rtsp_tracks_negotiated_ports() {
        let client = [192, 168, 0, 10];
        let server = [192, 168, 0, 1];
        let (m, mut r) = instance(&RtspClass, &[]);
        let mut run = |p: &[u8]| r.run(&pkt(p), &m).unwrap();
        // Before the SETUP, nothing passes.
        assert_eq!(run(&ipv4(17, server, 6970, client, 8000, b"rtp")), 0);
        let setup = b"SETUP rtsp://s/a/track1 RTSP/1.0\r\nCSeq: 2\r\nTransport: RTP/AVP;unicast;client_port=8000-8001\r\n\r\n";
        assert_eq!(run(&ipv4(6, client, 40000, server, 554, setup)), 0);
        // Client ports known, server ports not yet: server -> client to 8000 passes.
        assert_eq!(run(&ipv4(17, server, 7000, client, 8000, b"rtp")), 1);
        let reply = b"RTSP/1.0 200 OK\r\nCSeq: 2\r\nTransport: RTP/AVP;unicast;client_port=8000-8001;server_port=6970-6971\r\nSession: 1\r\n\r\n";
        assert_eq!(run(&ipv4(6, server, 554, client, 40000, reply)), 0);
        assert_eq!(run(&ipv4(17, server, 6970, client, 8000, b"rtp")), 1);
        assert_eq!(run(&ipv4(17, client, 8001, server, 6971, b"rtcp")), 1);
        // Wrong server port, other host, other client port: no.
        assert_eq!(run(&ipv4(17, server, 7000, client, 8000, b"rtp")), 0);
        assert_eq!(run(&ipv4(17, [1, 2, 3, 4], 6970, client, 8000, b"rtp")), 0);
        assert_eq!(run(&ipv4(17, server, 6970, client, 8002, b"rtp")), 0);
        let rep = r.report(&m);
        assert_eq!(rep.get("stream_packets"), Some(&Value::U64(3)));
        assert_eq!(rep.get("setups"), Some(&Value::U64(1)));
        match rep.get("sessions") {
            Some(Value::List(l)) => {
                assert_eq!(l.len(), 1);
                assert_eq!(
                    l[0].get("server"),
                    Some(&Value::Str("192.168.0.1:6970-6971".into()))
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// A TEARDOWN naming the session ends its streams and frees its entry;
    /// one naming another session, or between other hosts, ends nothing.
    #[test]
    fn rtsp_teardown_ends_the_named_session() {
        let client = [192, 168, 0, 10];
        let server = [192, 168, 0, 1];
        let (m, mut r) = instance(&RtspClass, &[]);
        let run = |r: &mut Box<dyn Element>, p: &[u8]| r.run(&pkt(p), &m).unwrap();
        for (cport, session) in [(8000u16, "AB12"), (8002, "CD34")] {
            let setup = format!("SETUP rtsp://s/a RTSP/1.0\r\nCSeq: 2\r\nTransport: RTP/AVP;unicast;client_port={cport}-{}\r\n\r\n", cport + 1);
            run(
                &mut r,
                &ipv4(6, client, 40000, server, 554, setup.as_bytes()),
            );
            let reply = format!("RTSP/1.0 200 OK\r\nCSeq: 2\r\nTransport: RTP/AVP;unicast;client_port={cport}-{};server_port=6970-6971\r\nSession: {session};timeout=60\r\n\r\n", cport + 1);
            run(
                &mut r,
                &ipv4(6, server, 554, client, 40000, reply.as_bytes()),
            );
        }
        let rtp = |port| ipv4(17, server, 6970, client, port, b"rtp");
        assert_eq!((run(&mut r, &rtp(8000)), run(&mut r, &rtp(8002))), (1, 1));
        // Another session's id, or other hosts: nothing ends.
        let other = b"TEARDOWN rtsp://s/a RTSP/1.0\r\nCSeq: 5\r\nSession: ZZ99\r\n\r\n";
        run(&mut r, &ipv4(6, client, 40000, server, 554, other));
        run(
            &mut r,
            &ipv4(
                6,
                [10, 0, 0, 9],
                40000,
                server,
                554,
                b"TEARDOWN rtsp://s/a RTSP/1.0\r\nCSeq: 5\r\n\r\n",
            ),
        );
        assert_eq!((run(&mut r, &rtp(8000)), run(&mut r, &rtp(8002))), (1, 1));
        let down = b"TEARDOWN rtsp://s/a RTSP/1.0\r\nCSeq: 6\r\nSession: AB12\r\n\r\n";
        assert_eq!(run(&mut r, &ipv4(6, client, 40000, server, 554, down)), 0);
        assert_eq!((run(&mut r, &rtp(8000)), run(&mut r, &rtp(8002))), (0, 1));
        let rep = r.report(&m);
        assert_eq!(rep.get("teardowns"), Some(&Value::U64(1)));
        match rep.get("sessions") {
            Some(Value::List(l)) => assert_eq!(l.len(), 1),
            other => panic!("{other:?}"),
        }
        // Without a Session header: every session between the two hosts.
        run(
            &mut r,
            &ipv4(
                6,
                client,
                40000,
                server,
                554,
                b"TEARDOWN rtsp://s/a RTSP/1.0\r\nCSeq: 7\r\n\r\n",
            ),
        );
        assert_eq!(run(&mut r, &rtp(8002)), 0);
        assert_eq!(r.report(&m).get("teardowns"), Some(&Value::U64(2)));
    }

    #[test]
    fn transport_header_parsing() {
        assert_eq!(
            transport_ports("Transport: RTP/AVP;client_port=1-2;server_port=3\r\n"),
            Some((Some((1, 2)), Some((3, 3))))
        );
        assert_eq!(transport_ports("transport: x;client_port=9-1\n"), None);
        assert_eq!(transport_ports("CSeq: 1\n"), None);
    }
}
