//! The ct cases' rule set: a two-pass security-group pipeline (track in table 0, decide on
//! `ct_state` in table 1), built in code so any case (or another bench) can reuse it.

use flowpath_packet::ct::{state, CtId, CtSpec, CtZoneSrc, NatSpec};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Match, RuleSpec};

/// The inside port (connections start here) and the outside port of the ct cases.
pub const PORT_A: u32 = 1;
pub const PORT_B: u32 = 2;
/// The conntrack zone every ct case tracks in.
pub const ZONE: u16 = 1;

/// What the pipeline is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtPipeline {
    /// Inside and outside ports.
    pub a: u32,
    pub b: u32,
    pub zone: u16,
    /// `nat(...)` on the commit of new connections from A; with it, the first pass is
    /// `ct(table=1,zone=Z,nat)` so established packets get the connection's NAT.
    pub nat: Option<NatSpec>,
    /// Also commit new connections arriving on B (a port the security group opens to
    /// inbound connections).
    pub commit_from_b: bool,
}

impl CtPipeline {
    /// Ports A and B, zone 1, no NAT, new connections only from A.
    pub fn new(a: u32, b: u32) -> CtPipeline {
        CtPipeline {
            a,
            b,
            zone: ZONE,
            nat: None,
            commit_from_b: false,
        }
    }
}

fn ct(spec: CtSpec) -> Action {
    Action::Ct(CtId::intern(spec).expect("the ct cases intern a handful of specs"))
}

fn ct_state(value: u8, mask: u8) -> Match {
    Match::any()
        .exact(Field::EthType, 0x0800)
        .with(Field::CtState, value as u128, mask as u128)
}

/// The rules:
///
/// ```text
/// table=0 ip,ct_state=-trk                 actions=ct(table=1,zone=Z[,nat])
/// table=1 ct_state=+trk+inv                actions=drop
/// table=1 ct_state=+trk+new,in_port=A      actions=ct(commit,zone=Z[,nat(...)]),output:B
/// table=1 ct_state=+trk+new,in_port=B      actions=ct(commit,zone=Z),output:A   (commit_from_b)
/// table=1 ct_state=+trk+est,in_port=A      actions=output:B
/// table=1 ct_state=+trk+est,in_port=B      actions=output:A
/// ```
///
/// Anything else (a new connection from B when B may not open one) misses table 1 and is
/// dropped.
pub fn ct_rules(p: &CtPipeline) -> Vec<RuleSpec> {
    use state::{ESTABLISHED, INVALID, NEW, TRACKED};
    let zone = CtZoneSrc::Value(p.zone);
    let bare_nat = p.nat.map(|_| NatSpec {
        kind: None,
        addrs: None,
        ports: None,
        flags: Default::default(),
    });
    let track = ct(CtSpec {
        zone,
        table: Some(1),
        nat: bare_nat,
        ..CtSpec::new()
    });
    let commit = |nat: Option<NatSpec>| {
        ct(CtSpec {
            commit: true,
            zone,
            nat,
            ..CtSpec::new()
        })
    };
    let in_port = |m: Match, port: u32| m.exact(Field::InPort, port as u128);
    let mut rules = vec![
        RuleSpec::new(0, 100, ct_state(0, TRACKED)).actions([track]),
        RuleSpec::new(1, 300, ct_state(TRACKED | INVALID, TRACKED | INVALID)),
        RuleSpec::new(1, 200, in_port(ct_state(TRACKED | NEW, TRACKED | NEW), p.a))
            .actions([commit(p.nat), Action::Output(p.b)]),
        RuleSpec::new(
            1,
            100,
            in_port(ct_state(TRACKED | ESTABLISHED, TRACKED | ESTABLISHED), p.a),
        )
        .actions([Action::Output(p.b)]),
        RuleSpec::new(
            1,
            100,
            in_port(ct_state(TRACKED | ESTABLISHED, TRACKED | ESTABLISHED), p.b),
        )
        .actions([Action::Output(p.a)]),
    ];
    if p.commit_from_b {
        rules.push(
            RuleSpec::new(1, 200, in_port(ct_state(TRACKED | NEW, TRACKED | NEW), p.b))
                .actions([commit(None), Action::Output(p.a)]),
        );
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_are_valid_and_the_first_pass_only_sees_untracked_ip() {
        let mut p = CtPipeline::new(PORT_A, PORT_B);
        p.commit_from_b = true;
        let rules = ct_rules(&p);
        assert_eq!(rules.len(), 6);
        for r in &rules {
            r.validate().expect("valid rule");
        }
        let mut k = flowpath_packet::FlowKey::ZERO;
        k.set(Field::EthType, 0x0800);
        assert!(rules[0].matches.matches(&k));
        k.set(Field::CtState, (state::TRACKED | state::NEW) as u128);
        assert!(!rules[0].matches.matches(&k));
        k.set(Field::InPort, PORT_A as u128);
        assert!(rules[2].matches.matches(&k));
        assert!(!rules[5].matches.matches(&k), "new on A is not B's rule");
    }
}
