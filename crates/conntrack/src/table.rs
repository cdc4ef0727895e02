//! The connection table every worker shares, and the tracker's per-packet work.
//!
//! Connections live in a slab of slots, each behind its own small lock; an index of
//! hashed tuples (both directions of every connection) names the slots. A packet hashes
//! its tuple once, finds candidate slots in the index without a lock, and locks the one
//! slot whose connection has its tuple. Creating a connection claims its tuples under the
//! index shards' writer locks. See `docs/conntrack.md`.

use crate::config::CtConfig;
use crate::conn::{write_conn_fields, Conn, Life, Nat, Slab};
use crate::hint::{at_hint, ConnHint, Found};
use crate::icmp::{self, IcmpKind};
use crate::index::Index;
use crate::info::Counters;
use crate::nat::{self, Rewrite};
use crate::nat_alloc::NatPlan;
use crate::tcp::{Segment, TcpConn, TcpVerdict};
use crate::tuple::Tuple;
use crate::zones::Zones;
use crate::InvalidReason;
use flowpath_packet::ct::{state, NatKind};
use flowpath_packet::key::{ethertype, ipproto, FRAG_ANY};
use flowpath_packet::{CtSpec, Field, FlowKey, PacketMeta};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// The connection tracker: one per switch, shared by its workers.
pub struct Tracker {
    pub(crate) cfg: CtConfig,
    pub(crate) max: u32,
    epoch: Instant,
    pub(crate) seed: u64,
    pub(crate) index: Index,
    pub(crate) slab: Slab,
    /// Connections in the table (and creations under way).
    pub(crate) count: AtomicU32,
    pub(crate) zones: OnceLock<Zones>,
    pub(crate) default_zone_limit: AtomicU32,
    pub(crate) stats: Counters,
    /// The state of the `random` NAT generator (SplitMix64 stepped atomically).
    rng: AtomicU64,
    /// Where the incremental expiry scan resumes.
    pub(crate) cursor: Mutex<u32>,
}

/// The most connections a tracker holds, whatever the configuration asks (its index is
/// 2 GB of address space, faulted in as used).
pub const MAX_CONNECTIONS: u32 = 1 << 26;

/// How often a packet retries lookup-then-create when another worker is creating the
/// same connection (or one that uses its reply tuple) at the same moment.
const RACE_TRIES: usize = 4;

/// Which of its tuples a creation found taken: the original (another worker is creating
/// this very connection) or the reply (maybe another connection's NAT'd tuple).
#[derive(Clone, Copy, Debug)]
enum Lost {
    Orig,
    Reply,
}

impl Tracker {
    pub fn new(cfg: CtConfig) -> Tracker {
        let max = match cfg.max_connections {
            0 => 1 << 20,
            m => m.min(MAX_CONNECTIONS),
        };
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let t = Tracker {
            max,
            epoch: Instant::now(),
            seed,
            index: Index::new(max as usize),
            slab: Slab::new(max),
            count: AtomicU32::new(0),
            zones: OnceLock::new(),
            default_zone_limit: AtomicU32::new(cfg.default_zone_limit),
            stats: Counters::default(),
            rng: AtomicU64::new(seed.rotate_left(17)),
            cursor: Mutex::new(0),
            cfg,
        };
        for (&z, &l) in &t.cfg.zone_limits {
            t.zones().set_own(z, Some(l));
        }
        t
    }

    pub(crate) fn zones(&self) -> &Zones {
        self.zones.get_or_init(Zones::new)
    }

    /// Milliseconds since the tracker was made: the clock `execute` and `expire` take.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Run one packet through the tracker as `spec` says and set its ct fields in `key`;
    /// returns the packet's `ct_state`.
    pub fn execute(
        &self,
        frame: &mut [u8],
        meta: &PacketMeta,
        key: &mut FlowKey,
        spec: &CtSpec,
        now_ms: u64,
    ) -> u8 {
        self.execute_hinted(None, frame, meta, key, spec, now_ms).0
    }

