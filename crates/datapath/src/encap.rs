//! VXLAN encapsulation on output to a tunnel port: the remote and VNI, the underlay hop
//! (the last one and its outer headers cached), the outer headers pushed into the
//! headroom, and the packets held while a next hop's MAC is being resolved, released once
//! it is (see `hold.rs`).

use crate::hold::{NeighbourHoldQueue, HOLD_HEADROOM, HOLD_MAX_AGE_SECS};
use crate::sink::OutputSink;
use crate::stats::{DatapathDrop, DatapathStats};
use crate::tunnel::{
    HopMiss, TunnelKey, TunnelPort, TunnelRemote, Tunnels, UnderlayHop, TUN_FLAGS_BYTE,
};
use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_packet::encap::{EncapError, VxlanEncap, VxlanTemplate};
use flowpath_packet::key::{TUN_IPV6, TUN_PRESENT};
use flowpath_packet::{FlowKey, Packet};
use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What encapsulation keeps between packets: the last hop ([`HopCache`]) and the packets
/// held while a next hop's MAC is being resolved ([`NeighbourHoldQueue`]).
#[derive(Default)]
pub(crate) struct EncapState {
    hop: HopCache,
    held: RefCell<NeighbourHoldQueue>,
}

/// The last underlay hop used and the outer headers built for it, valid while the
/// resolver's generation is unchanged: a burst to one remote reads the resolver and builds
/// the headers once, then one atomic load per packet.
type HopCache = RefCell<Option<HopEntry>>;

struct HopEntry {
    /// The resolver's generation, tunnel port and remote this was built for.
    gen: u64,
    port: u32,
    remote: IpAddr,
    /// The underlay port the packets leave by.
    out: u32,
    headers: VxlanTemplate,
}

impl EncapState {
    /// Are packets waiting for an underlay neighbour?
    #[inline(always)]
    pub(crate) fn has_held(&self) -> bool {
        !self.held.borrow().is_empty()
    }

    /// Send the held packets whose neighbour `t`'s underlay now knows, drop those that
    /// waited past [`HOLD_MAX_AGE_SECS`] (`tunnel_neigh_unresolved`), keep the rest. Does
    /// nothing until the underlay changes or the oldest expires. Returns the packets sent.
    pub(crate) fn release_held<S: OutputSink>(
        &self,
        t: &Tunnels,
        sink: &mut S,
        st: &mut DatapathStats,
    ) -> usize {
        let mut q = self.held.borrow_mut();
        if q.is_empty() {
            return 0;
        }
        let gen = t.underlay.generation();
        let now = rdtsc();
        let max_age = (HOLD_MAX_AGE_SECS * tsc_hz()) as u64;
        if gen == q.tried_at_gen && !q.any_expired(now, max_age) {
            return 0;
        }
        q.tried_at_gen = gen;
        let mut sent = 0;
        for h in std::mem::take(&mut q.packets) {
            let (tp, hop) = match (t.port(h.port), t.underlay.hop(h.remote)) {
                (Some(tp), Some(hop)) => (tp, hop),
                (Some(_), None) if now.saturating_sub(h.since) <= max_age => {
                    q.packets.push(h);
                    continue;
                }
                _ => {
                    // Waited too long, or its tunnel port is gone.
                    st.drop(DatapathDrop::TunnelNeighUnresolved);
                    continue;
                }
            };
            let Some(headers) = outer_headers(tp, &hop, h.remote, h.vni, h.flow_hash) else {
                st.drop(DatapathDrop::TunnelNoRoute);
                continue;
            };
            let mut buf = h.buf;
            let mut pkt = Packet::new(&mut buf, HOLD_HEADROOM, h.len);
            send_encapsulated(&headers, hop.port, h.vni, h.flow_hash, &mut pkt, sink, st);
            st.tunnel_released += 1;
            sent += 1;
        }
        sent
    }
}

/// Tunnel metadata a packet's actions set (`set_tunnel`, `set_field:…->tun_dst`).
#[derive(Default)]
pub(crate) struct TunSet {
    pub(crate) id: Option<u32>,
    pub(crate) dst: Option<IpAddr>,
}

/// A tunnel address as the key holds it (IPv4 in the first 4 bytes).
#[inline(always)]
fn tun_addr(b: &[u8], v6: bool) -> IpAddr {
    if v6 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }
}

/// A hash of the inner flow (addresses, protocol, ports): the outer UDP source port and
/// IPv6 flow label, so the underlay's RSS and ECMP spread tunnelled flows.
#[inline(always)]
pub(crate) fn inner_flow_hash(k: &FlowKey) -> u32 {
    let w = &k.words;
    let a = w[3] ^ w[4].rotate_left(23) ^ w[5].rotate_left(41);
    let b = w[6] ^ w[7].rotate_left(17) ^ w[1].rotate_left(7) ^ w[2];
    let p = (a ^ 0x243f_6a88_85a3_08d3) as u128 * (b ^ 0x9e37_79b9_7f4a_7c15) as u128;
    let x = (p as u64) ^ ((p >> 64) as u64);
    (x ^ (x >> 32)) as u32
}

