//! OpenFlow over TLS, in process: a `pssl:` listener that serves clients with a
//! certificate the CA signed and refuses (and counts) the rest, an `ssl:` connection to a
//! controller played by the test, and the configuration errors. Certificates are made
//! at test time (`common::certs`).

mod common;
use common::certs::{Cert, Pki};
use common::openflow::{add, start_with, stop};
use flowpath_openflow::{decode, message_len, Message, OfAction, Oxm, OxmField};
use flowpath_switch::openflow::{OpenFlowChannel, OpenFlowConfig, Target, TlsFiles};
use flowpath_switch::{Switch, SwitchConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn pki(tag: &str) -> Pki {
    let d = std::env::temp_dir().join(format!("fp-tls-{tag}-{}", std::process::id()));
    Pki::new(&d)
}

fn files(p: &Pki, me: &Cert) -> TlsFiles {
    TlsFiles {
        private_key: me.key.clone(),
        certificate: me.cert.clone(),
        ca_cert: p.ca.clone(),
    }
}

/// OpenFlow messages over any stream (TLS or not).
struct Of<S: Read + Write> {
    s: S,
    buf: Vec<u8>,
    xid: u32,
}

impl<S: Read + Write> Of<S> {
    fn new(s: S) -> Self {
        Of {
            s,
            buf: Vec::new(),
            xid: 10,
        }
    }

    fn send(&mut self, m: &Message) -> std::io::Result<u32> {
        self.xid += 1;
        self.s.write_all(&m.encode(self.xid))?;
        self.s.flush()?;
        Ok(self.xid)
    }

    fn recv(&mut self) -> std::io::Result<(u32, Message)> {
        loop {
            if let Ok(Some(n)) = message_len(&self.buf) {
                if self.buf.len() >= n {
                    let raw: Vec<u8> = self.buf.drain(..n).collect();
                    let (h, m) = decode(&raw).expect("valid messages");
                    return Ok((h.xid, m));
                }
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// HELLO both ways, then a barrier answered: the connection works.
    fn works(&mut self) -> std::io::Result<()> {
        self.send(&Message::hello())?;
        let (_, m) = self.recv()?;
        assert!(matches!(m, Message::Hello(_)), "{m:?}");
        let x = self.send(&Message::BarrierRequest)?;
        loop {
            let (xid, m) = self.recv()?;
            if xid == x && matches!(m, Message::BarrierReply) {
                return Ok(());
            }
        }
    }
}

fn listening(sw: &Arc<Switch>, p: &Pki) -> (OpenFlowChannel, Arc<AtomicBool>, SocketAddr) {
    let cfg = OpenFlowConfig {
        targets: vec![Target::parse("pssl:127.0.0.1:0").unwrap()],
        tls: Some(files(p, &p.switch)),
        ..OpenFlowConfig::default()
    };
    let (ch, st) = start_with(sw, cfg);
    let a = ch.listening[0];
    (ch, st, a)
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_pssl_listener_serves_clients_the_ca_signed() {
    let p = pki("good");
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let (ch, st, addr) = listening(&sw, &p);
    let mut c = Of::new(p.connect(addr, Some(&p.controller)));
    c.works().unwrap();
    let m = OxmField::InPort;
    c.send(&add(
        0,
        7,
        vec![Oxm::exact(m, 1)],
        vec![OfAction::Output {
            port: 2,
            max_len: 0,
        }],
    ))
    .unwrap();
    c.send(&Message::BarrierRequest).unwrap();
    wait_until("the flow added over TLS is in the rule set", || {
        sw.store().snapshot().rules().count() == 1
    });
    assert_eq!(ch.counters().tls_refused, 0);
    stop(ch, st);
}

#[test]
fn peers_without_a_valid_certificate_are_refused_and_counted() {
    let p = pki("refused");
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let (ch, st, addr) = listening(&sw, &p);
    let refused = |who: &str, r: std::io::Result<()>| {
        assert!(r.is_err(), "{who}: the switch served it");
    };
    refused(
        "a certificate from another CA",
        Of::new(p.connect(addr, Some(&p.wrong_ca))).works(),
    );
    refused(
        "an expired certificate",
        Of::new(p.connect(addr, Some(&p.expired))).works(),
    );
    refused("no certificate", Of::new(p.connect(addr, None)).works());
    // Plain OpenFlow on the TLS port: its HELLO is not a TLS record.
    let mut plain = TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    refused("plain TCP", Of::new(&mut plain).works());
    wait_until("four refusals counted", || ch.counters().tls_refused == 4);
    // The switch is still there for a good client.
    Of::new(p.connect(addr, Some(&p.controller)))
        .works()
        .unwrap();
    assert_eq!(ch.counters().tls_refused, 4);
    stop(ch, st);
}

/// The test as an `ssl:` controller: accept the switch, check the HELLO, ask FEATURES.
fn controller_session(l: &TcpListener, p: &Pki, me: &Cert) -> std::io::Result<u64> {
    let (s, _) = l.accept()?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let conn = rustls::ServerConnection::new(p.server_config(me)).unwrap();
    let mut c = Of::new(rustls::StreamOwned::new(conn, s));
    c.works()?;
    let x = c.send(&Message::FeaturesRequest)?;
    loop {
        match c.recv()? {
            (xid, Message::FeaturesReply(f)) if xid == x => return Ok(f.datapath_id),
            _ => {}
        }
    }
}

#[test]
fn an_ssl_target_reaches_a_controller_with_a_certificate_the_ca_signed() {
    let p = pki("active");
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let cfg = OpenFlowConfig {
        targets: vec![Target::parse(&format!("ssl:127.0.0.1:{port}")).unwrap()],
        tls: Some(files(&p, &p.switch)),
        datapath_id: 0xabc,
        backoff_min: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        ..OpenFlowConfig::default()
    };
    let (ch, st) = start_with(&sw, cfg);
    // A controller whose certificate another CA signed: the switch refuses it.
    assert!(controller_session(&l, &p, &p.wrong_ca).is_err());
    wait_until("the switch counted the refusal", || {
        ch.counters().tls_refused >= 1
    });
    // It keeps trying and reaches the real one.
    assert_eq!(controller_session(&l, &p, &p.controller).unwrap(), 0xabc);
    stop(ch, st);
}

#[test]
fn tls_settings_that_cannot_work_are_errors_naming_the_file() {
    let p = pki("config");
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let start = |tls: Option<TlsFiles>| {
        let cfg = OpenFlowConfig {
            targets: vec![Target::parse("pssl:127.0.0.1:0").unwrap()],
            tls,
            ..OpenFlowConfig::default()
        };
        OpenFlowChannel::start(
            sw.clone(),
            Arc::new(flowpath_switch::openflow::NoPorts),
            Arc::new(flowpath_switch::openflow::NoPacketIo),
            cfg,
            Arc::new(AtomicBool::new(false)),
        )
        .map(|_| ())
        .unwrap_err()
    };
    let e = start(None);
    assert!(
        e.contains("pssl:127.0.0.1:0") && e.contains("private key"),
        "{e}"
    );
    let mut f = files(&p, &p.switch);
    f.ca_cert = Path::new("/nonexistent/ca.pem").into();
    let e = start(Some(f));
    assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    let mut f = files(&p, &p.switch);
    f.private_key = p.controller.key.clone();
    let e = start(Some(f));
    assert!(
        e.contains("private key") && e.contains("switch-cert.pem"),
        "a key that is not the certificate's: {e}"
    );
    let junk = std::env::temp_dir().join(format!("fp-tls-junk-{}.pem", std::process::id()));
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let mut f = files(&p, &p.switch);
    f.certificate = junk.clone();
    let e = start(Some(f));
    assert!(e.contains(&junk.display().to_string()), "{e}");
}

#[test]
fn a_peer_that_never_finishes_the_handshake_is_closed_by_the_keepalive() {
    let p = pki("stuck");
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let cfg = OpenFlowConfig {
        targets: vec![Target::parse("pssl:127.0.0.1:0").unwrap()],
        tls: Some(files(&p, &p.switch)),
        probe_interval: Duration::from_millis(200),
        max_connections: 1,
        ..OpenFlowConfig::default()
    };
    let (ch, st) = start_with(&sw, cfg);
    let addr = ch.listening[0];
    // Connects and says nothing: it holds the only connection slot, for a while.
    let mut quiet = TcpStream::connect(addr).unwrap();
    quiet
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // The switch closes it (with a TLS close_notify alert at most).
    let mut b = Vec::new();
    quiet.read_to_end(&mut b).expect("closed, not timed out");
    assert!(b.len() < 64, "{} bytes", b.len());
    wait_until("the slot is free again", || ch.connections() == 0);
    Of::new(p.connect(addr, Some(&p.controller)))
        .works()
        .unwrap();
    stop(ch, st);
}
