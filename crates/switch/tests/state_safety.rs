//! The state file is private (0600 in a 0700 directory), a file that does not load stops
//! the switch with its name, the place and the way out (never an empty rule set), and an
//! addition made durable through the journal (an OpenFlow barrier) is there after a crash.

use flowpath_flowsyntax::{format_flow, parse_flow, FlowCommand};
use flowpath_pipeline::{Change, RuleSpec};
use flowpath_switch::journal::Journal;
use flowpath_switch::{StateError, StateFile, Switch, SwitchConfig};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("fp-state-safety-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn flow(i: usize) -> RuleSpec {
    let line = format!(
        "priority=100,ip,nw_dst=10.0.{}.{} actions=output:1",
        i / 256,
        i % 256
    );
    parse_flow(&line, FlowCommand::Add).unwrap().spec
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn the_file_is_0600_and_a_directory_made_for_it_0700() {
    let d = Dir::new("modes");
    let path = d.0.join("a/b/flows.state");
    let st = StateFile::new(&path);
    st.save(&[&flow(1)]).unwrap();
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&d.0.join("a/b")), 0o700);
    assert_eq!(mode(&d.0.join("a")), 0o700);
    // A file made readable by others is set back to 0600 at load (and still loads).
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let note = st.check_access().unwrap().unwrap();
    assert!(note.contains("0644") && note.contains("0600"), "{note}");
    assert_eq!(mode(&path), 0o600);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(st.load().unwrap().len(), 1);
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn a_directory_others_may_write_is_refused() {
    let d = Dir::new("opendir");
    let dir = d.0.join("shared");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let st = StateFile::new(dir.join("flows.state"));
    let e = st.load().unwrap_err();
    assert!(matches!(e, StateError::Unsafe(..)), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("writable by other users") && msg.contains("0777"),
        "{msg}"
    );
    assert!(msg.contains("--no-state"), "{msg}");
    // With the sticky bit (as /tmp), others cannot replace the file: accepted.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(st.load().unwrap().is_empty());
}

/// Load `bytes` as a state file; the error's text.
fn refusal(d: &Dir, bytes: &[u8]) -> String {
    let path = d.0.join("flows.state");
    std::fs::write(&path, bytes).unwrap();
    let e = StateFile::new(&path).load().unwrap_err();
    assert!(matches!(e, StateError::Corrupt { .. }), "{e}");
    let msg = e.to_string();
    // The file, the way out, and the file left as it was.
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("--no-state") && msg.contains("mv "), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    msg
}

#[test]
fn every_kind_of_bad_file_is_refused_with_its_place() {
    let d = Dir::new("bad");
    let good = flowpath_switch::state::render_state(&[&flow(1), &flow(2)]);
    // Truncated: the end line is missing; the place is the last line there is.
    let cut = &good[..good.rfind("# end").unwrap()];
    let m = refusal(&d, cut.as_bytes());
    assert!(m.contains("line 3:") && m.contains("truncated"), "{m}");
    // Empty (truncated to nothing).
    assert!(refusal(&d, b"").contains("line 1: the file is empty"));
    // Garbage: not text, the byte named.
    let m = refusal(&d, b"# flowpath\x00\xff\xfe");
    assert!(m.contains("byte 11:") && m.contains("invalid UTF-8"), "{m}");
    // Another program's file.
    let m = refusal(&d, b"{\"version\": 1, \"flows\": []}\n");
    assert!(
        m.contains("line 1:") && m.contains("not a flowpath state file"),
        "{m}"
    );
    // A newer format.
    let m = refusal(&d, b"# flowpath flow state v2: 0 flows\n# end: 0 flows\n");
    assert!(m.contains("state format v2; this flowpath reads v1"), "{m}");
    // A flow line that does not parse: its line and column.
    let bad = good.replace("nw_dst=10.0.0.2", "nw_dts=10.0.0.2");
    let m = refusal(&d, bad.as_bytes());
    assert!(m.contains("line 3:") && m.contains("column"), "{m}");
    // A switch does not start on it (and does not empty it).
    let e = Switch::open(SwitchConfig {
        state: Some(d.0.join("flows.state")),
        ..SwitchConfig::default()
    })
    .err()
    .expect("refused");
    assert!(e.contains("line 3:") && e.contains("--no-state"), "{e}");
    assert_eq!(
        std::fs::read_to_string(d.0.join("flows.state")).unwrap(),
        bad
    );
}

fn open(path: &Path) -> std::sync::Arc<Switch> {
    Switch::open(SwitchConfig {
        state: Some(path.to_path_buf()),
        ..SwitchConfig::default()
    })
    .unwrap()
}

