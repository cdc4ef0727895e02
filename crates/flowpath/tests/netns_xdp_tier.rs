//! `flowpath switch` with `[datapath] xdp_tier = true` on veths in a namespace (needs root,
//! `ip netns` and the XDP objects; skipped otherwise, saying why):
//!
//! - the sinks get byte-for-byte the same frames with the tier on as with it off (and as
//!   the datapath itself computes), the kernel answered most of them, and `flows dump`
//!   counts every packet, kernel hits included;
//! - while a flow's output changes under a paced stream of numbered packets, none is
//!   lost and none sent after the change was acknowledged arrives at the old port;
//! - SIGTERM, and SIGKILL, leave no XDP program on the switch's interfaces;
//! - a megaflow dropped unproven (no second packet within its reviews) reaches the kernel
//!   once its second packet comes, however late.
//!
//! Native redirect into a veth only delivers when the veth's PEER has an XDP program, so
//! the capture ends b0 and c0 get `xdp_pass` (see docs/xdp-tier.md).

use flowpath_gen::{build, FrameSpec};
use flowpath_inspect::WorkerMegaflows;
use flowpath_ports::afpacket::AfPacketPort;
use flowpath_ports::{PacketBatch, Port};
use flowpath_switch::{call, Op, Request, Response};
use std::net::Ipv4Addr;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{is_our_udp, on_port, paced, reference, test_frame, Lab};

const FLOWS: &str = "\
priority=10,in_port=1,udp,tp_dst=53 actions=drop
priority=5,in_port=1,ip,nw_dst=192.168.0.0/24 actions=mod_dl_dst:02:00:00:00:00:02,mod_nw_src:10.9.9.9,dec_ttl,output:2
priority=5,in_port=1,ip,nw_dst=192.168.1.0/24 actions=mod_vlan_vid:7,output:3
priority=5,in_port=1,ip,nw_dst=192.168.2.0/24 actions=push_vlan:0x88a8,mod_vlan_vid:9,output:3
priority=4,in_port=1,dl_vlan=5 actions=strip_vlan,output:2
";

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, AF_PACKET, XDP)".into());
    }
    if !flowpath_ports::xdp::bpf_available() || !flowpath_switch::tier::tier_available() {
        return Some("built without clang (no XDP programs)".into());
    }
    if !std::path::Path::new("/sys/fs/bpf").exists() {
        return Some("no BPF support (/sys/fs/bpf missing)".into());
    }
    common::netns_skip_reason()
}

/// The `[datapath]` lines that turn the XDP tier on or off.
fn tier_config(tier: bool) -> String {
    format!("xdp_tier = {tier}\nxdp_tier_max = 65536\n")
}

macro_rules! need_root_netns_bpf {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("skipping: {why}");
            return;
        }
    };
}

fn frames(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let dst = match i % 6 {
                0 | 1 => Ipv4Addr::new(192, 168, 0, (i % 200) as u8 + 1),
                2 => Ipv4Addr::new(192, 168, 1, 9),
                3 => Ipv4Addr::new(172, 16, 0, 1), // no rule: dropped
                4 => Ipv4Addr::new(192, 168, 2, (i % 7) as u8 + 1),
                _ => Ipv4Addr::new(192, 168, 0, 1),
            };
            test_frame(i, dst, i % 6 == 5)
        })
        .collect()
}

