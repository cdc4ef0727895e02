//! Setting up an AF_PACKET port: the socket, its mapped receive ring, the binding with
//! promiscuous mode and fanout, and the transmit vectors.

use super::*;

/// A non-blocking TPACKET_V3 socket that receives nothing yet and ignores its own sends.
pub(super) fn packet_socket(interface: &str) -> io::Result<OwnedFd> {
    // Protocol 0: the socket receives nothing until it is bound with ETH_P_ALL below,
    // so no other interface's traffic lands in the ring first.
    // SAFETY: plain socket(2).
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(os_err("socket(AF_PACKET)", interface));
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();

    let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
    if setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VERSION, &version) < 0 {
        return Err(os_err("PACKET_VERSION TPACKET_V3", interface));
    }
    // Do not see our own transmissions (Linux 4.20+; harmless if missing: outgoing
    // frames are also skipped by their packet type).
    let one: libc::c_int = 1;
    setsockopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one);

    Ok(fd)
}

/// Ask for the receive ring and map it.
pub(super) fn map_rx_ring(raw: RawFd, interface: &str) -> io::Result<Ring> {
    let req = libc::tpacket_req3 {
        tp_block_size: BLOCK_SIZE,
        tp_block_nr: BLOCK_NR,
        tp_frame_size: FRAME_SIZE,
        tp_frame_nr: BLOCK_SIZE / FRAME_SIZE * BLOCK_NR,
        tp_retire_blk_tov: RETIRE_MS,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    if setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req) < 0 {
        return Err(os_err("PACKET_RX_RING", interface));
    }
    let len = (BLOCK_SIZE * BLOCK_NR) as usize;
    // SAFETY: mapping the ring the kernel just allocated for this socket.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            raw,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(os_err("mmap of the rx ring", interface));
    }
    Ok(Ring {
        base: base.cast(),
        len,
    })
}

/// Bind to the interface for every protocol, make it promiscuous for as long as the socket
/// lives, and join its fanout group when asked.
pub(super) fn bind_promiscuous(
    raw: RawFd,
    ifindex: i32,
    fanout: bool,
    interface: &str,
) -> io::Result<()> {
    bind_to(raw, ifindex, libc::ETH_P_ALL as u16, interface)?;

    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    if setsockopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq) < 0 {
        return Err(os_err("PACKET_ADD_MEMBERSHIP promiscuous", interface));
    }

    if fanout {
        // Group id from the ifindex: every worker on this interface joins the same.
        let arg: u32 = (ifindex as u32 & 0xffff) | (libc::PACKET_FANOUT_HASH << 16);
        if setsockopt(raw, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg) < 0 {
            return Err(os_err("PACKET_FANOUT hash", interface));
        }
    }

    Ok(())
}

/// The transmit staging: `TXQ` frame buffers, an iovec for each and an mmsghdr for each,
/// pointing at one another (so one `sendmmsg` sends what is queued).
/// Transmit buffers, their iovecs and their message headers.
pub(super) type TxVectors = (Box<[u8]>, Box<[libc::iovec]>, Box<[libc::mmsghdr]>);

pub(super) fn tx_vectors() -> TxVectors {
    let mut tx_buf = vec![0u8; TXQ * FRAME].into_boxed_slice();
    let mut tx_iov: Box<[libc::iovec]> = (0..TXQ)
        .map(|i| libc::iovec {
            // SAFETY: in bounds of `tx_buf`.
            iov_base: unsafe { tx_buf.as_mut_ptr().add(i * FRAME) }.cast(),
            iov_len: 0,
        })
        .collect();
    let tx_msgs: Box<[libc::mmsghdr]> = (0..TXQ)
        .map(|i| {
            // SAFETY: all-zero is a valid mmsghdr (null name and control).
            let mut m: libc::mmsghdr = unsafe { zeroed() };
            // SAFETY: in bounds of `tx_iov`.
            m.msg_hdr.msg_iov = unsafe { tx_iov.as_mut_ptr().add(i) };
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();

    (tx_buf, tx_iov, tx_msgs)
}

/// Bind the packet socket `raw` to interface `ifindex` for `protocol` (host order; 0:
/// receive nothing, as a socket that only sends).
pub(crate) fn bind_to(raw: RawFd, ifindex: i32, protocol: u16, interface: &str) -> io::Result<()> {
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll of the given size.
    let r = unsafe {
        libc::bind(
            raw,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(os_err("bind", interface));
    }
    Ok(())
}
