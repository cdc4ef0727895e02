//! The random valid flows the property tests start from: every field, alias, value form,
//! keyword and action, written in one of the many ways the syntax allows (clauses in any
//! order, decimal or hex, masks, separators), all drawn from one `u64` seed.

use flowpath_base::SplitMix64;
use std::fmt::Write;

/// A small deterministic generator (the project's SplitMix64), so one proptest `u64`
/// drives a whole flow.
pub struct Rng(pub SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    /// A number in decimal or hex.
    fn num(&mut self, v: u64) -> String {
        if self.chance(50) {
            v.to_string()
        } else {
            format!("{v:#x}")
        }
    }
    /// A number in `lo..=hi`, in decimal or hex.
    fn num_in(&mut self, lo: u64, hi: u64) -> String {
        let v = if hi == u64::MAX && lo == 0 {
            self.next()
        } else {
            self.range(lo, hi)
        };
        self.num(v)
    }
    /// `v` or `v/m`, both at most `max`.
    fn masked(&mut self, max: u64) -> String {
        let v = self.range(0, max);
        if self.chance(40) {
            let m = self.range(0, max);
            format!("{}/{}", self.num(v), self.num(m))
        } else {
            self.num(v)
        }
    }
    fn mac(&mut self) -> String {
        let b = self.next().to_be_bytes();
        let mut s = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        );
        if self.chance(30) {
            let m = self.next().to_be_bytes();
            let _ = write!(
                s,
                "/{:x}:{:x}:{:x}:{:X}:{:x}:{:x}",
                m[0], m[1], m[2], m[3], m[4], m[5]
            );
        }
        s
    }
    fn ipv4(&mut self) -> String {
        let a = std::net::Ipv4Addr::from(self.next() as u32);
        match self.below(4) {
            0 => format!("{a}/{}", self.range(0, 32)),
            1 => format!("{a}/{}", std::net::Ipv4Addr::from(self.next() as u32)),
            _ => a.to_string(),
        }
    }
    fn ipv6(&mut self) -> String {
        let v = ((self.next() as u128) << 64) | self.next() as u128;
        // Some short addresses, so that `::` compression shows up.
        let v = if self.chance(30) {
            v >> self.range(0, 127)
        } else {
            v
        };
        let a = std::net::Ipv6Addr::from(v);
        match self.below(4) {
            0 => format!("{a}/{}", self.range(0, 128)),
            1 => {
                let m = ((self.next() as u128) << 64) | self.next() as u128;
                format!("{a}/{}", std::net::Ipv6Addr::from(m))
            }
            _ => a.to_string(),
        }
    }
}

pub const TCP_FLAGS: [&str; 12] = [
    "fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]",
];

/// The protocol context a flow is written in: its clauses, ethertype and IP protocol.
pub const CONTEXTS: &[(&[&str], Option<u16>, Option<u8>)] = &[
    (&[], None, None),
    (&["ip"], Some(0x0800), None),
    (&["ipv4"], Some(0x0800), None),
    (&["ip4"], Some(0x0800), None),
    (&["tcp"], Some(0x0800), Some(6)),
    (&["udp"], Some(0x0800), Some(17)),
    (&["icmp"], Some(0x0800), Some(1)),
    (&["sctp"], Some(0x0800), Some(132)),
    (&["arp"], Some(0x0806), None),
    (&["ipv6"], Some(0x86dd), None),
    (&["ip6"], Some(0x86dd), None),
    (&["tcp6"], Some(0x86dd), Some(6)),
    (&["udp6"], Some(0x86dd), Some(17)),
    (&["icmp6"], Some(0x86dd), Some(58)),
    (&["sctp6"], Some(0x86dd), Some(132)),
    (&["rarp"], Some(0x8035), None),
    (&["mpls"], Some(0x8847), None),
    (&["mplsm"], Some(0x8848), None),
    (&["dl_type=0x88cc"], Some(0x88cc), None),
    (&["eth_type=0x0800"], Some(0x0800), None),
    (&["dl_type=2048", "nw_proto=6"], Some(0x0800), Some(6)),
    (&["ip", "nw_proto=47"], Some(0x0800), Some(47)),
    (&["ipv6", "ip_proto=17"], Some(0x86dd), Some(17)),
    (&["eth_type=0x86dd", "ip_proto=58"], Some(0x86dd), Some(58)),
    (&["ip", "ip_proto=1"], Some(0x0800), Some(1)),
    (&["arp", "arp_op=2"], Some(0x0806), Some(2)),
    (&["arp", "nw_proto=1"], Some(0x0806), Some(1)),
];

