//! Property tests: random valid flows written the many ways the syntax allows round-trip
//! through `format_flow`; arbitrary and damaged input never panics and always gets a
//! column inside the text.

use flowpath_base::SplitMix64;
use flowpath_flowsyntax::{format_flow, parse_flow, FlowCommand, ParsedFlow, SyntaxError};
use proptest::prelude::*;
use std::fmt::Write;

/// A small deterministic generator (the project's SplitMix64), so one proptest `u64`
/// drives a whole flow.
struct Rng(SplitMix64);

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

const TCP_FLAGS: [&str; 12] = [
    "fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]",
];

/// The protocol context a flow is written in: its clauses, ethertype and IP protocol.
const CONTEXTS: &[(&[&str], Option<u16>, Option<u8>)] = &[
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
fn vlan(r: &mut Rng, out: &mut Vec<String>, suffix: &str) {
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

/// One action in one of its spellings.
fn action(r: &mut Rng) -> String {
    match r.below(19) {
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

fn set_field(r: &mut Rng) -> String {
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

fn tcp_flags(r: &mut Rng) -> String {
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
struct Gen {
    clauses: Vec<String>,
    /// Whether a keyword only `add`/`mod` accept is present (cookie, timeouts).
    add_only: bool,
    actions: String,
}

fn gen_flow(seed: u64) -> Gen {
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

fn join_clauses(r: &mut Rng, clauses: &[String]) -> String {
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

fn add_text(seed: u64, g: &Gen) -> String {
    let r = &mut Rng(SplitMix64::new(seed ^ 0x5eed));
    let mut s = join_clauses(r, &g.clauses);
    if !s.is_empty() {
        s.push_str(r.pick(&[" ", ",", ", ", "  "]));
    }
    s.push_str("actions=");
    s.push_str(&g.actions);
    s
}

fn check_round_trip(text: &str) -> Result<ParsedFlow, TestCaseError> {
    let f1 = parse_flow(text, FlowCommand::Add)
        .map_err(|e| TestCaseError::fail(format!("generated flow refused: {text}\n  {e}")))?;
    let t1 = format_flow(&f1.spec);
    let f2 = parse_flow(&t1, FlowCommand::Add).map_err(|e| {
        TestCaseError::fail(format!(
            "printed flow refused: {text}\n  printed {t1}\n  {e}"
        ))
    })?;
    prop_assert_eq!(&f2.spec, &f1.spec, "{}\n  printed {}", text, t1);
    let t2 = format_flow(&f2.spec);
    prop_assert_eq!(&t2, &t1, "{}", text);
    Ok(f1)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    /// parse(format(parse(s))) == parse(s) and format is a fixed point, for random valid
    /// flows over every field, alias, value form and action.
    #[test]
    fn valid_flows_round_trip(seed in any::<u64>()) {
        let g = gen_flow(seed);
        let text = add_text(seed, &g);
        let f = check_round_trip(&text)?;
        // Modify reads the same flow (without a cookie mask) the same way, but a plain
        // cookie sets rather than selects.
        let m = parse_flow(&text, FlowCommand::Modify).unwrap();
        prop_assert_eq!(&m.spec, &f.spec);
        // The match part alone: refused by add ("missing actions" at the end), and as a
        // delete it selects the same match.
        let r = &mut Rng(SplitMix64::new(seed));
        let del = join_clauses(r, &g.clauses);
        check_any(&del)?;
        if !g.add_only {
            let d = parse_flow(&del, FlowCommand::DeleteStrict)
                .map_err(|e| TestCaseError::fail(format!("{del}: {e}")))?;
            prop_assert_eq!(d.spec.matches, f.spec.matches, "{}", del);
            prop_assert_eq!((d.spec.table, d.spec.priority), (f.spec.table, f.spec.priority));
            prop_assert!(d.spec.actions.is_empty() && d.spec.goto.is_none());
        }
    }
}

/// Every error has a column inside the text (or just past its end) that its message
/// names; every accepted flow round-trips.
fn check_any(text: &str) -> Result<(), TestCaseError> {
    let len = text.chars().count();
    for cmd in [
        FlowCommand::Add,
        FlowCommand::Modify,
        FlowCommand::ModifyStrict,
        FlowCommand::Delete,
        FlowCommand::DeleteStrict,
    ] {
        match parse_flow(text, cmd) {
            Err(SyntaxError { column, message }) => {
                prop_assert!(
                    (1..=len + 1).contains(&column),
                    "{:?}: column {} outside 1..={}: {}",
                    text,
                    column,
                    len + 1,
                    message
                );
                let needle = format!("column {column}");
                prop_assert!(message.contains(&needle), "{:?}: {}", text, message);
            }
            Ok(f) => {
                let printed = format_flow(&f.spec);
                let back = parse_flow(&printed, FlowCommand::Add).map_err(|e| {
                    TestCaseError::fail(format!(
                        "{text:?} accepted, printed {printed:?} refused: {e}"
                    ))
                })?;
                prop_assert_eq!(&back.spec, &f.spec, "{:?} printed {:?}", text, printed);
            }
        }
    }
    Ok(())
}

/// Characters flows are made of, so that fuzzing gets past the first token.
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz_0123456789xX=:,./()+->| \t[]ACNOPT";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        check_any(&s)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..160)) {
        check_any(&String::from_utf8_lossy(&b))?;
    }

    #[test]
    fn flow_alphabet_never_panics(b in prop::collection::vec(prop::sample::select(ALPHABET), 0..100)) {
        check_any(std::str::from_utf8(&b).unwrap())?;
    }

    /// Valid flows with random damage: deleted, inserted, swapped characters (including
    /// multi-byte ones, to check that columns count characters).
    #[test]
    fn damaged_flows_never_panic(seed in any::<u64>(), edits in prop::collection::vec(any::<(u16, u16, u8)>(), 1..5)) {
        let g = gen_flow(seed);
        let mut chars: Vec<char> = add_text(seed, &g).chars().collect();
        for (pos, len, what) in edits {
            let at = pos as usize % (chars.len() + 1);
            match what % 4 {
                0 => {
                    let end = (at + len as usize % 6).min(chars.len());
                    chars.drain(at..end);
                }
                1 => chars.insert(at, ALPHABET[len as usize % ALPHABET.len()] as char),
                2 => chars.insert(at, ['é', '名', '\u{1F600}', '\0'][len as usize % 4]),
                _ if chars.len() > 1 => {
                    let other = len as usize % chars.len();
                    let at = at.min(chars.len() - 1);
                    chars.swap(at, other);
                }
                _ => {}
            }
        }
        let text: String = chars.into_iter().collect();
        check_any(&text)?;
    }
}