/// Output to tunnel port `tp`: the remote and VNI (fixed, or from the packet), the hop from
/// the underlay (read now, so nothing cached depends on it), the outer headers pushed into
/// the headroom, out on the hop's port, and the inner frame restored for later actions.
/// Kept small for the common case, the hop cache's hit; the rest is [`encap_miss`].
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn encap_output<S: OutputSink>(
    t: &Tunnels,
    tp: &TunnelPort,
    encap: &EncapState,
    pkt: &mut Packet<'_>,
    key: &FlowKey,
    tun: &TunSet,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    let b = key.bytes();
    let received = b[TUN_FLAGS_BYTE] & TUN_PRESENT != 0;
    let vni = match tp.key {
        TunnelKey::Fixed(v) => v,
        TunnelKey::Flow => tun
            .id
            .unwrap_or_else(|| u32::from_be_bytes([b[64], b[65], b[66], b[67]])),
    };
    let remote = match tp.remote {
        TunnelRemote::Fixed(r) => r,
        TunnelRemote::Flow => match tun.dst {
            Some(r) => r,
            None if received => tun_addr(&b[88..104], b[TUN_FLAGS_BYTE] & TUN_IPV6 != 0),
            None => {
                st.drop(DatapathDrop::TunnelNoRoute);
                return;
            }
        },
    };
    // The generation is read before the hop: a change in between is caught next time.
    let gen = t.underlay.generation();
    let flow_hash = inner_flow_hash(key);
    {
        let c = encap.hop.borrow();
        if let Some(h) = &*c {
            if h.gen == gen && h.port == tp.number && h.remote == remote {
                send_encapsulated(&h.headers, h.out, vni, flow_hash, pkt, sink, st);
                return;
            }
        }
    }
    encap_miss(t, tp, encap, gen, remote, vni, flow_hash, pkt, sink, st);
}

/// [`encap_output`] without a usable cached hop: ask the underlay, build the headers,
/// send, and keep them for the packets that follow.
#[inline(never)]
#[cold]
#[allow(clippy::too_many_arguments)]
fn encap_miss<S: OutputSink>(
    t: &Tunnels,
    tp: &TunnelPort,
    encap: &EncapState,
    gen: u64,
    remote: IpAddr,
    vni: u32,
    flow_hash: u32,
    pkt: &mut Packet<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    let Some(hop) = t.underlay.hop(remote) else {
        t.underlay.resolve(remote);
        match t.underlay.miss(remote) {
            HopMiss::NoRoute => st.drop(DatapathDrop::TunnelNoRoute),
            HopMiss::NeighUnresolved => {
                // The ARP-queue rule: the first few wait for the neighbour.
                let mut q = encap.held.borrow_mut();
                if q.hold(tp.number, remote, vni, flow_hash, pkt.data(), rdtsc()) {
                    st.tunnel_held += 1;
                } else {
                    st.drop(DatapathDrop::TunnelNeighUnresolved);
                }
            }
        }
        return;
    };
    let Some(headers) = outer_headers(tp, &hop, remote, vni, flow_hash) else {
        // The local address and the remote are not of one family.
        st.drop(DatapathDrop::TunnelNoRoute);
        return;
    };
    send_encapsulated(&headers, hop.port, vni, flow_hash, pkt, sink, st);
    *encap.hop.borrow_mut() = Some(HopEntry {
        gen,
        port: tp.number,
        remote,
        out: hop.port,
        headers,
    });
}

/// The outer headers for `remote` through `hop` (None: the local address and the remote
/// are not of one family).
fn outer_headers(
    tp: &TunnelPort,
    hop: &UnderlayHop,
    remote: IpAddr,
    vni: u32,
    flow_hash: u32,
) -> Option<VxlanTemplate> {
    VxlanTemplate::new(&VxlanEncap {
        src_mac: hop.src_mac,
        dst_mac: hop.dst_mac,
        src: tp.local.unwrap_or(hop.src_ip),
        dst: remote,
        vni,
        dst_port: tp.dst_port,
        flow_hash,
    })
    .ok()
}

/// Push `headers` in front of the packet, send it out of `out`, and give back the inner
/// frame for later actions.
#[inline(always)]
fn send_encapsulated<S: OutputSink>(
    headers: &VxlanTemplate,
    out: u32,
    vni: u32,
    flow_hash: u32,
    pkt: &mut Packet<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    match headers.encap(pkt, vni, flow_hash) {
        Ok(n) => {
            sink.output(out, pkt.data());
            pkt.pull_front(n);
            st.encapsulated += 1;
        }
        Err(EncapError::NoRoom) => st.drop(DatapathDrop::NoRoom),
        Err(EncapError::FamilyMismatch) => st.drop(DatapathDrop::TunnelNoRoute),
    }
}
