//! Synchronous rtnetlink over `netlink-sys` sockets with `netlink-packet-route` messages:
//! one request socket (dumps, route lookups, neighbour requests) and one event socket
//! (multicast groups), both used only by the underlay's own thread.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP,
    NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::protocols::NETLINK_ROUTE;
use netlink_sys::{Socket, SocketAddr};

/// rtnetlink multicast groups (`RTNLGRP_*` in `linux/rtnetlink.h`).
pub const RTNLGRP_LINK: u32 = 1;
pub const RTNLGRP_NEIGH: u32 = 3;
pub const RTNLGRP_IPV4_IFADDR: u32 = 5;
pub const RTNLGRP_IPV4_ROUTE: u32 = 7;
pub const RTNLGRP_IPV6_IFADDR: u32 = 9;
pub const RTNLGRP_IPV6_ROUTE: u32 = 11;

/// The groups the event socket joins.
pub const GROUPS: [u32; 6] = [
    RTNLGRP_LINK,
    RTNLGRP_NEIGH,
    RTNLGRP_IPV4_IFADDR,
    RTNLGRP_IPV4_ROUTE,
    RTNLGRP_IPV6_IFADDR,
    RTNLGRP_IPV6_ROUTE,
];

const RECV_BUF: usize = 64 * 1024;

/// What one `RTM_GETROUTE` for a single destination answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteAnswer {
    /// The kernel's route: its type, output interface, gateway and preferred source.
    Route {
        kind: netlink_packet_route::route::RouteType,
        oif: Option<u32>,
        gateway: Option<IpAddr>,
        prefsrc: Option<IpAddr>,
    },
    /// The kernel refused (no route, unreachable, prohibited…): the errno.
    Error(i32),
}

pub struct Netlink {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Netlink {
    /// A request socket.
    pub fn request_socket() -> io::Result<Netlink> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        // Errors for requests with NLM_F_ACK carry only the header back.
        let _ = sock.set_cap_ack(true);
        Ok(Netlink {
            sock,
            seq: 0,
            buf: vec![0; RECV_BUF],
        })
    }

