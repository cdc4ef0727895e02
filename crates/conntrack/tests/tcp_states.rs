//! TCP tracking, scenario by scenario: handshakes (plain, simultaneous, with window
//! scaling), closes, resets, retransmissions, refused flags and out-of-window segments.

use flowpath_conntrack::tcp::{Segment, TcpConn, TcpVerdict, ACK, FIN, PSH, RST, SYN, URG};
use flowpath_conntrack::{InvalidReason, TcpState};
use TcpState::*;

fn seg(flags: u8, seq: u32, ack: u32, len: u32) -> Segment {
    Segment {
        seq,
        ack,
        flags,
        window: 8192,
        wscale: None,
        len,
    }
}

const A: bool = false; // original direction (client)
const B: bool = true; // reply direction (server)

/// A connection after a full handshake: client ISN 1000, server ISN 5000.
fn established() -> TcpConn {
    let mut c = TcpConn::new(&seg(SYN, 1000, 0, 0)).unwrap();
    assert_eq!(
        c.update(B, &seg(SYN | ACK, 5000, 1001, 0)),
        TcpVerdict::Ok(SynRecv)
    );
    assert_eq!(
        c.update(A, &seg(ACK, 1001, 5001, 0)),
        TcpVerdict::Ok(Established)
    );
    c
}

#[test]
fn tcp_conn_fits_in_a_connection_entry() {
    assert!(
        std::mem::size_of::<TcpConn>() <= 40,
        "{}",
        std::mem::size_of::<TcpConn>()
    );
}

#[test]
fn handshake_data_and_close_end_in_time_wait() {
    let mut c = established();
    assert!(c.established());
    assert_eq!(
        c.update(A, &seg(ACK | PSH, 1001, 5001, 100)),
        TcpVerdict::Ok(Established)
    );
    assert_eq!(
        c.update(B, &seg(ACK, 5001, 1101, 0)),
        TcpVerdict::Ok(Established)
    );
    assert_eq!(
        c.update(A, &seg(FIN | ACK, 1101, 5001, 0)),
        TcpVerdict::Ok(FinWait)
    );
    assert_eq!(
        c.update(B, &seg(ACK, 5001, 1102, 0)),
        TcpVerdict::Ok(CloseWait)
    );
    assert_eq!(
        c.update(B, &seg(FIN | ACK, 5001, 1102, 0)),
        TcpVerdict::Ok(LastAck)
    );
    assert_eq!(
        c.update(A, &seg(ACK, 1102, 5002, 0)),
        TcpVerdict::Ok(TimeWait)
    );
    // A new SYN from the client reopens; one from the server too (roles switched).
    assert_eq!(c.update(A, &seg(SYN, 90_000, 0, 0)), TcpVerdict::Reopen);
    assert_eq!(c.update(B, &seg(SYN, 90_000, 0, 0)), TcpVerdict::Reopen);
}

#[test]
fn syn_sent_is_not_established_and_refuses_what_linux_refuses() {
    let mut c = TcpConn::new(&seg(SYN, 1000, 0, 0)).unwrap();
    assert!(!c.established());
    // Retransmitted SYN: fine.
    assert_eq!(c.update(A, &seg(SYN, 1000, 0, 0)), TcpVerdict::Ok(SynSent));
    // The client sends no ACK or FIN before the SYN/ACK.
    let inv = TcpVerdict::Invalid(InvalidReason::TcpFlags);
    assert_eq!(c.update(A, &seg(ACK, 1001, 5001, 0)), inv);
    assert_eq!(c.update(A, &seg(FIN | ACK, 1001, 5001, 0)), inv);
    assert_eq!(c.update(B, &seg(FIN | ACK, 5001, 1001, 0)), inv);
    // A SYN/ACK acknowledging something else is out of the window.
    let oow = TcpVerdict::Invalid(InvalidReason::OutOfWindow);
    let before = c;
    assert_eq!(c.update(B, &seg(SYN | ACK, 5000, 2001, 0)), oow);
    assert_eq!(c, before);
    assert_eq!(
        c.update(B, &seg(SYN | ACK, 5000, 1001, 0)),
        TcpVerdict::Ok(SynRecv)
    );
    assert!(c.established());
    // Retransmitted SYN/ACK: ignored, accepted.
    assert_eq!(
        c.update(B, &seg(SYN | ACK, 5000, 1001, 0)),
        TcpVerdict::Ok(SynRecv)
    );
}

