//! `flowpath gen`'s argument handling: flags make the spec, bad ones name the flag.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    gen: GenArgs,
}

fn err(args: &[&str]) -> String {
    let cli = Cli::try_parse_from(std::iter::once("gen").chain(args.iter().copied()))
        .expect("clap accepts the flags");
    match execute(&cli.gen.flags) {
        Ok(_) => panic!("{args:?} succeeded"),
        Err(Bad(m)) => m,
    }
}

/// Bad command lines: each error is one line and names the flag marked `!`, or else
/// the first flag.
const BAD: &[&str] = &[
    "--flows x",
    "--flows 0",
    "--proto sctp",
    "--encap gre",
    "--vni 5",
    "--encap vxlan !--vni 99999999",
    "--src 10.0.0.300",
    "--src 2001:db8::1",
    "--dst 10.0.0.9-10.0.0.1",
    "--sport 70000",
    "--dport 9-1",
    "--zipf -1",
    "--size 63",
    "--size sweep:64,x",
    "--miss-rate 150%",
    "--lifetime 0",
    "--lifetime 10 --miss-rate 5%",
    "--mean-lifetime 0.5",
    "--packets 0",
    "--seed x",
    "--seed -3",
    "--flows -3",
    "--lifetime 3 --mean-lifetime 4",
    "--slots 10",
    "--flows 300 --src 10.0.0.1+10 --sport 1-20",
    "--miss-rate 1% !--src 100.64.0.0/16",
    "--replay /nonexistent.pcap",
    "--replay x.pcap !--flows 3",
    "--out /nonexistent-dir/x.pcap",
    "--rate 1M",
    "--out /tmp/never-written.pcap !--rate 0",
    "--duration 3",
    "--tx lo !--rate fast",
    "--tx lo !--rate 0",
    "--tx lo !--duration -1",
    "--tx lo !--out x.pcap",
    "--tx lo !--zipf 1.1",
    "--tx no-such-if0 --packets 1",
    "--tx lo --replay x.pcap !--miss-rate 5%",
    "--attack flood",
    "--attack tse !--flows 10",
    "--attack tse !--tx lo",
    "--attack tse !--rules /nonexistent-acl",
    "--attack tse !--size imix",
    "--rules x.acl",
    "--outer-sport 65535",
    "--tx lo !--outer-sport 65535",
    "--tx lo --encap vxlan4-ipv4 !--outer-sport 70000",
    "--tx lo --replay x.pcap !--outer-sport 1",
    "--order random",
    "--tx lo !--order zigzag",
    "--tx lo --replay x.pcap !--order random",
];

#[test]
fn a_tse_attack_is_written_and_says_what_it_does_to_the_megaflow_cache() {
    let out = std::env::temp_dir().join(format!("flowpath-gen-tse-{}.pcap", std::process::id()));
    let o = out.to_string_lossy().to_string();
    let cli = Cli::try_parse_from([
        "gen",
        "--attack",
        "tse",
        "--packets",
        "3000",
        "--out",
        &o,
        "--json",
    ])
    .unwrap();
    let text = execute(&cli.gen.flags).map_err(|b| b.0).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["packets"], 3000);
    assert!(v["distinct_tuples"].as_u64().unwrap() > 2900, "{v}");
    let masks = v["masks_no_defence"].as_u64().unwrap();
    assert!(masks > 10, "the attack makes many masks: {v}");
    assert!(v["masks_default"].as_u64().unwrap() <= 512, "{v}");
    let cap = pcap::read_capture_file(&o).unwrap();
    assert_eq!(cap.frames.len(), 3000);
    let _ = std::fs::remove_file(&out);
}

#[test]
fn bad_arguments_give_one_line_errors_naming_the_flag() {
    for line in BAD {
        let args: Vec<&str> = line
            .split_whitespace()
            .map(|t| t.trim_start_matches('!'))
            .collect();
        let marked = line.split_whitespace().find(|t| t.starts_with('!'));
        let flag = format!("{}:", marked.map_or(args[0], |t| &t[1..]));
        let m = err(&args);
        assert!(m.starts_with(&flag), "{args:?}: {m}");
        assert!(!m.contains('\n'), "{args:?}: {m}");
    }
}

#[test]
fn flags_make_the_spec() {
    let cli = Cli::try_parse_from([
        "gen",
        "--flows",
        "1000",
        "--size",
        "imix",
        "--miss-rate",
        "5%",
        "--encap",
        "vxlan4-ipv6",
        "--zipf",
        "1.1",
        "--seed",
        "7",
        "--lifetime",
        "100",
    ])
    .unwrap();
    let s = spec_from(&cli.gen.flags).map_err(|b| b.0).unwrap();
    assert_eq!(s.flows.count, 1000);
    assert_eq!(s.sizes, Sizes::Imix);
    assert_eq!(s.popularity, Popularity::Zipf { skew: 1.1 });
    assert_eq!(s.seed, 7);
    assert!((s.churn.new_flow_rate() - 0.05).abs() < 1e-12);
    assert_eq!(s.churn.lifetime, Some(Lifetime::Packets(100)));
    assert_eq!(s.encap.to_string(), "vxlan4-ipv6");
}

#[test]
fn rates_and_durations_parse() {
    let r = |v: &str| rate(&Some(v.to_string())).map_err(|b| b.0).unwrap();
    assert_eq!(r("1M"), Some(1_000_000));
    assert_eq!(r("500k"), Some(500_000));
    assert_eq!(r("2.5M"), Some(2_500_000));
    assert_eq!(r("1_000"), Some(1000));
    let d = |v: &str| seconds(&Some(v.to_string())).map_err(|b| b.0).unwrap();
    assert_eq!(d("10"), Some(Duration::from_secs(10)));
    assert_eq!(d("0.5s"), Some(Duration::from_millis(500)));
}
