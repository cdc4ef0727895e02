//! `flowpath explain`: every frame of a capture as the parser sees it, its key or the drop
//! reason, and (with rules) the rules and megaflow it would take.

use crate::fields::{format_key, key_fields, FieldValue};
use crate::render::{describe_ending, format_action_list, format_megaflow_match, rule_text};
use flowpath_packet::parse::{parse, DropReason, ParseOptions};
use flowpath_packet::FlowKey;
use flowpath_pipeline::Pipeline;
use serde_json::{Map, Value};

/// What the parser made of one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameOutcome {
    Key(FlowKey),
    Dropped(DropReason),
}

/// One frame explained: its number (1-based, as tshark counts), length, and outcome; with
/// rules, the classification too.
#[derive(Clone, Debug)]
pub struct Explained {
    pub frame: usize,
    pub bytes: usize,
    pub outcome: FrameOutcome,
    pub classified: Option<Classified>,
}

/// The slow path's answer for a frame's key.
#[derive(Clone, Debug)]
pub struct Classified {
    /// Each matched rule, `table=N priority=P match`, in table order.
    pub rules: Vec<String>,
    pub megaflow: String,
    pub actions: String,
    /// `forwarded`, or why it is dropped.
    pub verdict: String,
}

/// Parse `frame` (number `n`, received on `in_port`); classify it through `pipeline` if one
/// is given.
pub fn explain_frame(
    n: usize,
    frame: &[u8],
    in_port: u32,
    opts: &ParseOptions,
    pipeline: Option<&Pipeline>,
) -> Explained {
    let mut key = FlowKey::ZERO;
    let outcome = match parse(frame, in_port, opts, &mut key) {
        Ok(_) => FrameOutcome::Key(key),
        Err(r) => FrameOutcome::Dropped(r),
    };
    let classified = match (&outcome, pipeline) {
        (FrameOutcome::Key(k), Some(p)) => {
            let tr = p.translate(k);
            Some(Classified {
                rules: tr.path.iter().map(|r| rule_text(p, *r)).collect(),
                megaflow: format_megaflow_match(&k.and(&tr.mask), &tr.mask),
                actions: format_action_list(&tr.actions),
                verdict: describe_ending(&tr.actions, tr.ending, in_port),
            })
        }
        _ => None,
    };
    Explained {
        frame: n,
        bytes: frame.len(),
        outcome,
        classified,
    }
}

impl Explained {
    /// One line: `frame 3 (60 bytes): dl_src=...,tp_dst=80`, or `... drop: ipv4_truncated`;
    /// with rules, `-> rules ... | megaflow ... | actions ...` after it.
    pub fn line(&self) -> String {
        let mut s = format!("frame {} ({} bytes): ", self.frame, self.bytes);
        match &self.outcome {
            FrameOutcome::Key(k) => s.push_str(&format_key(k)),
            FrameOutcome::Dropped(r) => {
                s.push_str("drop: ");
                s.push_str(r.name());
            }
        }
        if let Some(c) = &self.classified {
            s.push_str("\n    rules: ");
            s.push_str(&if c.rules.is_empty() {
                "(none)".to_string()
            } else {
                c.rules.join(" | ")
            });
            s.push_str("\n    megaflow: ");
            s.push_str(&c.megaflow);
            s.push_str("\n    actions: ");
            s.push_str(&c.actions);
            s.push_str(" (");
            s.push_str(&c.verdict);
            s.push(')');
        }
        s
    }

    /// One JSON object: `frame`, `bytes`, then the key's fields by their flow-syntax names
    /// (or `drop`: the reason), then `rules`, `megaflow`, `actions`, `verdict` if classified.
    pub fn json(&self) -> Value {
        let mut m = Map::new();
        m.insert("frame".into(), self.frame.into());
        m.insert("bytes".into(), self.bytes.into());
        match &self.outcome {
            FrameOutcome::Key(k) => {
                for (n, v) in key_fields(k) {
                    m.insert(n.into(), field_json(&v));
                }
            }
            FrameOutcome::Dropped(r) => {
                m.insert("drop".into(), r.name().into());
            }
        }
        if let Some(c) = &self.classified {
            m.insert("rules".into(), c.rules.clone().into());
            m.insert("megaflow".into(), c.megaflow.clone().into());
            m.insert("actions".into(), c.actions.clone().into());
            m.insert("verdict".into(), c.verdict.clone().into());
        }
        Value::Object(m)
    }
}

fn field_json(v: &FieldValue) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_frame_is_explained_as_a_drop() {
        let e = explain_frame(7, &[0u8; 10], 1, &ParseOptions::default(), None);
        assert_eq!(e.outcome, FrameOutcome::Dropped(DropReason::EthTruncated));
        assert_eq!(e.line(), "frame 7 (10 bytes): drop: eth_truncated");
        assert_eq!(e.json()["drop"], "eth_truncated");
    }
}