    /// [`Tracker::execute`], trying `hint`'s connection before the index (a worker's
    /// memory of the connection this flow's last packet belonged to; verified under the
    /// slot's lock, so a stale hint only costs the lookup it meant to save). Also returns
    /// the hint for the connection that answered, if an existing one did.
    pub fn execute_hinted(
        &self,
        hint: Option<ConnHint>,
        frame: &mut [u8],
        meta: &PacketMeta,
        key: &mut FlowKey,
        spec: &CtSpec,
        now_ms: u64,
    ) -> (u8, Option<ConnHint>) {
        let zone = spec.zone.zone(key);
        let mut found = None;
        let st = match self.track(frame, meta, key, spec, zone, now_ms, (hint, &mut found)) {
            Ok(st) => st,
            Err(why) => {
                self.stats.invalid(why);
                write_conn_fields(key, &Conn::FREE.orig, 0, 0);
                found = None;
                state::TRACKED | state::INVALID
            }
        };
        key.set(Field::CtState, st as u128);
        key.set(Field::CtZone, zone as u128);
        (st, found)
    }

    #[allow(clippy::too_many_arguments)]
    fn track(
        &self,
        frame: &mut [u8],
        meta: &PacketMeta,
        key: &mut FlowKey,
        spec: &CtSpec,
        zone: u16,
        now_ms: u64,
        (hint, found): (Option<ConnHint>, &mut Option<ConnHint>),
    ) -> Result<u8, InvalidReason> {
        let ipv6 = match key.get(Field::EthType) as u16 {
            ethertype::IPV4 => false,
            ethertype::IPV6 => true,
            _ => return Err(InvalidReason::Malformed),
        };
        if key.get(Field::NwFrag) as u8 & FRAG_ANY != 0 {
            return Err(InvalidReason::Fragment);
        }
        let proto = key.get(Field::NwProto) as u8;
        let icmp_proto = if ipv6 { ipproto::ICMPV6 } else { ipproto::ICMP };
        let kind = (proto == icmp_proto).then(|| icmp::kind(proto, key.get(Field::TpSrc) as u8));
        match kind {
            Some(IcmpKind::Error) => return self.related(frame, meta, key, spec, zone, ipv6),
            Some(IcmpKind::Other) => return Err(InvalidReason::Malformed),
            _ => {}
        }
        if matches!(proto, ipproto::ICMP | ipproto::ICMPV6) && proto != icmp_proto {
            return Err(InvalidReason::Malformed);
        }
        let t = Tuple::of_packet(frame, meta, key, zone)?;
        let seg = if proto == ipproto::TCP {
            let end = l3_end(frame, meta.l3 as usize, ipv6);
            Some(Segment::parse(frame, meta.l4 as usize, end).ok_or(InvalidReason::Malformed)?)
        } else {
            None
        };
        let mut pkt = Pkt { frame, meta, key };
        if let Some(at) = hint.and_then(|hn| at_hint(&self.slab, hn, &t)) {
            let hn = ConnHint::of(&at);
            if let Some(st) = self.update(at, pkt.reborrow(), seg, spec, now_ms)? {
                *found = Some(hn);
                return Ok(st);
            }
        }
        let h = t.hash(self.seed);
        let mut lost = Lost::Orig;
        for attempt in 0..RACE_TRIES {
            if attempt > 0 {
                self.back_off(attempt);
            }
            if let Some(at) = self.lookup(&t, h) {
                let hn = ConnHint::of(&at);
                if let Some(st) = self.update(at, pkt.reborrow(), seg, spec, now_ms)? {
                    *found = Some(hn);
                    return Ok(st);
                }
            }
            if kind == Some(IcmpKind::Reply) {
                return Err(InvalidReason::IcmpOrphan);
            }
            match self.create(pkt.reborrow(), t, h, seg, spec, now_ms)? {
                Ok(st) => return Ok(st),
                Err(why) => lost = why,
            }
        }
        match lost {
            // Another worker is creating this connection: this packet stays new.
            Lost::Orig => {
                write_conn_fields(pkt.key, &t, 0, 0);
                Ok(state::TRACKED | state::NEW)
            }
            // This connection's reply tuple is another (NAT'd) connection's.
            Lost::Reply => Err(InvalidReason::NatExhausted),
        }
    }

