//! OpenFlow over TLS with the real tools: `ovs-ofctl` programs and dumps `flowpath run
//! --openflow pssl:...` over `ssl:` with certificates made at test time, and is refused
//! with a certificate from another CA, an expired one, or none over plain TCP, while the
//! switch goes on serving; and `flowpath run --openflow ssl:...` reaches a controller the
//! test plays with rustls (HELLO, FEATURES_REQUEST), and os-ken listening for TLS
//! (`--ofp-ssl-listen-port`) programs it.
//!
//! Everything is on 127.0.0.1 with ports the system picks. Needs ovs-ofctl and os-ken (from
//! `scripts/setup-openflow-peers.sh`) for those tests: each says it skips when its peer is
//! missing, unless `FLOWPATH_OPENFLOW_REQUIRED=1`, where it fails.

#[path = "../../switch/tests/common/certs.rs"]
mod certs;
mod common;
mod openflow_support;
use certs::{Cert, Pki};
use common::harness::{need, out_text, tail, wait_for, Proc};
use common::BIN;
use flowpath_openflow::{decode, message_len, Message};
use openflow_support::{venv_bin, DATA, H};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// `flowpath run --openflow TARGET` with the switch's key, certificate and the CA.
fn run_switch(dir: &Path, pki: &Pki, target: &str) -> (Proc, PathBuf) {
    let log = dir.join("flowpath.log");
    let mut c = Command::new(BIN);
    c.args(["run", "--no-state", "--control"])
        .arg(dir.join("ctl.sock"))
        .args(["--openflow", target, "--private-key"])
        .arg(&pki.switch.key)
        .arg("--certificate")
        .arg(&pki.switch.cert)
        .arg("--ca-cert")
        .arg(&pki.ca);
    (Proc::spawn(c, "flowpath run --openflow", &log), log)
}

/// The port the switch's listener got (it logs `listening on 127.0.0.1:PORT`).
fn listening_port(p: &mut Proc, log: &Path) -> u16 {
    let mut port = None;
    wait_for("the switch listens", Duration::from_secs(30), || {
        assert!(
            p.exited().is_none(),
            "the switch exited:\n{}",
            tail(log, 20)
        );
        let text = std::fs::read_to_string(log).unwrap_or_default();
        port = text
            .lines()
            .find_map(|l| l.split("listening on 127.0.0.1:").nth(1))
            .and_then(|p| p.trim().parse().ok());
        port.is_some()
    });
    port.unwrap()
}

fn ofctl(pki: &Pki, me: Option<&Cert>, target: &str, cmd: &str, args: &[&str]) -> Output {
    let mut c = Command::new("ovs-ofctl");
    c.args(["-O", "OpenFlow13", "--timeout=10"]);
    if let Some(me) = me {
        c.arg(format!("--private-key={}", me.key.display()))
            .arg(format!("--certificate={}", me.cert.display()))
            .arg(format!("--ca-cert={}", pki.ca.display()));
    }
    c.arg(cmd).arg(target).args(args).output().unwrap()
}