/// n_packets and n_bytes of each dump line, in dump order.
fn counts(lines: &[String]) -> Vec<(u64, u64)> {
    let num = |l: &str, k: &str| -> u64 {
        let at = l.find(k).unwrap_or_else(|| panic!("no {k} in {l}")) + k.len();
        l[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    lines
        .iter()
        .map(|l| (num(l, "n_packets="), num(l, "n_bytes=")))
        .collect()
}

type Frames = Vec<Vec<u8>>;
/// n_packets, n_bytes per rule.
type Counts = Vec<(u64, u64)>;

/// What the datapath itself does with the frames: (port, frame) in order, and the rule
/// counters afterwards.
fn reference_counts(flows: &str, fr: &[Vec<u8>]) -> (Vec<(u32, Vec<u8>)>, Counts) {
    let (sw, out) = reference(flows, fr);
    let dump = sw.handle(&Request {
        op: Op::Dump,
        text: String::new(),
    });
    (out, counts(&dump.lines))
}

/// Capture ends: b0 and c0 as AF_PACKET ports, each with `xdp_pass` so that native
/// redirects into b1/c1 are delivered.
struct Sinks {
    b: AfPacketPort,
    c: AfPacketPort,
    _pass: Vec<flowpath_ports::xdp::XdpGuard>,
    batch: PacketBatch,
}

impl Sinks {
    fn open() -> Sinks {
        let pass = vec![
            flowpath_ports::xdp::attach_xdp_pass("b0").unwrap(),
            flowpath_ports::xdp::attach_xdp_pass("c0").unwrap(),
        ];
        Sinks {
            b: AfPacketPort::open("b0", "b0", false).unwrap(),
            c: AfPacketPort::open("c0", "c0", false).unwrap(),
            _pass: pass,
            batch: PacketBatch::new(),
        }
    }

    fn drain(&mut self, b: &mut Vec<Vec<u8>>, c: &mut Vec<Vec<u8>>) {
        for (p, out) in [(&mut self.b, b), (&mut self.c, c)] {
            loop {
                self.batch.clear();
                let n = p.recv(&mut self.batch).unwrap();
                for i in 0..n {
                    let f = self.batch.frame(i);
                    if is_our_udp(f) {
                        out.push(f.to_vec());
                    }
                }
                if n == 0 {
                    break;
                }
            }
        }
    }

    /// Drain until `want` frames in all, or a quiet second; then a little longer.
    fn settle(&mut self, b: &mut Vec<Vec<u8>>, c: &mut Vec<Vec<u8>>, want: usize) {
        let mut quiet = Instant::now();
        let mut last = 0;
        while quiet.elapsed() < Duration::from_secs(1) && b.len() + c.len() < want {
            self.drain(b, c);
            if b.len() + c.len() != last {
                last = b.len() + c.len();
                quiet = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(100));
        self.drain(b, c);
    }
}

/// Send `fr` from a0 at about `pps` (numbering them through `sent`: frame k is sent after
/// `sent` became k+1), capturing at b0 and c0.
fn send_and_capture(
    lab: &Lab,
    fr: Vec<Vec<u8>>,
    pps: u64,
    want: usize,
    sent: Arc<AtomicU64>,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    lab.inside(move || {
        let mut tx = AfPacketPort::open("a0", "a0", false).unwrap();
        let mut sinks = Sinks::open();
        let (mut b, mut c) = (Vec::new(), Vec::new());
        paced(&fr, pps, |chunk| {
            for f in chunk {
                sent.fetch_add(1, Ordering::SeqCst);
                assert!(tx.send(f), "a0 tx ring full at a paced rate");
            }
            tx.flush().unwrap();
            sinks.drain(&mut b, &mut c);
        });
        sinks.settle(&mut b, &mut c, want);
        (b, c)
    })
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

/// The switch's "xdp tier:" stats line.
fn tier_line(r: &Response) -> &str {
    r.lines
        .iter()
        .find(|l| l.starts_with("xdp tier:"))
        .unwrap_or_else(|| panic!("no xdp tier line in stats: {:?}", r.lines))
}

/// The value of `key=` in the switch's "xdp tier:" stats line.
fn tier_stat(r: &Response, key: &str) -> u64 {
    let line = tier_line(r);
    let at = line.find(&format!(" {key}=")).unwrap() + key.len() + 2;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// (entries, entries in hot lines) from the switch's "xdp tier: N entries (H in hot
/// lines)" stats line.
fn tier_occupancy(r: &Response) -> (u64, u64) {
    let line = tier_line(r);
    let mut nums = line["xdp tier:".len()..]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse::<u64>().unwrap());
    let entries = nums.next().expect("entries");
    assert!(line.contains("in hot lines)"), "{line}");
    (entries, nums.next().expect("hot lines"))
}

/// One run: (frames at b0, frames at c0, rule counters, stats response, megaflows).
fn run(
    tier: bool,
    fr: &[Vec<u8>],
    want: usize,
) -> (Frames, Frames, Counts, Response, Vec<WorkerMegaflows>) {
    let lab = Lab::new(if tier { "fpx-on" } else { "fpx-off" });
    let sw = lab.start_switch(FLOWS, "afxdp", &tier_config(tier));
    if tier {
        for dev in ["a1", "b1", "c1"] {
            let x = lab.xdp_of(dev);
            assert!(x.contains("flow_tier"), "{dev}: flow_tier attached: {x}");
        }
    }
    // Twice: the first pass teaches the caches, the second is mostly kernel hits.
    let mut all = fr.to_vec();
    all.extend_from_slice(fr);
    let (b, c) = send_and_capture(&lab, all, 20_000, want, Arc::new(AtomicU64::new(0)));
    let stats = lab.ask(Op::Stats, "");
    let dump = lab.ask(Op::Dump, "");
    let megaflows = lab.ask(Op::Megaflows, "");
    let megaflows = serde_json::from_value(megaflows.data.expect("megaflows data")).unwrap();
    let (ok, err) = sw.stop();
    assert!(ok, "switch exit: {err}");
    if tier {
        for dev in ["a1", "b1", "c1"] {
            assert_eq!(lab.xdp_of(dev), "", "{dev}: no XDP program after SIGTERM");
        }
    }
    (b, c, counts(&dump.lines), stats, megaflows)
}

#[test]
fn xdp_tier_forwards_exactly_as_user_space() {
    need_root_netns_bpf!();
    let fr = frames(3000);
    let mut twice = fr.clone();
    twice.extend_from_slice(&fr);
    let (want, want_counts) = reference_counts(FLOWS, &twice);
    let want_b = sorted(on_port(&want, 2));
    let want_c = sorted(on_port(&want, 3));
    assert!(want_b.len() > 2000 && want_c.len() > 1000);

    let (off_b, off_c, off_counts, _, off_mf) = run(false, &fr, want.len());
    let (on_b, on_c, on_counts, stats, on_mf) = run(true, &fr, want.len());
    for (name, b, c) in [("off", off_b, off_c), ("on", on_b, on_c)] {
        let (b, c) = (sorted(b), sorted(c));
        assert_eq!(b.len(), want_b.len(), "tier {name}: frames at b0");
        assert_eq!(c.len(), want_c.len(), "tier {name}: frames at c0");
        for (i, (g, w)) in b.iter().zip(&want_b).enumerate() {
            assert_eq!(g, w, "tier {name}: b0 frame {i} differs");
        }
        for (i, (g, w)) in c.iter().zip(&want_c).enumerate() {
            assert_eq!(g, w, "tier {name}: c0 frame {i} differs");
        }
    }
    assert_eq!(off_counts, want_counts, "rule counters, tier off");
    assert_eq!(
        on_counts, want_counts,
        "rule counters with the tier on (kernel hits credited)"
    );
    let hits = tier_stat(&stats, "hit_output") + tier_stat(&stats, "hit_drop");
    let ups = tier_stat(&stats, "miss") + tier_stat(&stats, "stale");
    eprintln!(
        "kernel: {hits} hits, {ups} misses of {} frames; {:?}",
        twice.len(),
        stats.lines.last()
    );
    assert!(
        hits as usize > twice.len() * 3 / 4,
        "the kernel tier answered most packets: {hits} of {}",
        twice.len()
    );
    // "N entries (H in hot lines)": the plain drop and output megaflows have their
    // bucket's line; those that rewrite or change VLAN tags (most of FLOWS) cannot.
    let (entries, hot) = tier_occupancy(&stats);
    assert!(
        hot > 0 && hot < entries,
        "entries and hot lines in the stats line: {entries}, {hot}"
    );
    // dump-megaflows: the same megaflows either way; with the tier on, those the kernel
    // holds say so, and their counts include the kernel's hits.
    let total = |w: &[WorkerMegaflows]| -> (u64, u64, u64) {
        let flows = w.iter().flat_map(|w| &w.flows);
        (
            w.iter().map(|w| w.megaflows).sum(),
            w.iter().map(|w| w.xdp_entries).sum(),
            flows.map(|f| f.packets).sum(),
        )
    };
    let (off_n, off_x, off_p) = total(&off_mf);
    let (on_n, on_x, on_p) = total(&on_mf);
    eprintln!("megaflows: off {off_n} ({off_p} packets), on {on_n}, {on_x} in the kernel ({on_p} packets)");
    assert_eq!(off_x, 0);
    assert!(on_x > 0 && on_x <= on_n, "{on_mf:?}");
    assert!(on_mf
        .iter()
        .flat_map(|w| &w.flows)
        .any(|f| f.tier == "xdp" && f.packets >= 2));
    assert!(
        on_p >= hits,
        "megaflow counts include the kernel's {hits} hits: {on_p}"
    );
    assert_eq!(
        off_p, on_p,
        "every packet is counted on a megaflow either way"
    );
}

/// Frame `seq` of the stream: one flow (UDP to 192.168.5.1), numbered in the source IP.
fn numbered(seq: u32) -> Vec<u8> {
    build(&FrameSpec::udp4(
        Ipv4Addr::from(0x0a00_0000 + seq),
        Ipv4Addr::new(192, 168, 5, 1),
        4000,
        5001,
        64,
    ))
}

fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes([f[26], f[27], f[28], f[29]]) - 0x0a00_0000
}

#[test]
fn no_stale_forwarding_while_rules_change_under_traffic() {
    need_root_netns_bpf!();
    const N: u32 = 30_000;
    const PPS: u64 = 20_000;
    let lab = Lab::new("fpx-chg");
    let sw = lab.start_switch(
        "priority=5,in_port=1,udp,nw_dst=192.168.5.1 actions=output:2\n",
        "afxdp",
        &tier_config(true),
    );
    let sent = Arc::new(AtomicU64::new(0));
    let fr: Vec<Vec<u8>> = (0..N).map(numbered).collect();
    let ctl = lab.control();
    let s2 = sent.clone();
    // Change the output mid-stream; note how many frames had been sent when the switch
    // acknowledged: every later one was sent after the acknowledgement.
    let changer = std::thread::spawn(move || {
        while s2.load(Ordering::SeqCst) < u64::from(N) / 2 {
            std::thread::sleep(Duration::from_micros(200));
        }
        let before = call(
            &ctl,
            &Request {
                op: Op::Stats,
                text: String::new(),
            },
            Duration::from_secs(5),
        )
        .unwrap();
        let r = call(
            &ctl,
            &Request {
                op: Op::Mod,
                text: "in_port=1,udp,nw_dst=192.168.5.1 actions=output:3".into(),
            },
            Duration::from_secs(5),
        )
        .unwrap();
        let acked = s2.load(Ordering::SeqCst);
        assert!(r.error.is_none(), "{:?}", r.error);
        (acked, before)
    });
    let (b, c) = send_and_capture(&lab, fr, PPS, N as usize, sent);
    let (acked, before) = changer.join().unwrap();
    let after = lab.ask(Op::Stats, "");
    let (ok, err) = sw.stop();
    assert!(ok, "switch exit: {err}");

    let mut seen = vec![0u8; N as usize];
    for f in b.iter().chain(&c) {
        seen[seq_of(f) as usize] += 1;
    }
    let lost: Vec<usize> = (0..N as usize).filter(|&i| seen[i] == 0).collect();
    let dup: Vec<usize> = (0..N as usize).filter(|&i| seen[i] > 1).collect();
    let stale: Vec<u32> = b
        .iter()
        .map(|f| seq_of(f))
        .filter(|&s| u64::from(s) >= acked)
        .collect();
    let early_new = c.iter().filter(|f| u64::from(seq_of(f)) < acked).count();
    eprintln!(
        "acknowledged after {acked} sent; b0 {} c0 {} ({early_new} sent before the ack went \
         the new way); kernel hits before {} after {}",
        b.len(),
        c.len(),
        tier_stat(&before, "hit_output"),
        tier_stat(&after, "hit_output")
    );
    assert!(
        lost.is_empty(),
        "{} lost, first {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    assert!(
        dup.is_empty(),
        "duplicates: {:?}",
        &dup[..dup.len().min(10)]
    );
    assert!(
        stale.is_empty(),
        "{} frames sent after the acknowledgement went to the old port: {:?}",
        stale.len(),
        &stale[..stale.len().min(10)]
    );
    // The kernel answered before the change and, re-stamped, after it.
    assert!(tier_stat(&before, "hit_output") > u64::from(N) / 4);
    assert!(
        tier_stat(&after, "hit_output") - tier_stat(&before, "hit_output") > u64::from(N) / 4,
        "the kernel tier answered after the change too"
    );
}

#[test]
fn no_xdp_program_remains_after_sigterm_or_sigkill() {
    need_root_netns_bpf!();
    let lab = Lab::new("fpx-life");
    for sig in [libc::SIGTERM, libc::SIGKILL] {
        let sw = lab.start_switch(FLOWS, "afxdp", &tier_config(true));
        for dev in ["a1", "b1", "c1"] {
            assert!(lab.xdp_of(dev).contains("flow_tier"), "{dev} has the tier");
        }
        let _ = sw.signal(sig);
        // A killed process's BPF links go when its last fd closes.
        let t = Instant::now();
        while ["a1", "b1", "c1"].iter().any(|d| !lab.xdp_of(d).is_empty())
            && t.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        for dev in ["a1", "b1", "c1"] {
            assert_eq!(
                lab.xdp_of(dev),
                "",
                "{dev}: XDP program left after signal {sig}"
            );
        }
    }
}

/// A number in the switch's "xdp tier waiting:" stats line: the one just before `what`.
fn waiting_stat(r: &Response, what: &str) -> u64 {
    let line = r
        .lines
        .iter()
        .find(|l| l.contains("xdp tier waiting:"))
        .unwrap_or_else(|| panic!("no xdp tier waiting line in stats: {:?}", r.lines));
    let head = &line[..line
        .find(what)
        .unwrap_or_else(|| panic!("no '{what}' in {line}"))];
    head.trim_end()
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// UDP from 10.0.0.1 to 192.168.0.1, its source port `1024 + i`: a megaflow of its own
/// under the rules of the test below.
fn by_source_port(i: u32) -> Vec<u8> {
    build(&FrameSpec::udp4(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(192, 168, 0, 1),
        1024 + i as u16,
        5001,
        64,
    ))
}

#[test]
fn a_megaflow_whose_second_packet_comes_late_still_reaches_the_kernel() {
    need_root_netns_bpf!();
    const N: u32 = 300;
    let lab = Lab::new("fpx-late");
    // The never-hit tp_src rule puts the source port into every megaflow: one per flow.
    let _sw = lab.start_switch(
        "priority=20,in_port=1,udp,tp_src=1 actions=drop\npriority=5,in_port=1,ip actions=output:2\n",
        "afxdp",
        &tier_config(true),
    );
    let late: Vec<Vec<u8>> = (0..N).map(by_source_port).collect();
    let send = |fr: Vec<Vec<u8>>, pps: u64| {
        let n = fr.len();
        let (b, _) = send_and_capture(&lab, fr, pps, n, Arc::new(AtomicU64::new(0)));
        assert_eq!(b.len(), n, "every frame forwarded to b0");
    };
    // One packet each, then other new flows, two a millisecond (each its own batch), for
    // the N megaflows' reviews to pass without a second packet.
    send(late.clone(), 20_000);
    send((10_000..11_000).map(by_source_port).collect(), 2_000);
    let st = lab.ask(Op::Stats, "");
    let dropped = waiting_stat(&st, "dropped unproven");
    assert!(
        dropped >= u64::from(N),
        "the first megaflows were dropped unproven: {dropped}"
    );
    // Their second packets (answered in user space), a few counter sweeps (100 ms each),
    // then a third round: the kernel answers it.
    send(late.clone(), 20_000);
    std::thread::sleep(Duration::from_millis(600));
    let before = lab.ask(Op::Stats, "");
    send(late, 20_000);
    let after = lab.ask(Op::Stats, "");
    let offered = waiting_stat(&after, "of them offered later");
    let hits = tier_stat(&after, "hit_output") - tier_stat(&before, "hit_output");
    eprintln!("dropped unproven {dropped}, offered later {offered}, kernel hits {hits} of {N}");
    assert!(offered >= u64::from(N), "offered later: {offered}");
    assert!(
        hits >= u64::from(N) * 9 / 10,
        "the kernel answered the third round: {hits} of {N}"
    );
}