/// The VLAN clauses of one tag (`suffix` "" or "1").
pub fn vlan(r: &mut Rng, out: &mut Vec<String>, suffix: &str) {
    match r.below(7) {
        0 => out.push(format!("dl_vlan{suffix}={}", r.num_in(0, 4095))),
        1 => out.push(format!("dl_vlan{suffix}=0xffff")),
        2 => out.push(format!("dl_vlan_pcp{suffix}={}", r.range(0, 7))),
        3 => {
            out.push(format!("dl_vlan{suffix}={}", r.range(0, 4095)));
            out.push(format!("dl_vlan_pcp{suffix}={}", r.range(0, 7)));
        }
        4 => out.push(format!("vlan_tci{suffix}={}", r.masked(0xffff))),
        _ if suffix.is_empty() => {
            let v = r.range(0, 0x1fff);
            let m = if r.chance(50) {
                r.range(0, 0x1fff)
            } else {
                0x1fff
            };
            out.push(format!("vlan_vid={}/{}", r.num(v), r.num(m)));
            if m & 0x1000 == 0 || v & 0x1000 != 0 {
                out.push(format!("vlan_pcp={}", r.range(0, 7)));
            }
        }
        _ => {}
    }
}

/// The ct match fields without prerequisites, in their spellings: `ct_state` as
/// `+flag-flag`, `flag|flag` or numbers, `ct_zone`, `ct_mark`, `ct_label`.
pub fn ct_fields(r: &mut Rng, c: &mut Vec<String>) {
    const FLAGS: [&str; 8] = ["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"];
    if r.chance(12) {
        let v = match r.below(3) {
            0 => {
                let mut s = String::new();
                for f in FLAGS {
                    if r.chance(30) {
                        s.push(if r.chance(50) { '+' } else { '-' });
                        s.push_str(f);
                    }
                }
                if s.is_empty() {
                    "+trk".to_string()
                } else {
                    s
                }
            }
            1 => {
                let set: Vec<&str> = FLAGS.iter().copied().filter(|_| r.chance(30)).collect();
                if set.is_empty() {
                    r.num_in(0, 0xff)
                } else {
                    set.join("|")
                }
            }
            _ => format!("{}/{}", r.num_in(0, 0xff), r.num_in(0, 0xff)),
        };
        c.push(format!("ct_state={v}"));
    }
    if r.chance(5) {
        c.push(format!("ct_zone={}", r.num_in(0, 0xffff)));
    }
    if r.chance(5) {
        c.push(format!("ct_mark={}", r.masked(u32::MAX as u64)));
    }
    if r.chance(5) {
        let (v, m) = (
            r.next() as u128 | (r.next() as u128) << 64,
            r.next() as u128,
        );
        c.push(match r.below(3) {
            0 => format!("ct_label={v:#x}"),
            1 => format!("ct_label={v:#x}/{m:#x}"),
            _ => format!("ct_label={}", r.next()),
        });
    }
}