    /// The live connection with tuple `t` (hash `h`), locked.
    #[inline]
    pub(crate) fn lookup(&self, t: &Tuple, h: u64) -> Option<Found<'_>> {
        self.index.find(h, |slot| {
            let c = self.slab.lock(slot);
            (c.live() && (c.orig == *t || c.reply == *t)).then(|| {
                let reply = c.orig != *t;
                (slot, c, reply)
            })
        })
    }

    /// A packet of an existing connection. `Ok(None)`: the connection ended here (`force`
    /// in its reply direction, a TCP reopen) and the packet starts a new one.
    fn update(
        &self,
        (slot, mut c, reply): Found<'_>,
        pkt: Pkt<'_>,
        seg: Option<Segment>,
        spec: &CtSpec,
        now_ms: u64,
    ) -> Result<Option<u8>, InvalidReason> {
        if spec.force && reply {
            self.kill_locked(slot, c);
            return Ok(None);
        }
        if let (Some(tcp), Some(seg)) = (c.tcp.as_mut(), seg.as_ref()) {
            match tcp.update(reply, seg) {
                TcpVerdict::Ok(_) => {}
                TcpVerdict::Invalid(why) => return Err(why),
                TcpVerdict::Reopen => {
                    self.kill_locked(slot, c);
                    return Ok(None);
                }
            }
        }
        let mut st = state::TRACKED;
        if reply {
            c.seen_reply = true;
            st |= state::REPLY_DIR;
        }
        c.assure();
        st |= if c.established(reply) {
            state::ESTABLISHED
        } else {
            state::NEW
        };
        if spec.commit {
            set_mark_label(&mut c, spec);
        }
        c.expires_ms = now_ms + 1000 * u64::from(c.timeout(&self.cfg.timeouts));
        if spec.nat.is_some() && c.nat != Nat::None {
            let snap = *c;
            drop(c);
            st |= self.apply_nat(pkt.frame, pkt.meta, pkt.key, &snap, reply, false);
            write_conn_fields(pkt.key, &snap.orig, snap.mark, snap.label);
        } else {
            // Written under the slot's lock: no copy of the connection.
            write_conn_fields(pkt.key, &c.orig, c.mark, c.label);
        }
        Ok(Some(st))
    }

    /// A packet no connection has: `+new`, and on `commit` a connection made for it.
    /// `Ok(Err(_))`: a tuple it needs is taken (a race with another worker, or a NAT'd
    /// connection's reply tuple).
    fn create(
        &self,
        pkt: Pkt<'_>,
        t: Tuple,
        h: u64,
        seg: Option<Segment>,
        spec: &CtSpec,
        now_ms: u64,
    ) -> Result<Result<u8, Lost>, InvalidReason> {
        let tcp = match seg {
            Some(s) => Some(TcpConn::new(&s).ok_or(InvalidReason::TcpFlags)?),
            None => None,
        };
        if !spec.commit {
            write_conn_fields(pkt.key, &t, 0, 0);
            return Ok(Ok(state::TRACKED | state::NEW));
        }
        let mut c = Conn {
            orig: t,
            reply: t.reverse(),
            tcp,
            life: Life::Creating,
            ..Conn::FREE
        };
        set_mark_label(&mut c, spec);
        c.expires_ms = now_ms + 1000 * u64::from(c.timeout(&self.cfg.timeouts));
        let slot = self.reserve(t.zone, h)?;
        *self.slab.lock(slot) = c;
        let nat = spec.nat.and_then(|n| n.kind.map(|k| (k, n)));
        let claimed = match nat {
            Some((kind, n)) => self.claim_nat(&t, h, kind, &n, slot),
            None => {
                let r = c.reply;
                self.claim(&r, r.hash(self.seed), slot)
                    .then_some((r, Nat::None))
            }
        };
        let Some((reply, nat_kind)) = claimed else {
            self.unreserve(slot, &[], t.zone);
            return match nat {
                Some(_) => Err(InvalidReason::NatExhausted),
                None => Ok(Err(Lost::Reply)),
            };
        };
        if t != reply && !self.claim(&t, h, slot) {
            self.unreserve(slot, &[reply], t.zone);
            return Ok(Err(Lost::Orig));
        }
        c.reply = reply;
        c.nat = nat_kind;
        c.life = Life::Live;
        *self.slab.lock(slot) = c;
        Counters::bump(&self.stats.created);
        let mut st = state::TRACKED | state::NEW;
        if nat_kind != Nat::None {
            st |= self.apply_nat(pkt.frame, pkt.meta, pkt.key, &c, false, false);
        }
        write_conn_fields(pkt.key, &c.orig, c.mark, c.label);
        Ok(Ok(st))
    }

    /// Claim the first free NAT'd reply tuple the plan offers for `t`.
    fn claim_nat(
        &self,
        t: &Tuple,
        h: u64,
        kind: NatKind,
        spec: &flowpath_packet::ct::NatSpec,
        slot: u32,
    ) -> Option<(Tuple, Nat)> {
        let addr_h = Tuple {
            src_port: 0,
            dst_port: 0,
            ..*t
        }
        .hash(self.seed);
        let plan = NatPlan::new(t, kind, spec, h, addr_h, self.random()).ok()?;
        let nat = match kind {
            NatKind::Src => Nat::Src,
            NatKind::Dst => Nat::Dst,
        };
        let found = plan
            .candidates()
            .map(|x| x.reverse())
            .find(|r| self.claim(r, r.hash(self.seed), slot));
        found.map(|r| (r, nat))
    }

    /// Index `slot` under tuple `r` unless a live or nascent connection already uses `r`
    /// (as either direction); sets the slot's reply tuple first when `r` is not its orig.
    pub(crate) fn claim(&self, r: &Tuple, h: u64, slot: u32) -> bool {
        let g = self.index.lock(h);
        let used = self.index.find(h, |s| {
            if s == slot {
                return None;
            }
            let c = self.slab.lock(s);
            let busy = matches!(c.life, Life::Live | Life::Creating);
            (busy && (c.orig == *r || c.reply == *r)).then_some(())
        });
        if used.is_some() {
            return false;
        }
        {
            let mut c = self.slab.lock(slot);
            if c.orig != *r {
                c.reply = *r;
            }
        }
        self.index.insert(&g, h, slot)
    }

    /// Wait a little after losing a creation race, a random while so that two workers
    /// creating the two directions of one connection at once do not collide again (rare:
    /// the only place the per-packet path may yield the CPU).
    #[cold]
    fn back_off(&self, attempt: usize) {
        for _ in 0..(self.random() % 256) << attempt {
            std::hint::spin_loop();
        }
        if attempt > 1 {
            std::thread::yield_now();
        }
    }

    /// A fresh random word (`nat(random)`).
    pub(crate) fn random(&self) -> u64 {
        let mut s = self.rng.fetch_add(RNG_GAMMA, Ordering::Relaxed);
        s = s.wrapping_add(RNG_GAMMA);
        s = (s ^ (s >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        s = (s ^ (s >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        s ^ (s >> 31)
    }

    /// End the connection in `slot`, whose lock the caller holds.
    pub(crate) fn kill_locked(&self, slot: u32, mut c: MutexGuard<'_, Conn>) {
        c.life = Life::Dying;
        let (orig, reply) = (c.orig, c.reply);
        drop(c);
        self.unreserve(slot, &[orig, reply], orig.zone);
    }

    /// End the connection in `slot` if it is live; false if it was not.
    pub(crate) fn kill(&self, slot: u32) -> bool {
        match self.slab.try_get(slot) {
            Some(c) if c.live() => {
                self.kill_locked(slot, c);
                true
            }
            _ => false,
        }
    }

    /// Unlink `slot` from the index under `tuples`, free it, and give back its place in
    /// the table's and its zone's counts.
    pub(crate) fn unreserve(&self, slot: u32, tuples: &[Tuple], zone: u16) {
        for (i, t) in tuples.iter().enumerate() {
            if !tuples[..i].contains(t) {
                self.index.remove(t.hash(self.seed), slot);
            }
        }
        self.slab.release(slot);
        self.count.fetch_sub(1, Ordering::AcqRel);
        self.zones().count[zone as usize].fetch_sub(1, Ordering::AcqRel);
    }
}

/// SplitMix64's increment (the `random` NAT generator's step; SplitMix64 by hand over an
/// atomic word, so drawing takes no lock).
const RNG_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The packet `execute` works on.
pub(crate) struct Pkt<'a> {
    pub frame: &'a mut [u8],
    pub meta: &'a PacketMeta,
    pub key: &'a mut FlowKey,
}

impl Pkt<'_> {
    fn reborrow(&mut self) -> Pkt<'_> {
        Pkt {
            frame: self.frame,
            meta: self.meta,
            key: self.key,
        }
    }
}

