//! A minimal OpenFlow 1.3 client on the codec (`flowpath-openflow`): the bench's side of
//! the connection, as a controller or a tool would hold it.

use flowpath_openflow::consts::*;
use flowpath_openflow::{
    decode, message_len, FlowMod, Instruction, Message, OfAction, Oxm, OxmField,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One connection after HELLO. Messages the codec cannot decode come back as `None` with
/// their type byte, so an OVS extension never stops the bench.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
    at: usize,
    xid: u32,
    /// Answer ECHO_REQUESTs inside `recv` (off while another thread writes).
    pub answer_echo: bool,
}

/// A received message: xid, OpenFlow type byte, and the message if the codec knows it.
pub type Received = (u32, u8, Option<Message>);

impl Client {
    pub fn connect(addr: SocketAddr) -> Result<Client, String> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(|e| e.to_string())?;
        let mut c = Client {
            stream: s,
            buf: Vec::with_capacity(1 << 16),
            at: 0,
            xid: 1,
            answer_echo: true,
        };
        c.send(&Message::hello())?;
        loop {
            let (_, t, _) = c.recv()?;
            if t == msg::HELLO {
                return Ok(c);
            }
        }
    }

    pub fn next_xid(&mut self) -> u32 {
        self.xid += 1;
        self.xid
    }

    pub fn send(&mut self, m: &Message) -> Result<u32, String> {
        let x = self.next_xid();
        self.stream
            .write_all(&m.encode(x))
            .map_err(|e| format!("write: {e}"))?;
        Ok(x)
    }

    /// The next message (blocking up to the read timeout).
    pub fn recv(&mut self) -> Result<Received, String> {
        loop {
            let avail = &self.buf[self.at..];
            match message_len(avail) {
                Ok(Some(n)) if avail.len() >= n => {
                    let raw = &avail[..n];
                    let xid = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]);
                    let t = raw[1];
                    let m = decode(raw).ok().map(|(_, m)| m);
                    self.at += n;
                    if let (true, Some(Message::EchoRequest(d))) = (self.answer_echo, &m) {
                        let reply = Message::EchoReply(d.clone()).encode(xid);
                        self.stream
                            .write_all(&reply)
                            .map_err(|e| format!("write: {e}"))?;
                    }
                    return Ok((xid, t, m));
                }
                Ok(_) => {}
                Err(e) => return Err(format!("bad framing from the switch: {e:?}")),
            }
            if self.at > 0 {
                self.buf.drain(..self.at);
                self.at = 0;
            }
            let mut chunk = [0u8; 65536];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("the switch closed the connection".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Send a barrier; return every message that came before its reply.
    pub fn barrier(&mut self) -> Result<Vec<Received>, String> {
        let x = self.send(&Message::BarrierRequest)?;
        let mut got = Vec::new();
        loop {
            let r = self.recv()?;
            if r.0 == x && r.1 == msg::BARRIER_REPLY {
                return Ok(got);
            }
            got.push(r);
        }
    }
}

/// The errors among `got`, as "type/code" strings.
pub fn errors(got: &[Received]) -> Vec<String> {
    got.iter()
        .filter(|r| r.1 == msg::ERROR)
        .map(|r| match &r.2 {
            Some(Message::Error { type_, code, .. }) => format!("{type_}/{code}"),
            _ => "?".into(),
        })
        .collect()
}

/// What [`blast`] measured.
pub struct Blast {
    /// First byte written to BARRIER_REPLY read.
    pub elapsed: Duration,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Write `bytes` (pre-encoded messages) as fast as the socket takes them from one thread,
/// then a BARRIER_REQUEST, while another thread reads everything that comes back (so
/// neither side's TCP buffer can deadlock the other); time from the first byte to the
/// BARRIER_REPLY.
pub fn blast(mut c: Client, bytes: &[u8]) -> Result<Blast, String> {
    let bx = c.next_xid();
    c.answer_echo = false;
    let barrier = Message::BarrierRequest.encode(bx);
    let mut w = c.stream.try_clone().map_err(|e| e.to_string())?;
    let reader = std::thread::spawn(move || -> Result<(Instant, u64, Option<String>), String> {
        let mut n_err = 0;
        let mut first = None;
        loop {
            let r = c.recv()?;
            if r.1 == msg::ERROR {
                n_err += 1;
                if first.is_none() {
                    first = errors(std::slice::from_ref(&r)).pop();
                }
            } else if r.0 == bx && r.1 == msg::BARRIER_REPLY {
                return Ok((Instant::now(), n_err, first));
            }
        }
    });
    let t0 = Instant::now();
    let wrote = w
        .write_all(bytes)
        .and_then(|_| w.write_all(&barrier))
        .map_err(|e| format!("write: {e}"));
    let (t1, errors, first_error) = reader
        .join()
        .map_err(|_| "the reader thread panicked".to_string())??;
    wrote?;
    Ok(Blast {
        elapsed: t1 - t0,
        errors,
        first_error,
    })
}

/// Flow i of the flow_mod measurement: table 0, priority 100, ip, nw_dst=10.0.0.0+i,
/// output:1..4.
pub fn bench_flow_mod(i: u32) -> Message {
    Message::FlowMod(FlowMod {
        table_id: 0,
        command: OFPFC_ADD,
        priority: 100,
        match_: vec![
            Oxm::exact(OxmField::EthType, 0x0800),
            Oxm::exact(OxmField::Ipv4Dst, u128::from(0x0a00_0000 + i)),
        ],
        instructions: vec![Instruction::ApplyActions(vec![OfAction::output(1 + i % 4)])],
        ..FlowMod::default()
    })
}

/// The same flow in `ovs-ofctl` syntax.
pub fn bench_flow_text(i: u32) -> String {
    let a = std::net::Ipv4Addr::from(0x0a00_0000 + i);
    format!(
        "table=0,priority=100,ip,nw_dst={a},actions=output:{}",
        1 + i % 4
    )
}

/// `n` flow_mods encoded back to back (xids 1000..).
pub fn encode_flow_mods(n: u32, f: impl Fn(u32) -> Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(n as usize * 100);
    for i in 0..n {
        out.extend(f(i).encode(1000 + i));
    }
    out
}