#[test]
fn ovs_ofctl_over_ssl_and_the_peers_refused() {
    need!(H, H.need_tools(&["ovs-ofctl"]));
    let tmp = H.scratch(&format!("fpoftls-{}", std::process::id()));
    let pki = Pki::new(&tmp.0.join("pki"));
    let (mut sw, log) = run_switch(&tmp.0, &pki, "pssl:127.0.0.1:0");
    let port = listening_port(&mut sw, &log);
    let ssl = format!("ssl:127.0.0.1:{port}");
    let ok = |o: Output, what: &str| {
        assert!(
            o.status.success(),
            "{what}: {}\n--- switch log:\n{}",
            out_text(&o),
            tail(&log, 30)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let flow = "table=0,priority=5,ip,nw_dst=10.0.0.0/8,actions=output:1";
    ok(
        ofctl(&pki, Some(&pki.controller), &ssl, "add-flow", &[flow]),
        "add-flow over ssl",
    );
    let d = ok(
        ofctl(&pki, Some(&pki.controller), &ssl, "dump-flows", &[]),
        "dump-flows over ssl",
    );
    assert!(
        d.contains("priority=5,ip,nw_dst=10.0.0.0/8 actions=output:1"),
        "dump-flows over ssl: {d}"
    );

    for (what, me, target) in [
        ("a certificate from another CA", Some(&pki.wrong_ca), &ssl),
        ("an expired certificate", Some(&pki.expired), &ssl),
        (
            "plain TCP on the TLS port",
            None,
            &format!("tcp:127.0.0.1:{port}"),
        ),
    ] {
        let o = ofctl(&pki, me, target, "dump-flows", &[]);
        assert!(!o.status.success(), "{what}: served: {}", out_text(&o));
    }
    wait_for("the refusals logged", Duration::from_secs(10), || {
        let t = std::fs::read_to_string(&log).unwrap_or_default();
        t.matches("TLS handshake refused").count() >= 3
    });
    let d = ok(
        ofctl(&pki, Some(&pki.controller), &ssl, "dump-flows", &[]),
        "dump-flows over ssl after the refusals",
    );
    assert!(d.contains("nw_dst=10.0.0.0/8"), "{d}");
}

#[test]
fn an_ssl_target_reaches_a_tls_controller() {
    let tmp = H.scratch(&format!("fpoftls-active-{}", std::process::id()));
    let pki = Pki::new(&tmp.0.join("pki"));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (mut sw, log) = run_switch(&tmp.0, &pki, &format!("ssl:127.0.0.1:{port}"));
    let (s, _) = l.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let conn = rustls::ServerConnection::new(pki.server_config(&pki.controller)).unwrap();
    let mut t = rustls::StreamOwned::new(conn, s);
    let mut buf = Vec::new();
    let mut recv = |t: &mut rustls::StreamOwned<_, _>| -> Message {
        loop {
            if let Ok(Some(n)) = message_len(&buf) {
                if buf.len() >= n {
                    let raw: Vec<u8> = buf.drain(..n).collect();
                    return decode(&raw).unwrap().1;
                }
            }
            let mut chunk = [0u8; 4096];
            let n = t
                .read(&mut chunk)
                .unwrap_or_else(|e| panic!("reading from the switch: {e}\n{}", tail(&log, 20)));
            assert!(n > 0, "the switch closed:\n{}", tail(&log, 20));
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    assert!(matches!(recv(&mut t), Message::Hello(_)));
    t.write_all(&Message::hello().encode(1)).unwrap();
    t.write_all(&Message::FeaturesRequest.encode(2)).unwrap();
    let f = loop {
        if let Message::FeaturesReply(f) = recv(&mut t) {
            break f;
        }
    };
    assert_eq!(
        f.datapath_id, 0x0000_f10e_9a70_0001,
        "flowpath run's datapath id"
    );
    sw.stop();
}

/// A port nothing listens on now (the system's pick, let go).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn os_ken_over_tls_programs_the_switch() {
    need!(H, venv_bin("osken-manager"));
    let manager = venv_bin("osken-manager").unwrap();
    let tmp = H.scratch(&format!("fpoftls-osken-{}", std::process::id()));
    let pki = Pki::new(&tmp.0.join("pki"));
    let (tcp, ssl) = (free_port(), free_port());
    let log = tmp.0.join("osken.log");
    let mut c = Command::new(&manager);
    c.args(["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port"])
        .arg(tcp.to_string())
        .arg("--ofp-ssl-listen-port")
        .arg(ssl.to_string())
        .arg("--ctl-privkey")
        .arg(&pki.controller.key)
        .arg("--ctl-cert")
        .arg(&pki.controller.cert)
        .arg("--ca-certs")
        .arg(&pki.ca)
        .arg(format!("{DATA}/simple_switch_13.py"));
    let _osken = Proc::spawn(c, "osken-manager", &log);
    let (_sw, swlog) = run_switch(&tmp.0, &pki, &format!("ssl:127.0.0.1:{ssl}"));
    // The app answers the switch's features with its table-miss flow, over TLS.
    let dump = || {
        let o = Command::new(BIN)
            .args(["flows", "dump", "--control"])
            .arg(tmp.0.join("ctl.sock"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_lowercase()
    };
    let t = std::time::Instant::now();
    loop {
        let flows = dump();
        if flows
            .lines()
            .any(|l| l.contains("priority=0") && l.contains("controller"))
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "os-ken did not install its table-miss flow over TLS: {flows}\n--- os-ken:\n{}\n--- switch:\n{}",
            tail(&log, 20),
            tail(&swlog, 20)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