fn set_mark_label(c: &mut Conn, spec: &CtSpec) {
    if let Some((v, m)) = spec.set_mark {
        c.mark = (c.mark & !m) | (v & m);
    }
    if let Some((v, m)) = spec.set_label {
        c.label = (c.label & !m) | (v & m);
    }
}

/// Where the IP packet starting at `l3` ends (its length field; Ethernet padding is not
/// payload), at most the frame's end.
fn l3_end(frame: &[u8], l3: usize, ipv6: bool) -> usize {
    let (at, extra) = if ipv6 { (l3 + 4, 40) } else { (l3 + 2, 0) };
    match frame.get(at..at + 2) {
        Some(b) => (l3 + extra + usize::from(u16::from_be_bytes([b[0], b[1]]))).min(frame.len()),
        None => frame.len(),
    }
}

impl Tracker {
    /// An ICMP error: `+rel` to the connection whose packet it quotes, in the direction
    /// opposite to the quoted packet's.
    fn related(
        &self,
        frame: &mut [u8],
        meta: &PacketMeta,
        key: &mut FlowKey,
        spec: &CtSpec,
        zone: u16,
        ipv6: bool,
    ) -> Result<u8, InvalidReason> {
        let q = icmp::quoted_tuple(frame, meta.l4 as usize, ipv6, zone)
            .ok_or(InvalidReason::IcmpOrphan)?;
        let t = q.reverse();
        let (_, mut c, reply) = self
            .lookup(&t, t.hash(self.seed))
            .ok_or(InvalidReason::IcmpOrphan)?;
        if spec.commit {
            set_mark_label(&mut c, spec);
        }
        let snap = *c;
        drop(c);
        let mut st = state::TRACKED | state::RELATED;
        if reply {
            st |= state::REPLY_DIR;
        }
        if spec.nat.is_some() && snap.nat != Nat::None {
            st |= self.apply_nat(frame, meta, key, &snap, reply, true);
        }
        write_conn_fields(key, &snap.orig, snap.mark, snap.label);
        Ok(st)
    }