/// The switch's flows, as sorted flow-syntax lines.
fn flows_of(sw: &Switch) -> Vec<String> {
    let mut v: Vec<String> = sw
        .store()
        .snapshot()
        .rules()
        .map(|r| format_flow(&r.spec))
        .collect();
    v.sort();
    v
}

fn want(ids: &[usize]) -> Vec<String> {
    let mut v: Vec<String> = ids.iter().map(|&i| format_flow(&flow(i))).collect();
    v.sort();
    v
}

#[test]
fn additions_made_durable_come_back_after_a_crash_through_the_journal() {
    let d = Dir::new("journal");
    let path = d.0.join("flows.state");
    let journal = Journal::path_for(&path);
    {
        let sw = open(&path);
        sw.apply_batch(vec![Change::Add(flow(1)), Change::Add(flow(2))])
            .unwrap();
        sw.make_durable().unwrap();
        sw.apply_batch(vec![Change::Add(flow(3))]).unwrap();
        sw.make_durable().unwrap();
        // Applied, never made durable: may be lost.
        sw.apply_batch(vec![Change::Add(flow(4))]).unwrap();
        // A crash: nothing else is written (the switch is just dropped).
    }
    assert!(!path.exists(), "additions go to the journal, not a rewrite");
    assert_eq!(mode(&journal), 0o600);
    let sw = open(&path);
    assert_eq!(flows_of(&sw), want(&[1, 2, 3]));
    // The journal was folded into the state file at start.
    assert!(path.exists() && !journal.exists());
    // A deletion is not journalled: the barrier rewrites the file.
    sw.apply_batch(vec![Change::DeleteStrict {
        table: 0,
        priority: 100,
        matches: flow(2).matches,
    }])
    .unwrap();
    sw.make_durable().unwrap();
    assert!(!journal.exists());
    sw.apply_batch(vec![Change::Add(flow(5))]).unwrap();
    sw.make_durable().unwrap();
    drop(sw);
    let sw = open(&path);
    assert_eq!(flows_of(&sw), want(&[1, 3, 5]));
}

#[test]
fn a_journal_older_than_the_file_is_not_replayed() {
    let d = Dir::new("stale");
    let path = d.0.join("flows.state");
    let sw = open(&path);
    sw.apply_batch(vec![Change::Add(flow(1))]).unwrap();
    sw.make_durable().unwrap();
    let journal = Journal::path_for(&path);
    let kept = std::fs::read(&journal).unwrap();
    // A deletion rewrites the file and removes the journal; put the old journal back, as
    // a crash between the rename and the removal would leave it.
    sw.apply_batch(vec![Change::Clear]).unwrap();
    sw.make_durable().unwrap();
    drop(sw);
    std::fs::write(&journal, kept).unwrap();
    let sw = open(&path);
    assert!(flows_of(&sw).is_empty(), "the deleted flow came back");
    assert!(!journal.exists());
}

#[test]
fn a_damaged_journal_stops_the_switch_and_names_itself() {
    let d = Dir::new("damaged");
    let path = d.0.join("flows.state");
    {
        let sw = open(&path);
        for i in 0..3 {
            sw.apply_batch(vec![Change::Add(flow(i))]).unwrap();
            sw.make_durable().unwrap();
        }
    }
    let journal = Journal::path_for(&path);
    let text = std::fs::read_to_string(&journal).unwrap();
    std::fs::write(&journal, text.replacen("output:1", "output:7", 1)).unwrap();
    let e = Switch::open(SwitchConfig {
        state: Some(path.clone()),
        ..SwitchConfig::default()
    })
    .err()
    .expect("refused");
    assert!(e.contains(&journal.display().to_string()), "{e}");
    assert!(e.contains("line 3:") && e.contains("damaged record"), "{e}");
}

#[test]
fn a_journal_longer_than_the_file_is_folded_into_it() {
    let d = Dir::new("fold");
    let path = d.0.join("flows.state");
    let sw = open(&path);
    let n = flowpath_switch::switch::JOURNAL_MIN;
    sw.apply_batch((0..n).map(|i| Change::Add(flow(i))).collect())
        .unwrap();
    sw.make_durable().unwrap();
    assert!(!path.exists(), "{n} lines fit the journal");
    sw.apply_batch(vec![Change::Add(flow(n))]).unwrap();
    sw.make_durable().unwrap();
    assert!(path.exists() && !Journal::path_for(&path).exists());
    drop(sw);
    assert_eq!(open(&path).store().snapshot().rules().count(), n + 1);
}
