//! `type = "vxlan"` ports in the switch config: what they parse to, and errors that name the
//! field at fault.

use flowpath_datapath::{TunnelKey, TunnelRemote, UnderlayHop};
use flowpath_switch::config::DaemonConfig;
use std::net::IpAddr;

const UNDERLAY: &str = r#"
[[port]]
name = "p1"
number = 1
type = "generator"
"#;

fn with_vxlan(fields: &str) -> Result<DaemonConfig, String> {
    DaemonConfig::parse(&format!(
        "{UNDERLAY}\n[[port]]\nname = \"vx0\"\nnumber = 10\ntype = \"vxlan\"\n{fields}\n"
    ))
}

fn err(fields: &str) -> String {
    with_vxlan(fields).expect_err("must be refused")
}

#[test]
fn a_static_vxlan_port_parses() {
    let cfg = with_vxlan(
        r#"remote_ip = "192.0.2.2"
local_ip = "192.0.2.1"
key = 42
underlay_port = 1
next_hop_mac = "02:00:00:00:00:02"
local_mac = "02:00:00:00:00:01""#,
    )
    .unwrap();
    let t = cfg.tunnel_ports();
    assert_eq!(t.len(), 1);
    let (p, hop) = &t[0];
    assert_eq!((p.number, p.name.as_str(), p.dst_port), (10, "vx0", 4789));
    assert_eq!(p.remote, TunnelRemote::Fixed("192.0.2.2".parse().unwrap()));
    assert_eq!(p.local, Some("192.0.2.1".parse().unwrap()));
    assert_eq!(p.key, TunnelKey::Fixed(42));
    assert_eq!(
        *hop,
        Some(UnderlayHop {
            port: 1,
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: "192.0.2.1".parse::<IpAddr>().unwrap(),
        })
    );
}

#[test]
fn flow_remote_and_key_and_ipv6_parse() {
    let cfg = with_vxlan(
        r#"remote_ip = "flow"
local_ip = "2001:db8::1"
key = "flow"
dst_port = 8472"#,
    )
    .unwrap();
    let (p, hop) = &cfg.tunnel_ports()[0];
    assert_eq!(
        (p.remote, p.key, p.dst_port),
        (TunnelRemote::Flow, TunnelKey::Flow, 8472)
    );
    assert!(hop.is_none());
}

#[test]
fn errors_name_the_field() {
    // Each case: the vxlan port's lines, and how the error starts.
    const REMOTE: &str = r#"remote_ip = "192.0.2.2""#;
    const LOCAL: &str = r#"local_ip = "192.0.2.1""#;
    const MAC: &str = r#"next_hop_mac = "02:00:00:00:00:02""#;
    let cases: [(&[&str], &str); 13] = [
        (&[], "port[1].remote_ip:"),
        (&[r#"remote_ip = "192.0.2.300""#], "port[1].remote_ip:"),
        (&[r#"remote_ip = "224.0.0.1""#], "port[1].remote_ip:"),
        (&[REMOTE, r#"local_ip = "nope""#], "port[1].local_ip:"),
        (
            &[REMOTE, r#"local_ip = "2001:db8::1""#],
            "port[1].local_ip:",
        ),
        (&[REMOTE, "key = 16777216"], "port[1].key:"),
        (&[REMOTE, r#"key = "any""#], "port[1].key:"),
        (&[REMOTE, "dst_port = 0"], "port[1].dst_port:"),
        (
            &[
                REMOTE,
                LOCAL,
                "underlay_port = 1",
                r#"next_hop_mac = "02:00:00""#,
            ],
            "port[1].next_hop_mac:",
        ),
        (
            &[REMOTE, LOCAL, "underlay_port = 1"],
            "port[1].next_hop_mac:",
        ),
        (&[REMOTE, LOCAL, MAC], "port[1].underlay_port:"),
        (
            &[REMOTE, LOCAL, "underlay_port = 7", MAC],
            "port[1].underlay_port:",
        ),
        (&[REMOTE, "underlay_port = 1", MAC], "port[1].local_ip:"),
    ];
    for (lines, want) in cases {
        let fields = lines.join("\n");
        let e = err(&fields);
        assert!(e.starts_with(want), "{fields:?}: {e}");
    }
    // Tunnel fields on another kind of port.
    let e = DaemonConfig::parse(&format!("{UNDERLAY}remote_ip = \"192.0.2.2\"\n")).unwrap_err();
    assert!(e.contains("'remote_ip' is only for type vxlan"), "{e}");
    // Two vxlan ports on different UDP ports.
    let e = DaemonConfig::parse(&format!(
        "{UNDERLAY}
[[port]]
name = \"vx0\"
number = 10
type = \"vxlan\"
remote_ip = \"192.0.2.2\"
[[port]]
name = \"vx1\"
number = 11
type = \"vxlan\"
remote_ip = \"192.0.2.3\"
dst_port = 8472
"
    ))
    .unwrap_err();
    assert!(e.starts_with("port[2].dst_port:"), "{e}");
}
