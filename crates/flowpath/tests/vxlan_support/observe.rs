//! What the VXLAN tests observe: flowpath's stats (its tunnel drop counters, read with a
//! small JSON reader), the traffic tool `tests/data/vxlan/vxtool.py`, a listener on host A,
//! a dumpcap capture of the underlay and tshark's fields of it.

use super::TOOL;
use crate::common::harness::{in_ns, out_text, run_ok, tail, wait_for, Proc};
use crate::common::BIN;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub fn flowpath_stats_text(control: &Path) -> String {
    Command::new(BIN)
        .args(["stats", "--control"])
        .arg(control)
        .output()
        .map(|o| out_text(&o))
        .unwrap_or_default()
}

/// Every named counter in `flowpath stats --json` whose name says it is about tunnels
/// (vni, remote, tunnel, vxlan, tun_), summed over workers: drop reasons as
/// `"name": n` keys, `["name", n]` pairs or `{"name"|"reason": .., "count"|"packets": n}`.
pub fn tunnel_counters(control: &Path) -> BTreeMap<String, u64> {
    let o = run_ok(
        Command::new(BIN)
            .args(["stats", "--json", "--control"])
            .arg(control),
    );
    let v: serde_json_lite::Value = serde_json_lite::parse(&String::from_utf8_lossy(&o.stdout));
    let mut out = BTreeMap::new();
    v.walk(&mut |name, n| {
        let l = name.to_ascii_lowercase();
        if ["vni", "remote", "tunnel", "vxlan", "tun_"]
            .iter()
            .any(|w| l.contains(w))
        {
            *out.entry(name.to_string()).or_insert(0) += n;
        }
    });
    out
}

/// A small JSON reader (the test crate has no serde_json): enough to walk named numbers.
mod serde_json_lite {
    #[derive(Debug)]
    pub enum Value {
        Null,
        Bool,
        Num(f64),
        Str(String),
        Arr(Vec<Value>),
        Obj(Vec<(String, Value)>),
    }

