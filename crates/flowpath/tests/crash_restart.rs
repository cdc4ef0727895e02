//! A barrier reply means saved: an OpenFlow client streams flow_mods, each followed by a
//! barrier, while the switch process is killed with SIGKILL at a random moment, 30 times;
//! after each restart the switch holds exactly the flows whose barriers were answered,
//! plus at most the one change in flight. Additions (saved through the state file's
//! journal) and deletions (saved by rewriting the state file) are both in the stream.
//! Needs no root: loopback TCP and a Unix socket in a temporary directory.
//! `FLOWPATH_CRASH_SEED` repeats a run (the seed is printed).

use flowpath_inspect::{Trace, TraceInput, TraceRequest};
use flowpath_openflow::consts::*;
use flowpath_openflow::{
    decode, message_len, FlowMod, Instruction, Message, OfAction, Oxm, OxmField,
};
use flowpath_switch::control::{call, Op, Request};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");
const ROUNDS: usize = 30;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Running {
    child: Child,
    port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `flowpath run` with the state file in `dir` and OpenFlow on a free loopback port.
fn start(dir: &Path) -> Running {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("switch.log"))
        .unwrap();
    let mut child = Command::new(BIN)
        .args(["run", "--state"])
        .arg(dir.join("flows.state"))
        .arg("--control")
        .arg(dir.join("ctl.sock"))
        .args(["--openflow", &format!("ptcp:127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start flowpath run");
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(st)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("switch.log")).unwrap_or_default();
            panic!("flowpath run exited ({st}) before listening:\n{log}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "flowpath run never listened"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Running { child, port }
}

/// xorshift64*: enough to place the kills.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// One change: add flow `id`, or delete it (strict).
#[derive(Clone, Copy, Debug)]
enum Change {
    Add(u32),
    Del(u32),
}

impl Change {
    fn apply(self, flows: &mut BTreeSet<u32>) {
        match self {
            Change::Add(id) => flows.insert(id),
            Change::Del(id) => flows.remove(&id),
        };
    }

    fn message(self) -> Message {
        let (id, command) = match self {
            Change::Add(id) => (id, OFPFC_ADD),
            Change::Del(id) => (id, OFPFC_DELETE_STRICT),
        };
        Message::FlowMod(FlowMod {
            cookie: id as u64,
            command,
            priority: 100,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            match_: vec![
                Oxm::exact(OxmField::EthType, 0x0800),
                Oxm::exact(OxmField::Ipv4Dst, 0x0a00_0000 | id as u128),
            ],
            instructions: vec![Instruction::ApplyActions(vec![OfAction::output(1)])],
            ..FlowMod::default()
        })
    }
}

/// Send changes, each with a barrier, until the connection breaks; `acked` takes each
/// change whose barrier was answered. Returns the change in flight when it broke.
fn stream(
    port: u16,
    acked: &mut BTreeSet<u32>,
    next_id: &mut u32,
    rng: &mut Rng,
) -> Option<Change> {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return None;
    };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    if s.write_all(&Message::Hello(Vec::new()).encode(1)).is_err() {
        return None;
    }
    let mut buf = Vec::new();
    for xid in (2u32..).step_by(2) {
        let change = match acked
            .iter()
            .nth(rng.below(acked.len().max(1) as u64) as usize)
        {
            Some(&id) if rng.below(6) == 0 => Change::Del(id),
            _ => {
                *next_id += 1;
                Change::Add(*next_id)
            }
        };
        let mut out = change.message().encode(xid);
        out.extend(Message::BarrierRequest.encode(xid + 1));
        if s.write_all(&out).is_err() {
            return Some(change);
        }
        loop {
            match next_message(&mut s, &mut buf) {
                None => return Some(change),
                Some((x, Message::BarrierReply)) if x == xid + 1 => break,
                Some((_, Message::Error { type_, code, .. })) => {
                    panic!("the switch refused {change:?}: error type {type_} code {code}")
                }
                Some(_) => {}
            }
        }
        change.apply(acked);
    }
    unreachable!()
}

/// The next whole message, or None when the connection ends.
fn next_message(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(u32, Message)> {
    loop {
        if let Ok(Some(n)) = message_len(buf) {
            if buf.len() >= n {
                let raw: Vec<u8> = buf.drain(..n).collect();
                let (h, m) = decode(&raw).expect("the switch sends valid messages");
                return Some((h.xid, m));
            }
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The flows the switch holds, by id (their cookie), from its control socket.
fn installed(dir: &Path) -> BTreeSet<u32> {
    let req = Request {
        op: Op::Dump,
        text: String::new(),
    };
    let r = call(&dir.join("ctl.sock"), &req, Duration::from_secs(30)).unwrap();
    assert!(r.error.is_none(), "{r:?}");
    r.lines
        .iter()
        .map(|l| {
            let hex = l
                .split("cookie=0x")
                .nth(1)
                .expect("a cookie")
                .split(',')
                .next();
            u32::from_str_radix(hex.unwrap(), 16).unwrap()
        })
        .collect()
}

/// Does the running switch forward a packet to 10.0.x.y (flow `id`) by its restored rules
/// (`flowpath trace` against the switch: the slow path's translation of its rule set)?
fn forwards(dir: &Path, id: u32) -> bool {
    let req = TraceRequest::new(TraceInput::Flow(format!(
        "in_port=2,ip,nw_dst=10.0.{}.{}",
        id >> 8,
        id & 0xff
    )));
    let req = Request {
        op: Op::Trace,
        text: serde_json::to_string(&req).unwrap(),
    };
    let r = call(&dir.join("ctl.sock"), &req, Duration::from_secs(30)).unwrap();
    assert!(r.error.is_none(), "{r:?}");
    let t: Trace = serde_json::from_value(r.data.expect("a trace")).unwrap();
    assert!(t.dropped || t.actions == "output:1", "{t:?}");
    !t.dropped
}

#[test]
fn every_answered_barrier_survives_a_kill_9() {
    let dir = Dir(std::env::temp_dir().join(format!("fp-crash-restart-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();
    let seed = std::env::var("FLOWPATH_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("FLOWPATH_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let (mut acked, mut next_id) = (BTreeSet::new(), 0u32);
    let (mut kept_in_flight, mut changes) = (0, 0);
    for round in 0..ROUNDS {
        let sw = start(&dir.0);
        let now = installed(&dir.0);
        assert_eq!(
            now, acked,
            "round {round}: the switch came back with other flows"
        );
        let pid = sw.child.id() as libc::pid_t;
        let delay = Duration::from_millis(rng.below(250));
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            // SAFETY: kill(2) on the child this test started and has not reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let before = next_id;
        let in_flight = stream(sw.port, &mut acked, &mut next_id, &mut rng);
        killer.join().unwrap();
        drop(sw);
        changes += next_id - before;
        // The change in flight may or may not have been saved; nothing else may differ.
        let sw = start(&dir.0);
        let now = installed(&dir.0);
        let mut with = acked.clone();
        if let Some(c) = in_flight {
            c.apply(&mut with);
        }
        assert!(
            now == acked || now == with,
            "round {round} (seed {seed}): after the kill the switch holds {} flows; {} were \
             acknowledged (in flight: {in_flight:?}); missing {:?}, extra {:?}",
            now.len(),
            acked.len(),
            acked.difference(&now).take(5).collect::<Vec<_>>(),
            now.difference(&with).take(5).collect::<Vec<_>>(),
        );
        if now != acked {
            kept_in_flight += 1;
        }
        // The datapath forwards by what came back: the newest flow, and not a deleted one.
        if let Some(&id) = now.iter().next_back() {
            assert!(
                forwards(&dir.0, id),
                "round {round}: flow {id} restored but not used"
            );
        }
        if let Some(Change::Del(id)) = in_flight {
            assert_eq!(
                forwards(&dir.0, id),
                now.contains(&id),
                "round {round}: flow {id}"
            );
        }
        acked = now;
        drop(sw);
    }
    eprintln!(
        "{ROUNDS} kills, {changes} additions sent, {} flows at the end, the change in flight \
         kept {kept_in_flight} times",
        acked.len()
    );
    assert!(changes > 0, "no change was ever acknowledged");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.0.join("flows.state"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // No temporary file of an interrupted save is left behind.
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    names.sort();
    assert!(names.is_empty(), "{names:?}");
}