    /// Rewrite the packet as its connection's NAT says for its direction, and its key to
    /// match; returns the `ct_state` NAT flag (OVS: `+snat` when the packet's source was
    /// rewritten, `+dnat` its destination).
    fn apply_nat(
        &self,
        frame: &mut [u8],
        meta: &PacketMeta,
        key: &mut FlowKey,
        c: &Conn,
        reply: bool,
        related: bool,
    ) -> u8 {
        let (rw, src) = if reply {
            let rw = Rewrite {
                from: c.reply,
                to: c.orig.reverse(),
            };
            (rw, c.nat == Nat::Dst)
        } else {
            let rw = Rewrite {
                from: c.orig,
                to: c.reply.reverse(),
            };
            (rw, c.nat == Nat::Src)
        };
        if !nat::apply(frame, meta.l3 as usize, meta.l4 as usize, &rw) {
            Counters::bump(&self.stats.nat_rewrite_failed);
        }
        let (s, d) = (key.get(Field::Ipv6Src), key.get(Field::Ipv6Dst));
        if !related || s == rw.from.src {
            key.set(Field::Ipv6Src, rw.to.src);
        }
        if !related || d == rw.from.dst {
            key.set(Field::Ipv6Dst, rw.to.dst);
        }
        if !related && matches!(rw.to.proto, ipproto::TCP | ipproto::UDP) {
            key.set(Field::TpSrc, rw.to.src_port as u128);
            key.set(Field::TpDst, rw.to.dst_port as u128);
        }
        if src {
            state::SRC_NAT
        } else {
            state::DST_NAT
        }
    }
}