#[test]
fn bad_flag_combinations_are_refused() {
    let inv = TcpVerdict::Invalid(InvalidReason::TcpFlags);
    for f in [
        0,
        SYN | FIN,
        SYN | RST,
        FIN,
        FIN | RST,
        SYN | ACK | URG,
        RST | URG,
        URG,
        PSH,
    ] {
        let mut c = established();
        let before = c;
        assert_eq!(c.update(A, &seg(f, 1001, 5001, 0)), inv, "{f:#x}");
        assert_eq!(c, before);
        assert!(TcpConn::new(&seg(f, 1, 0, 0)).is_none(), "{f:#x}");
    }
    assert!(TcpConn::new(&seg(SYN | ACK, 1, 0, 0)).is_none());
    assert!(TcpConn::new(&seg(ACK, 1, 0, 0)).is_none());
    assert!(TcpConn::new(&seg(SYN | URG | PSH, 1, 0, 0)).is_some());
}

#[test]
fn rst_needs_an_in_window_sequence() {
    let oow = TcpVerdict::Invalid(InvalidReason::OutOfWindow);
    let mut c = established();
    let before = c;
    assert_eq!(c.update(B, &seg(RST, 5001 + 3_000_000, 0, 0)), oow);
    assert_eq!(
        c.update(B, &seg(RST, 5001u32.wrapping_sub(3_000_000), 0, 0)),
        oow
    );
    assert_eq!(c, before);
    assert_eq!(c.update(B, &seg(RST, 5001, 0, 0)), TcpVerdict::Ok(Close));
    assert_eq!(c.update(A, &seg(SYN, 7, 0, 0)), TcpVerdict::Reopen);
}

#[test]
fn rst_answering_a_syn_closes() {
    let mut c = TcpConn::new(&seg(SYN, 1000, 0, 0)).unwrap();
    assert_eq!(
        c.update(B, &seg(RST | ACK, 0, 1001, 0)),
        TcpVerdict::Ok(Close)
    );
}

#[test]
fn far_out_of_window_data_changes_nothing() {
    let oow = TcpVerdict::Invalid(InvalidReason::OutOfWindow);
    let mut c = established();
    let before = c;
    assert_eq!(c.update(A, &seg(ACK, 1001 + 1_000_000, 5001, 10)), oow);
    assert_eq!(c.update(A, &seg(ACK, 1001, 5001 + 1_000_000, 10)), oow);
    assert_eq!(
        c.update(B, &seg(ACK, 5001, 1001 + 20, 0)),
        oow,
        "acks unseen data"
    );
    assert_eq!(c.update(A, &seg(FIN | ACK, 1_500_000_000, 5001, 0)), oow);
    assert_eq!(c, before);
}

#[test]
fn simultaneous_open() {
    let mut c = TcpConn::new(&seg(SYN, 1000, 0, 0)).unwrap();
    assert_eq!(c.update(B, &seg(SYN, 5000, 0, 0)), TcpVerdict::Ok(SynSent));
    assert!(c.simultaneous_open() && c.established());
    assert_eq!(
        c.update(A, &seg(SYN | ACK, 1000, 5001, 0)),
        TcpVerdict::Ok(SynRecv)
    );
    assert_eq!(
        c.update(B, &seg(SYN | ACK, 5000, 1001, 0)),
        TcpVerdict::Ok(SynRecv)
    );
    assert_eq!(
        c.update(A, &seg(ACK, 1001, 5001, 0)),
        TcpVerdict::Ok(Established)
    );
}