    /// An event socket joined to [`GROUPS`], non-blocking, with a large receive buffer.
    pub fn event_socket() -> io::Result<Netlink> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        for g in GROUPS {
            sock.add_membership(g)?;
        }
        // Best effort: a bigger buffer makes overruns (and so full resyncs) rarer.
        let _ = sock.set_rx_buf_sz(4 << 20);
        sock.set_non_blocking(true)?;
        Ok(Netlink {
            sock,
            seq: 0,
            buf: vec![0; RECV_BUF],
        })
    }

    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn send(&mut self, msg: RouteNetlinkMessage, flags: u16) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut m = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        m.finalize();
        let mut out = vec![0; m.buffer_len()];
        m.serialize(&mut out);
        self.sock.send(&out, 0)?;
        Ok(self.seq)
    }

    /// Receive one datagram into `self.buf` (blocking on a request socket); its length.
    fn recv_datagram(&mut self, flags: libc::c_int) -> io::Result<usize> {
        // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
        let n = unsafe {
            libc::recv(
                self.sock.as_raw_fd(),
                self.buf.as_mut_ptr().cast(),
                self.buf.len(),
                flags | libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n > self.buf.len() {
            // Truncated: grow for next time and report it (the caller resyncs).
            self.buf.resize(n.next_power_of_two(), 0);
            return Err(io::Error::other("netlink datagram truncated"));
        }
        Ok(n)
    }

    /// Split a datagram into messages; undecodable ones are skipped.
    fn parse(buf: &[u8]) -> Vec<NetlinkMessage<RouteNetlinkMessage>> {
        let mut out = Vec::new();
        let mut off = 0;
        while off + 16 <= buf.len() {
            let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
            if len < 16 || off + len > buf.len() {
                break;
            }
            if let Ok(m) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[off..off + len])
            {
                out.push(m);
            }
            off += (len + 3) & !3;
        }
        out
    }

    /// Send `msg` and collect the replies to it until DONE (a dump), the one reply, or
    /// the ACK. A NACK is an error with its errno.
    fn transact(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.transact_flagged(msg, flags).map(|(r, _)| r)
    }

    /// [`Netlink::transact`], also telling whether a reply had `NLM_F_DUMP_INTR`.
    fn transact_flagged(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<(Vec<RouteNetlinkMessage>, bool)> {
        let seq = self.send(msg, flags)?;
        let mut intr = false;
        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut replies = Vec::new();
        loop {
            let n = self.recv_datagram(0)?;
            for m in Self::parse(&self.buf[..n]) {
                if m.header.sequence_number != seq {
                    continue;
                }
                intr |= m.header.flags & NLM_F_DUMP_INTR != 0;
                match m.payload {
                    NetlinkPayload::Done(_) => return Ok((replies, intr)),
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
                            None => Ok((replies, intr)),
                        };
                    }
                    NetlinkPayload::InnerMessage(inner) => {
                        replies.push(inner);
                        if !dump && flags & NLM_F_ACK == 0 {
                            return Ok((replies, intr));
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Dump a table (links, addresses or neighbours), retrying while the kernel says the
    /// dump was interrupted by a change.
    pub fn dump(&mut self, msg: RouteNetlinkMessage) -> io::Result<Vec<RouteNetlinkMessage>> {
        let mut tries = 0;
        loop {
            let (replies, intr) = self.transact_flagged(msg.clone(), NLM_F_REQUEST | NLM_F_DUMP)?;
            tries += 1;
            if !intr || tries >= 5 {
                return Ok(replies);
            }
        }
    }

    pub fn dump_links(&mut self) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))
    }

    pub fn dump_addresses(&mut self) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.dump(RouteNetlinkMessage::GetAddress(AddressMessage::default()))
    }

    pub fn dump_neighbours(&mut self) -> io::Result<Vec<RouteNetlinkMessage>> {
        let mut out = Vec::new();
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut m = NeighbourMessage::default();
            m.header.family = family;
            out.extend(self.dump(RouteNetlinkMessage::GetNeighbour(m))?);
        }
        Ok(out)
    }

    /// Ask the kernel which route it would use for `dst` (`ip route get`): policy rules,
    /// longest prefix, metrics and multipath are all its choice.
    pub fn route_get(&mut self, dst: IpAddr) -> io::Result<RouteAnswer> {
        let mut m = RouteMessage::default();
        m.header.address_family = family_of(dst);
        m.header.destination_prefix_length = if dst.is_ipv4() { 32 } else { 128 };
        m.attributes
            .push(RouteAttribute::Destination(RouteAddress::from(dst)));
        let replies = match self.transact(RouteNetlinkMessage::GetRoute(m), NLM_F_REQUEST) {
            Ok(r) => r,
            Err(e) => match e.raw_os_error() {
                Some(errno) => return Ok(RouteAnswer::Error(errno)),
                None => return Err(e),
            },
        };
        for r in replies {
            if let RouteNetlinkMessage::NewRoute(route) = r {
                let mut oif = None;
                let mut gateway = None;
                let mut prefsrc = None;
                for a in &route.attributes {
                    match a {
                        RouteAttribute::Oif(i) => oif = Some(*i),
                        RouteAttribute::Gateway(g) => gateway = route_ip(g),
                        RouteAttribute::PrefSource(s) => prefsrc = route_ip(s),
                        _ => {}
                    }
                }
                return Ok(RouteAnswer::Route {
                    kind: route.header.kind,
                    oif,
                    gateway,
                    prefsrc,
                });
            }
        }
        Ok(RouteAnswer::Error(libc::ENETUNREACH))
    }

    /// Make the kernel resolve `ip` on `ifindex`: `RTM_NEWNEIGH` with `NTF_USE` (what
    /// `neigh_event_send` does for a packet waiting on the entry). A missing entry is
    /// created INCOMPLETE and probed (ARP request / neighbour solicitation); a FAILED one
    /// is probed again; a STALE one goes to DELAY and is confirmed by a unicast probe; a
    /// REACHABLE or PERMANENT one is left alone. Nothing is sent to the remote itself.
    pub fn neigh_use(&mut self, ifindex: u32, ip: IpAddr) -> io::Result<()> {
        let mut m = NeighbourMessage::default();
        m.header.family = family_of(ip);
        m.header.ifindex = ifindex;
        m.header.state = NeighbourState::None;
        m.header.flags = NeighbourFlags::Use;
        m.attributes.push(NeighbourAttribute::Destination(match ip {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        }));
        self.transact(
            RouteNetlinkMessage::NewNeighbour(m),
            NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK,
        )
        .map(|_| ())
    }

    /// Read every pending event (non-blocking). `Err` with `ENOBUFS` means events were
    /// lost and the tables must be dumped again.
    pub fn events(&mut self, out: &mut Vec<RouteNetlinkMessage>) -> io::Result<()> {
        loop {
            match self.recv_datagram(libc::MSG_DONTWAIT) {
                Ok(n) => {
                    for m in Self::parse(&self.buf[..n]) {
                        if let NetlinkPayload::InnerMessage(inner) = m.payload {
                            out.push(inner);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

pub fn family_of(ip: IpAddr) -> AddressFamily {
    match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    }
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}