/// One action in one of its spellings.
pub fn action(r: &mut Rng) -> String {
    match r.below(20) {
        18 => r.pick(&["ct_clear", "CT_CLEAR"]).to_string(),
        0 => {
            let p = r.range(1, u32::MAX as u64);
            match r.below(4) {
                0 => format!("output:{p}"),
                1 => p.to_string(),
                2 => format!("output(port={p})"),
                _ => format!("OUTPUT:{}", r.num(p)),
            }
        }
        1 => r
            .pick(&["in_port", "IN_PORT", "output:in_port"])
            .to_string(),
        2 => {
            let l = r.range(0, 65535);
            match r.below(5) {
                0 => "controller".into(),
                1 => format!("controller:{l}"),
                2 => format!("controller(max_len={l})"),
                3 => format!("CONTROLLER:{l}"),
                _ => "output:controller".into(),
            }
        }
        3 => format!("mod_dl_src:{}", r.mac().split('/').next().unwrap()),
        4 => format!("mod_dl_dst:{}", r.mac().split('/').next().unwrap()),
        5 => format!("mod_nw_src:{}", std::net::Ipv4Addr::from(r.next() as u32)),
        6 => format!("mod_nw_dst:{}", std::net::Ipv4Addr::from(r.next() as u32)),
        7 => format!("mod_nw_tos:{}", r.range(0, 63) * 4),
        8 => format!("mod_tp_src:{}", r.num_in(0, 65535)),
        9 => format!("mod_tp_dst:{}", r.num_in(0, 65535)),
        10 => set_field(r),
        11 => format!("push_vlan:{}", r.pick(&["0x8100", "0x88a8", "33024"])),
        12 => r.pick(&["strip_vlan", "pop_vlan", "POP_VLAN"]).to_string(),
        13 => format!("mod_vlan_vid:{}", r.range(0, 4095)),
        14 => format!("mod_vlan_pcp:{}", r.range(0, 7)),
        15 => r.pick(&["dec_ttl", "DEC_TTL"]).to_string(),
        16 => format!("set_tunnel:{}", r.num_in(0, 0xff_ffff)),
        17 => format!("set_tunnel64:{}", r.num_in(0, 0xff_ffff)),
        _ => format!("mod_nw_tos:{}", r.pick(&[0, 4, 184, 252])),
    }
}

pub fn set_field(r: &mut Rng) -> String {
    let mac = r.mac();
    let mac = mac.split('/').next().unwrap();
    let ip4 = std::net::Ipv4Addr::from(r.next() as u32);
    let ip6 = std::net::Ipv6Addr::from(((r.next() as u128) << 64) | r.next() as u128);
    let (v, f) = match r.below(13) {
        0 => (mac.to_string(), r.pick(&["eth_src", "dl_src"])),
        1 => (mac.to_string(), r.pick(&["eth_dst", "dl_dst"])),
        2 => (ip4.to_string(), r.pick(&["ipv4_src", "ip_src", "nw_src"])),
        3 => (ip4.to_string(), r.pick(&["ipv4_dst", "ip_dst", "nw_dst"])),
        4 => (ip6.to_string(), "ipv6_src"),
        5 => (ip6.to_string(), "ipv6_dst"),
        6 => ((r.range(0, 63) * 4).to_string(), "nw_tos"),
        7 => (r.range(0, 63).to_string(), "ip_dscp"),
        8 => (
            r.num_in(0, 65535),
            r.pick(&["tp_src", "tcp_src", "udp_src"]),
        ),
        9 => (
            r.num_in(0, 65535),
            r.pick(&["tp_dst", "tcp_dst", "udp_dst"]),
        ),
        10 => (r.num_in(0, 0x1fff), "vlan_vid"),
        11 => (r.range(0, 7).to_string(), "vlan_pcp"),
        _ => (r.num_in(0, 0xff_ffff), r.pick(&["tun_id", "tunnel_id"])),
    };
    format!("set_field:{v}->{f}")
}

pub fn tcp_flags(r: &mut Rng) -> String {
    match r.below(4) {
        0 => format!("{}/{}", r.num_in(0, 0xfff), r.num_in(0, 0xfff)),
        1 => r.num_in(0, 0xfff),
        2 => {
            let mut s = String::new();
            for name in TCP_FLAGS {
                if r.chance(25) {
                    s.push(if r.chance(50) { '+' } else { '-' });
                    s.push_str(name);
                }
            }
            if s.is_empty() {
                "+syn".into()
            } else {
                s
            }
        }
        _ => {
            let names: Vec<&str> = TCP_FLAGS.iter().copied().filter(|_| r.chance(25)).collect();
            if names.is_empty() {
                "0".into()
            } else {
                names.join("|")
            }
        }
    }
}

