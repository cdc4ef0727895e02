//! The state file: what is saved comes back; a torn or truncated file is refused, never
//! loaded as a partial rule set; a crash before the rename leaves the old file in force.

use flowpath_flowsyntax::{parse_flow, FlowCommand};
use flowpath_pipeline::RuleSpec;
use flowpath_switch::state::{parse_state, render_state};
use flowpath_switch::{StateError, StateFile};
use proptest::prelude::*;

fn flows(n: usize, port: u32) -> Vec<RuleSpec> {
    (0..n)
        .map(|i| {
            let line = format!(
                "table={},priority={},ip,nw_dst=10.{}.{}.0/24,idle_timeout={} actions=mod_dl_dst:02:00:00:00:00:{:02x},output:{port}",
                i % 3,
                100 + i % 7,
                i / 256,
                i % 256,
                i % 5,
                i % 256
            );
            parse_flow(&line, FlowCommand::Add).unwrap().spec
        })
        .collect()
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("flowpath-test-state-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn save_then_load_gives_the_same_rules() {
    let d = tmpdir("roundtrip");
    let st = StateFile::new(d.join("flows.state"));
    assert!(st.load().unwrap().is_empty(), "no file yet means no flows");
    let a = flows(500, 1);
    st.save(&a.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(st.load().unwrap(), a);
    let b = flows(20, 2);
    st.save(&b.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(st.load().unwrap(), b);
    // No temporary files are left behind.
    let names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_crash_before_the_rename_leaves_the_old_state() {
    let d = tmpdir("crash");
    let path = d.join("flows.state");
    let st = StateFile::new(&path);
    let a = flows(50, 1);
    st.save(&a.iter().collect::<Vec<_>>()).unwrap();
    // A crash mid-write leaves a partial temporary file beside the state file.
    let b = render_state(&flows(50, 2).iter().collect::<Vec<_>>());
    std::fs::write(d.join(".flows.state.tmp.999999"), &b[..b.len() / 2]).unwrap();
    assert_eq!(st.load().unwrap(), a);
    // The start that loads it removes the interrupted save's file.
    assert!(!d.join(".flows.state.tmp.999999").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_corrupt_state_file_is_refused_with_its_name() {
    let d = tmpdir("corrupt");
    let path = d.join("flows.state");
    std::fs::write(&path, "table=0 actions=drop\n").unwrap();
    let e = StateFile::new(&path).load().unwrap_err();
    assert!(matches!(e, StateError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("flows.state"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every proper prefix of a state file (a torn write, a truncated copy) is refused;
    /// only the whole file loads, and it loads exactly.
    #[test]
    fn every_torn_prefix_is_refused(n in 0usize..40, cut in 0.0f64..1.0) {
        let specs = flows(n, 3);
        let text = render_state(&specs.iter().collect::<Vec<_>>());
        let at = ((text.len() as f64) * cut) as usize;
        let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap();
        if at < text.len() && text[at..].trim() != "" {
            prop_assert!(parse_state(&text[..at]).is_err(), "prefix of {} bytes loaded", at);
        }
        prop_assert_eq!(parse_state(&text).unwrap(), specs);
    }
}

#[test]
fn groups_and_the_flows_naming_them_survive_a_restart() {
    use flowpath_packet::Action;
    use flowpath_pipeline::{Bucket, Change, GroupSpec, GroupType};
    use flowpath_switch::{Switch, SwitchConfig};
    let d = tmpdir("groups");
    let path = d.join("flows.state");
    let cfg = SwitchConfig {
        state: Some(path.clone()),
        ..SwitchConfig::default()
    };
    let groups = vec![
        GroupSpec::new(
            7,
            GroupType::Select,
            vec![
                Bucket::new([Action::Output(1)]).weight(100),
                Bucket::new([Action::SetEthDst([2, 0, 0, 0, 0, 9]), Action::Output(2)]).weight(50),
            ],
        ),
        GroupSpec::new(
            3,
            GroupType::All,
            vec![Bucket::new([Action::Output(4)]), Bucket::new([])],
        ),
    ];
    {
        let sw = Switch::open(cfg.clone()).unwrap();
        let mut changes: Vec<Change> = groups.iter().cloned().map(Change::AddGroup).collect();
        changes.push(Change::Add(
            parse_flow("priority=5,ip actions=group:7", FlowCommand::Add)
                .unwrap()
                .spec,
        ));
        changes.push(Change::Add(
            parse_flow("priority=4,arp actions=group:3", FlowCommand::Add)
                .unwrap()
                .spec,
        ));
        sw.apply_batch(changes).unwrap();
        sw.save_pending().unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("# end: 2 flows, 2 groups"), "{text}");
    let sw = Switch::open(cfg).unwrap();
    let snap = sw.store().snapshot();
    let mut back: Vec<GroupSpec> = snap.groups().iter().map(|g| (*g.spec).clone()).collect();
    back.sort_by_key(|g| g.id);
    let mut want = groups.clone();
    want.sort_by_key(|g| g.id);
    assert_eq!(back, want);
    assert_eq!(snap.rules().count(), 2);
    // A group count that does not match is a torn file, refused.
    let torn = text.replace("2 groups", "3 groups");
    assert!(flowpath_switch::state::parse_state_all(&torn).is_err());
    std::fs::remove_dir_all(&d).unwrap();
}
