//! An interface's XDP state over rtnetlink, with `netlink-packet-route` messages on a
//! `netlink-sys` socket: which program is attached (RTM_GETLINK) and removing a program
//! attached the legacy way (RTM_SETLINK with IFLA_XDP_FD -1). aya keeps its own netlink
//! helpers private, and attaches through BPF links where it can.

use crate::XdpAttachment;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkMessage, LinkXdp, XdpAttached};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::protocols::NETLINK_ROUTE;
use netlink_sys::{Socket, SocketAddr};
use std::io;

/// `XDP_FLAGS_*` of `linux/if_link.h`: the mode a detach names.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_HW_MODE: u32 = 1 << 3;

/// The program attached to `ifindex`, if any.
pub(crate) fn query(ifindex: u32) -> io::Result<Option<XdpAttachment>> {
    let mut m = LinkMessage::default();
    m.header.index = ifindex;
    let replies = transact(RouteNetlinkMessage::GetLink(m), NLM_F_REQUEST)?;
    let Some(RouteNetlinkMessage::NewLink(link)) = replies.into_iter().next() else {
        return Err(io::Error::other("unexpected netlink answer to RTM_GETLINK"));
    };
    let (mut mode, mut prog_id) = (0u8, 0u32);
    for a in &link.attributes {
        if let LinkAttribute::Xdp(xdp) = a {
            for x in xdp {
                match x {
                    LinkXdp::Attached(m) => mode = attached_code(*m),
                    LinkXdp::ProgId(id) => prog_id = *id,
                    _ => {}
                }
            }
        }
    }
    Ok((mode != 0).then_some(XdpAttachment { prog_id, mode }))
}

/// Remove the program attached to `ifindex` in `attached_mode` (an IFLA_XDP_ATTACHED code).
pub(crate) fn detach(ifindex: u32, attached_mode: u8) -> io::Result<()> {
    let flags = match attached_mode {
        1 => XDP_FLAGS_DRV_MODE,
        2 => XDP_FLAGS_SKB_MODE,
        3 => XDP_FLAGS_HW_MODE,
        _ => 0,
    };
    let mut m = LinkMessage::default();
    m.header.index = ifindex;
    m.attributes.push(LinkAttribute::Xdp(vec![
        LinkXdp::Fd(-1),
        LinkXdp::Flags(flags),
    ]));
    transact(RouteNetlinkMessage::SetLink(m), NLM_F_REQUEST | NLM_F_ACK).map(|_| ())
}

/// The IFLA_XDP_ATTACHED code of `a` (0: none).
fn attached_code(a: XdpAttached) -> u8 {
    match a {
        XdpAttached::Driver => 1,
        XdpAttached::SocketBuffer => 2,
        XdpAttached::Hardware => 3,
        XdpAttached::Multiple => 4,
        XdpAttached::Other(v) => v,
        _ => 0,
    }
}

/// Send `msg` on a fresh socket and collect the answer: the one reply (a request without
/// `NLM_F_ACK`) or the acknowledgement. A NACK is an error with its errno.
fn transact(msg: RouteNetlinkMessage, flags: u16) -> io::Result<Vec<RouteNetlinkMessage>> {
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = 1;
    let mut m = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
    m.finalize();
    let mut out = vec![0; m.buffer_len()];
    m.serialize(&mut out);
    sock.send(&out, 0)?;
    let mut replies = Vec::new();
    loop {
        let (buf, _) = sock.recv_from_full()?;
        let mut off = 0;
        while off + 16 <= buf.len() {
            let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
            if len < 16 || off + len > buf.len() {
                break;
            }
            let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[off..off + len])
                .map_err(|e| io::Error::other(format!("undecodable netlink answer: {e}")))?;
            off += (len + 3) & !3;
            match m.payload {
                NetlinkPayload::Error(e) => {
                    return match e.code {
                        Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
                        None => Ok(replies),
                    };
                }
                NetlinkPayload::Done(_) => return Ok(replies),
                NetlinkPayload::InnerMessage(inner) => {
                    replies.push(inner);
                    if flags & NLM_F_ACK == 0 {
                        return Ok(replies);
                    }
                }
                _ => {}
            }
        }
    }
}