/// A random valid flow: match clauses (any order), keyword clauses, the actions text.
pub struct Gen {
    pub clauses: Vec<String>,
    /// Whether a keyword only `add`/`mod` accept is present (cookie, timeouts).
    pub add_only: bool,
    pub actions: String,
}

pub fn gen_flow(seed: u64) -> Gen {
    let r = &mut Rng(SplitMix64::new(seed));
    let mut c: Vec<String> = Vec::new();
    let (ctx, eth, proto) = r.pick(CONTEXTS);
    c.extend(ctx.iter().map(|s| s.to_string()));
    let ip4 = eth == Some(0x0800);
    let ip6 = eth == Some(0x86dd);
    let arp = eth == Some(0x0806);

    if r.chance(30) {
        c.push(format!("in_port={}", r.num_in(0, u32::MAX as u64)));
    }
    if r.chance(25) {
        c.push(format!("{}={}", r.pick(&["dl_src", "eth_src"]), r.mac()));
    }
    if r.chance(25) {
        c.push(format!("{}={}", r.pick(&["dl_dst", "eth_dst"]), r.mac()));
    }
    if eth.is_none() && r.chance(30) {
        c.push(format!(
            "{}={}",
            r.pick(&["dl_type", "eth_type"]),
            r.num_in(0, 0xffff)
        ));
    }
    if r.chance(25) {
        vlan(r, &mut c, "");
    }
    if r.chance(10) {
        vlan(r, &mut c, "1");
    }
    if r.chance(15) {
        let name = r.pick(&["tun_id", "tunnel_id"]);
        c.push(format!("{name}={}", r.masked(0xff_ffff)));
    }
    if r.chance(10) {
        c.push(format!("tun_src={}", r.ipv4()));
    } else if r.chance(5) {
        c.push(format!("tun_ipv6_src={}", r.ipv6()));
    }
    if r.chance(10) {
        c.push(format!("tun_dst={}", r.ipv4()));
    } else if r.chance(5) {
        c.push(format!("tun_ipv6_dst={}", r.ipv6()));
    }
    if r.chance(10) {
        c.push(format!("tun_flags={}", r.masked(0xff)));
    }
    ct_fields(r, &mut c);
    if ip4 || arp {
        let (s, d): (&[&str], &[&str]) = if ip4 {
            (
                &["nw_src", "ip_src", "ipv4_src"],
                &["nw_dst", "ip_dst", "ipv4_dst"],
            )
        } else {
            (&["nw_src", "arp_spa"], &["nw_dst", "arp_tpa"])
        };
        if r.chance(50) {
            c.push(format!("{}={}", r.pick(s), r.ipv4()));
        }
        if r.chance(50) {
            c.push(format!("{}={}", r.pick(d), r.ipv4()));
        }
    }
    if ip6 {
        if r.chance(50) {
            c.push(format!("ipv6_src={}", r.ipv6()));
        }
        if r.chance(50) {
            c.push(format!("ipv6_dst={}", r.ipv6()));
        }
    }
    if (ip4 || ip6 || arp) && proto.is_none() && r.chance(30) {
        let name = if arp {
            r.pick(&["arp_op", "nw_proto"])
        } else {
            r.pick(&["nw_proto", "ip_proto"])
        };
        c.push(format!("{name}={}", r.range(0, 255)));
    }
    if ip4 || ip6 {
        match r.below(3) {
            0 => c.push(format!("nw_tos={}", r.range(0, 63) * 4)),
            1 => c.push(format!("ip_dscp={}", r.num_in(0, 63))),
            _ => {}
        }
        if r.chance(25) {
            c.push(format!(
                "{}={}",
                r.pick(&["nw_ecn", "ip_ecn"]),
                r.range(0, 3)
            ));
        }
        if r.chance(25) {
            c.push(format!("nw_ttl={}", r.range(0, 255)));
        }
        if r.chance(25) {
            let v = if r.chance(70) {
                r.pick(&["no", "yes", "first", "later", "not_later", "LATER"])
                    .to_string()
            } else {
                r.masked(0xff)
            };
            c.push(format!("{}={v}", r.pick(&["ip_frag", "nw_frag"])));
        }
    }
    let l4 = |r: &mut Rng| {
        if r.chance(50) {
            r.num_in(0, 65535)
        } else {
            r.masked(0xffff)
        }
    };
    if (ip4 || ip6) && matches!(proto, Some(6 | 17)) {
        let tcp = proto == Some(6);
        let own = if tcp {
            ["tcp_src", "tcp_dst"]
        } else {
            ["udp_src", "udp_dst"]
        };
        if r.chance(60) {
            let n = r.pick(&["tp_src", own[0]]);
            c.push(format!("{n}={}", l4(r)));
        }
        if r.chance(60) {
            let n = r.pick(&["tp_dst", own[1]]);
            c.push(format!("{n}={}", l4(r)));
        }
        if tcp && r.chance(40) {
            c.push(format!("tcp_flags={}", tcp_flags(r)));
        }
    }
    let icmp4 = ip4 && proto == Some(1);
    let icmp6 = ip6 && proto == Some(58);
    if icmp4 || icmp6 {
        let (t, code): (&[&str], &[&str]) = if icmp6 {
            (&["icmp_type", "icmpv6_type"], &["icmp_code", "icmpv6_code"])
        } else {
            (&["icmp_type"], &["icmp_code"])
        };
        let val = |r: &mut Rng| {
            let v = r.range(0, 255);
            if r.chance(25) {
                format!("{}/{}", r.num(v), r.num_in(0, 0xffff))
            } else {
                r.num(v)
            }
        };
        if r.chance(60) {
            let n = r.pick(t);
            c.push(format!("{n}={}", val(r)));
        }
        if r.chance(60) {
            let n = r.pick(code);
            c.push(format!("{n}={}", val(r)));
        }
    }

    let table = if r.chance(50) { r.range(0, 254) } else { 0 };
    if table != 0 || r.chance(20) {
        c.push(format!("table={table}"));
    }
    if r.chance(60) {
        c.push(format!("priority={}", r.num_in(0, 65535)));
    }
    let mut add_only = false;
    if r.chance(20) {
        c.push(format!("cookie={}", r.num_in(0, u64::MAX)));
        add_only = true;
    }
    if r.chance(15) {
        c.push(format!("idle_timeout={}", r.range(0, 65535)));
        add_only = true;
    }
    if r.chance(15) {
        c.push(format!("hard_timeout={}", r.range(0, 65535)));
        add_only = true;
    }
    if r.chance(5) {
        c.push("n_packets=7".into());
    }
    // Shuffle: prerequisites do not depend on the order.
    for i in (1..c.len()).rev() {
        let j = r.below(i as u64 + 1) as usize;
        c.swap(i, j);
    }

    let actions = match r.below(20) {
        0 => "drop".to_string(),
        1 => String::new(),
        _ => {
            let n = r.range(0, 5);
            let mut acts: Vec<String> = (0..n).map(|_| action(r)).collect();
            if table < 254 && r.chance(40) {
                let t = r.range(table + 1, 254);
                acts.push(if r.chance(70) {
                    format!("goto_table:{t}")
                } else {
                    format!("resubmit(,{t})")
                });
            }
            if acts.is_empty() {
                "drop".into()
            } else {
                let sep = r.pick(&[",", ", ", " "]);
                acts.join(sep)
            }
        }
    };
    Gen {
        clauses: c,
        add_only,
        actions,
    }
}

pub fn join_clauses(r: &mut Rng, clauses: &[String]) -> String {
    let mut s = String::new();
    if r.chance(10) {
        s.push(' ');
    }
    for (i, c) in clauses.iter().enumerate() {
        if i > 0 {
            s.push_str(r.pick(&[",", ", ", " ", "\t", " , "]));
        }
        s.push_str(c);
    }
    s
}

pub fn add_text(seed: u64, g: &Gen) -> String {
    let r = &mut Rng(SplitMix64::new(seed ^ 0x5eed));
    let mut s = join_clauses(r, &g.clauses);
    if !s.is_empty() {
        s.push_str(r.pick(&[" ", ",", ", ", "  "]));
    }
    s.push_str("actions=");
    s.push_str(&g.actions);
    s
}