    pub fn parse(s: &str) -> Value {
        let b = s.as_bytes();
        let mut i = 0;
        let v = value(b, &mut i);
        v.unwrap_or(Value::Null)
    }

    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }

    fn value(b: &[u8], i: &mut usize) -> Option<Value> {
        ws(b, i);
        match *b.get(*i)? {
            b'{' => {
                *i += 1;
                let mut o = Vec::new();
                loop {
                    ws(b, i);
                    if b.get(*i) == Some(&b'}') {
                        *i += 1;
                        return Some(Value::Obj(o));
                    }
                    let Value::Str(k) = value(b, i)? else {
                        return None;
                    };
                    ws(b, i);
                    *i += 1; // ':'
                    let v = value(b, i)?;
                    o.push((k, v));
                    ws(b, i);
                    if b.get(*i) == Some(&b',') {
                        *i += 1;
                    }
                }
            }
            b'[' => {
                *i += 1;
                let mut a = Vec::new();
                loop {
                    ws(b, i);
                    if b.get(*i) == Some(&b']') {
                        *i += 1;
                        return Some(Value::Arr(a));
                    }
                    a.push(value(b, i)?);
                    ws(b, i);
                    if b.get(*i) == Some(&b',') {
                        *i += 1;
                    }
                }
            }
            b'"' => {
                *i += 1;
                let mut s = String::new();
                while *i < b.len() && b[*i] != b'"' {
                    if b[*i] == b'\\' {
                        *i += 1;
                    }
                    s.push(b[*i] as char);
                    *i += 1;
                }
                *i += 1;
                Some(Value::Str(s))
            }
            b't' | b'f' => {
                while *i < b.len() && b[*i].is_ascii_alphabetic() {
                    *i += 1;
                }
                Some(Value::Bool)
            }
            b'n' => {
                *i += 4;
                Some(Value::Null)
            }
            _ => {
                let st = *i;
                while *i < b.len() && (b"+-.eE".contains(&b[*i]) || b[*i].is_ascii_digit()) {
                    *i += 1;
                }
                std::str::from_utf8(&b[st..*i])
                    .ok()?
                    .parse()
                    .ok()
                    .map(Value::Num)
            }
        }
    }

    impl Value {
        /// Call `f(name, count)` for every number with a name: an object's key, the first
        /// element of a [name, number] pair, or an object's name/reason field.
        pub fn walk(&self, f: &mut dyn FnMut(&str, u64)) {
            match self {
                Value::Obj(o) => {
                    let label = o.iter().find_map(|(k, v)| match v {
                        Value::Str(s) if k == "name" || k == "reason" => Some(s.clone()),
                        _ => None,
                    });
                    for (k, v) in o {
                        match v {
                            Value::Num(n) => {
                                f(k, *n as u64);
                                if let Some(l) = &label {
                                    if k == "count" || k == "packets" || k == "drops" {
                                        f(l, *n as u64);
                                    }
                                }
                            }
                            _ => v.walk(f),
                        }
                    }
                }
                Value::Arr(a) => {
                    if let [Value::Str(name), Value::Num(n)] = a.as_slice() {
                        f(name, *n as u64);
                    } else {
                        for v in a {
                            v.walk(f);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

// ---- traffic and captures ---------------------------------------------------------------

pub fn tool(ns: &str) -> Command {
    let mut c = in_ns(ns, "python3");
    c.arg(TOOL);
    c
}

/// `vxtool.py listen` on host A's eth0 for at most `secs`, ending early once `until`
/// (marker, count) has been seen; started (it printed "ready").
pub struct Listener {
    proc: Proc,
    log: PathBuf,
}

impl Listener {
    pub fn start(ns: &str, dir: &Path, secs: u32, until: (&str, u32)) -> Listener {
        let log = dir.join("listen.out");
        let mut c = tool(ns);
        c.args([
            "listen",
            "eth0",
            &secs.to_string(),
            until.0,
            &until.1.to_string(),
        ]);
        let proc = Proc::spawn(c, "vxtool listen", &log);
        let l = Listener { proc, log };
        wait_for(
            "the listener on host A is ready",
            Duration::from_secs(20),
            || {
                std::fs::read_to_string(&l.log)
                    .unwrap_or_default()
                    .contains("ready")
            },
        );
        l
    }

    /// Wait for it to finish; marker -> frames.
    pub fn finish(mut self) -> BTreeMap<String, u64> {
        let t = Instant::now();
        while self.proc.exited().is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "listener did not end"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (m, n) = l.split_once(' ')?;
                Some((m.to_string(), n.trim().parse().ok()?))
            })
            .collect()
    }
}

/// dumpcap on the remote's `ul` (UDP 4789 only) into `file`, stopped by `stop`.
pub struct Capture {
    proc: Proc,
    file: PathBuf,
    log: PathBuf,
}

impl Capture {
    pub fn start(ns: &str, dir: &Path) -> Capture {
        let file = dir.join("underlay.pcapng");
        let log = dir.join("dumpcap.log");
        let mut c = in_ns(ns, "dumpcap");
        c.args(["-i", "ul", "-f", "udp port 4789", "-B", "64", "-q", "-w"])
            .arg(&file);
        let proc = Proc::spawn(c, "dumpcap", &log);
        let mut cap = Capture { proc, file, log };
        let t = Instant::now();
        loop {
            if std::fs::read_to_string(&cap.log)
                .unwrap_or_default()
                .contains("Capturing on")
            {
                break;
            }
            if let Some(st) = cap.proc.exited() {
                panic!("dumpcap exited ({st}): {}", tail(&cap.log, 10));
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "dumpcap does not start: {}",
                tail(&cap.log, 10)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        cap
    }

    pub fn stop(mut self) -> PathBuf {
        std::thread::sleep(Duration::from_millis(500));
        self.proc.stop_with(libc::SIGINT);
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        // "Packets received/dropped on interface 'ul': 100077/0 (pcap:0/dumpcap:0/...)"
        let dropped = log
            .lines()
            .find_map(|l| l.split_once("received/dropped on interface"))
            .and_then(|(_, r)| r.split_once(": "))
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|n| n.split_once('/'))
            .map(|(_, d)| d.to_string());
        assert_eq!(
            dropped.as_deref(),
            Some("0"),
            "dumpcap dropped packets (or said nothing): {log}"
        );
        self.file.clone()
    }
}

/// `tshark -r FILE -Y FILTER -T fields -e F...`: one line per frame.
pub fn tshark_fields(file: &Path, filter: &str, fields: &[&str]) -> Vec<String> {
    let mut c = Command::new("tshark");
    // Checksums checked too (tshark does not by default): a wrong one is an error-severity
    // expert item, counted with the malformed frames.
    c.arg("-n").arg("-r").arg(file).args([
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-Y",
        filter,
        "-T",
        "fields",
    ]);
    for f in fields {
        c.args(["-e", f]);
    }
    c.args(["-E", "occurrence=a", "-E", "aggregator=,"]);
    let o = run_ok(&mut c);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect()
}
