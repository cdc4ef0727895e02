//! The `openflow_decode` check: any bytes as one OpenFlow 1.3 message through the codec
//! and, for what decodes, the translation to flowpath rules.
//!
//! Compiled twice: by the fuzz crate (`fuzz/fuzz_targets/openflow_decode.rs`) and, through
//! `#[path]`, by `crates/openflow/tests/fuzz_corpus.rs`, so it only uses `flowpath_openflow`
//! and what that crate re-exports of flowpath's types.

use flowpath_openflow::consts::{OFPFC_DELETE, OFPFC_DELETE_STRICT};
use flowpath_openflow::translate::{
    flow_mod_selector, flow_mod_to_spec, flow_stats, group_mod_to_spec, match_to_oxm,
    of_actions_to_actions, oxm_to_match, ActionContext,
};
use flowpath_openflow::{decode, message_len, Message};

/// Decode `data` (framed by its own header length); panics when an invariant breaks.
/// Returns a one-line outcome: `ok <type>`, `rule`/`refused t/c` for a flow_mod, or the
/// decode error's (type, code).
pub fn check(data: &[u8]) -> String {
    let framed = match message_len(data) {
        Ok(Some(n)) if n <= data.len() => &data[..n],
        Ok(_) => data,
        Err(e) => return format!("frame {:?}", e.to_of_error()),
    };
    let (h, m) = match decode(framed) {
        Ok(x) => x,
        Err(e) => {
            let (t, c) = e.to_of_error();
            return format!("error {t}/{c}");
        }
    };
    // Re-encoding is stable: encode(decode(x)) decodes to the same message.
    let re = m.encode(h.xid);
    let (h2, m2) = decode(&re).expect("a re-encoded message decodes");
    assert_eq!(h2.xid, h.xid);
    assert_eq!(m2, m, "re-encode changed the message");
    assert_eq!(m2.encode(h.xid), re, "encoding is not deterministic");
    match &m {
        Message::FlowMod(fm) if fm.command == OFPFC_DELETE || fm.command == OFPFC_DELETE_STRICT => {
            match flow_mod_selector(fm) {
                Ok(_) => "selector".to_string(),
                Err(e) => format!("refused {}/{}", e.type_, e.code),
            }
        }
        Message::FlowMod(fm) => {
            let _ = flow_mod_selector(fm);
            match flow_mod_to_spec(fm) {
                Ok(spec) => {
                    spec.validate().expect("a translated rule validates");
                    // The dump of the rule translates back to the same match.
                    let fs = flow_stats(&spec, 1, 64, 0);
                    assert_eq!(oxm_to_match(&fs.match_).ok(), Some(spec.matches));
                    assert_eq!(match_to_oxm(&spec.matches), fs.match_);
                    "rule".to_string()
                }
                Err(e) => format!("refused {}/{}", e.type_, e.code),
            }
        }
        Message::PacketOut(po) => {
            match of_actions_to_actions(&po.actions, &Default::default(), ActionContext::PacketOut)
            {
                Ok(_) => "ok packet_out".to_string(),
                Err(e) => format!("refused {}/{}", e.type_, e.code),
            }
        }
        Message::GroupMod(gm) => match group_mod_to_spec(gm) {
            Ok(_) => "group".to_string(),
            Err(e) => format!("refused {}/{}", e.type_, e.code),
        },
        Message::PacketIn(pi) => {
            let _ = oxm_to_match(&pi.match_);
            "ok packet_in".to_string()
        }
        m => format!("ok {}", m.type_()),
    }
}