#[test]
fn window_scaling_widens_the_window() {
    let mut syn = seg(SYN, 1000, 0, 0);
    syn.wscale = Some(7);
    let mut c = TcpConn::new(&syn).unwrap();
    let mut synack = seg(SYN | ACK, 5000, 1001, 0);
    synack.wscale = Some(7);
    assert_eq!(c.update(B, &synack), TcpVerdict::Ok(SynRecv));
    assert_eq!(c.window_scales(), [7, 7]);
    assert_eq!(
        c.update(A, &seg(ACK, 1001, 5001, 0)),
        TcpVerdict::Ok(Established)
    );
    // The server's window (SYNs' windows are never scaled; this ACK's is) is 8192 << 7
    // = 1 MiB: 500 KB ahead is in it.
    assert_eq!(
        c.update(B, &seg(ACK, 5001, 1001, 0)),
        TcpVerdict::Ok(Established)
    );
    assert_eq!(
        c.update(A, &seg(ACK, 1001 + 500_000, 5001, 1000)),
        TcpVerdict::Ok(Established)
    );
    // Without the option on both SYNs, no scaling.
    let mut c = TcpConn::new(&syn).unwrap();
    assert_eq!(
        c.update(B, &seg(SYN | ACK, 5000, 1001, 0)),
        TcpVerdict::Ok(SynRecv)
    );
    assert_eq!(c.window_scales(), [0, 0]);
    assert_eq!(
        c.update(A, &seg(ACK, 1001, 5001, 0)),
        TcpVerdict::Ok(Established)
    );
    assert_eq!(
        c.update(B, &seg(ACK, 5001, 1001, 0)),
        TcpVerdict::Ok(Established)
    );
    assert_eq!(
        c.update(A, &seg(ACK, 1001 + 500_000, 5001, 1000)),
        TcpVerdict::Invalid(InvalidReason::OutOfWindow)
    );
}

#[test]
fn syn_ack_answering_an_ignored_syn_resynchronises() {
    let mut c = established();
    // The client restarts with a new ISN: the tracker ignores the SYN...
    assert_eq!(
        c.update(A, &seg(SYN, 77_000_000, 0, 0)),
        TcpVerdict::Ok(Established)
    );
    // ...and the server's SYN/ACK for it puts the tracker back in step.
    assert_eq!(
        c.update(B, &seg(SYN | ACK, 99_000, 77_000_001, 0)),
        TcpVerdict::Ok(SynRecv)
    );
    assert_eq!(
        c.update(A, &seg(ACK, 77_000_001, 99_001, 0)),
        TcpVerdict::Ok(Established)
    );
}

#[test]
fn segment_parse_reads_header_options_and_length() {
    // 14 bytes of Ethernet + 20 of IPv4, then TCP with options NOP, WS=9, MSS.
    let mut f = vec![0u8; 34];
    let tcp = [
        0x30, 0x39, 0x00, 0x50, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0x80, SYN, 0x20, 0x00, 0, 0, 0, 0, 1,
        3, 3, 9, 2, 4, 5, 0xb4, 0, 0, 0, 0,
    ];
    f.extend_from_slice(&tcp);
    f.extend_from_slice(&[0xaa; 5]);
    let s = Segment::parse(&f, 34, f.len()).unwrap();
    assert_eq!(
        (s.seq, s.flags, s.window, s.wscale, s.len),
        (1000, SYN, 0x2000, Some(9), 5)
    );
    assert_eq!(s.end(), 1006);
    // Truncated header, data offset past the end, an offset below 20: refused.
    assert!(Segment::parse(&f, 34, 40).is_none());
    assert!(Segment::parse(&f[..50], 34, 50).is_none());
    assert!(Segment::parse(&f, usize::MAX - 3, f.len()).is_none());
    f[34 + 12] = 0x40;
    assert!(Segment::parse(&f, 34, f.len()).is_none());
    // A window scale over 14 counts as 14.
    f[34 + 12] = 0x80;
    f[34 + 23] = 40;
    assert_eq!(Segment::parse(&f, 34, f.len()).unwrap().wscale, Some(14));
}
