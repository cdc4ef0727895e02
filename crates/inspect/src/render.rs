//! How the tools word things, shared by `explain`, `trace` and `megaflows`: a rule and
//! actions in flow syntax, a megaflow's match, and what happens to a packet.

use flowpath_flowsyntax::{format_actions, format_match};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_pipeline::{Ending, Match, Pipeline, RuleRef, RuleSpec};

/// A rule in one line: `table=1, priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2`.
pub fn rule_text(p: &Pipeline, r: RuleRef) -> String {
    // A group (or one of its buckets) the translation went through.
    if let Some((g, bucket)) = p.groups().resolve(r) {
        return match bucket {
            Some(b) => format!("group={g}, bucket={b}"),
            None => format!("group={g}"),
        };
    }
    let spec = &p.rule(r).spec;
    let mut s = format!("table={}, ", r.table);
    if spec.cookie != 0 {
        s.push_str(&format!("cookie={:#x}, ", spec.cookie));
    }
    s.push_str(&format_match(spec));
    s.push_str(" actions=");
    s.push_str(&format_actions(spec));
    s
}

/// Actions in flow syntax; `drop` for none.
pub fn format_action_list(actions: &[Action]) -> String {
    let mut spec = RuleSpec::new(0, 0, Default::default());
    spec.actions = actions.to_vec();
    format_actions(&spec)
}

/// Where the datapath sends a packet with these actions, as it executes them: an output
/// to the ingress port is skipped (OpenFlow's rule: use `in_port` for that).
pub(crate) fn sent_to(actions: &[Action], in_port: u32) -> Vec<String> {
    let mut out = Vec::new();
    for a in actions {
        match *a {
            Action::Output(p) if p != in_port => out.push(format!("port {p}")),
            Action::InPort => out.push(format!("port {in_port} (in_port)")),
            Action::Controller { .. } => out.push("the controller queue".to_string()),
            Action::Normal => {
                out.push("NORMAL (MAC learning: the learned port, else flood)".to_string())
            }
            Action::Flood => out.push("every port but in_port (flood)".to_string()),
            Action::All => out.push("every port but in_port (all)".to_string()),
            Action::Table => out.push("the pipeline (table)".to_string()),
            Action::Ct(id) => {
                if let Some(t) = id.spec().table {
                    out.push(format!(
                        "table {t} after the connection tracker (recirculated)"
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// What happens to a packet with these actions and this ending, in words.
pub fn describe_ending(actions: &[Action], ending: Ending, in_port: u32) -> String {
    let to = sent_to(actions, in_port);
    let skipped = actions
        .iter()
        .any(|a| matches!(a, Action::Output(p) if *p == in_port));
    let sent = if to.is_empty() {
        String::new()
    } else {
        format!("sent to {}", to.join(", "))
    };
    let tail = match ending {
        Ending::Done if to.is_empty() && skipped => {
            "dropped: its only output is to its ingress port, which is skipped (use the \
             in_port action to send a packet back)"
                .to_string()
        }
        Ending::Done if to.is_empty() => "dropped by the rules' actions (drop)".to_string(),
        Ending::Done => return sent,
        Ending::TableMiss(t) => format!("dropped: no rule matched in table {t} (table-miss)"),
        Ending::TtlExpired => "dropped at dec_ttl: TTL was 0 or 1".to_string(),
        Ending::TooManyVlans => "dropped: a third VLAN tag was pushed".to_string(),
    };
    if sent.is_empty() {
        tail
    } else {
        format!("{sent}; then {tail}")
    }
}

/// A megaflow's match (`key` already masked) in flow syntax, without a priority:
/// `in_port=1,ip,nw_src=10.0.0.0/255.0.0.0`. `(any)` when the mask is empty.
pub fn format_megaflow_match(key: &FlowKey, mask: &FlowKey) -> String {
    let spec = RuleSpec::new(
        0,
        0,
        Match {
            value: key.and(mask),
            mask: *mask,
            ports: Default::default(),
        },
    );
    let s = format_match(&spec);
    let rest = s.strip_prefix("priority=0").unwrap_or(&s);
    // The pass a recirculated packet's megaflow is for (no rule matches it, so the flow
    // syntax has no name for it: OVS's match_format prints it first, like this).
    let recirc = match mask.get(Field::RecircId) {
        0 => String::new(),
        _ => format!("recirc_id={:#x},", key.get(Field::RecircId)),
    };
    match rest.strip_prefix(',') {
        Some(r) => format!("{recirc}{r}"),
        None if recirc.is_empty() => "(any)".to_string(),
        None => recirc.trim_end_matches(',').to_string(),
    }
}
