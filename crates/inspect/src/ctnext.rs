//! The passes after a `ct(table=T)` as `flowpath trace --ct-next` follows them, the way
//! OVS's `ofproto/trace --ct-next` does: the connection tracker is not run; a recirculated
//! pass takes its `ct_state` from the next `--ct-next` flags (`trk,new` when none are left,
//! OVS's default), its `ct_zone` from the `ct` action, and the recirculation id of the
//! table it resumes in. This file owns the flags' syntax and the recirculated keys.

use flowpath_packet::ct::{self, state, CtId, CtSpec, NatKind};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_pipeline::replay_on_key;

/// The `ct_state` of a recirculation with no `--ct-next` flags left: `trk,new` (OVS's).
pub const DEFAULT_CT_NEXT: u8 = state::TRACKED | state::NEW;

/// A trace follows at most this many passes: the first and its recirculations.
pub const MAX_PASSES: usize = 8;

/// Parse one `--ct-next` value: flag names joined by `,` (`trk,new`), `|` (`trk|new`, as
/// OVS prints them) or each after a `+` (`+trk+new`, as the flow syntax matches them).
/// The flags are checked as OVS checks them: every flag needs `trk`, `inv` goes with `trk`
/// alone, and `new` excludes `est` and `rpl`. An error quotes the value and names the
/// flag or the conflict.
pub fn parse_ct_next(text: &str) -> Result<u8, String> {
    let bad = |why: String| format!("--ct-next '{text}': {why}");
    let mut flags = 0u8;
    for word in text.split([',', '|', '+', ' ']).filter(|w| !w.is_empty()) {
        if let Some((_, unset)) = word.split_once('-') {
            return Err(bad(format!(
                "'-{unset}': give only the flags that are set (trk,new or +trk+new)"
            )));
        }
        let Some((bit, _)) = state::NAMES.iter().find(|(_, n)| *n == word) else {
            let names: Vec<&str> = state::NAMES.iter().map(|(_, n)| *n).collect();
            return Err(bad(format!(
                "unknown ct_state flag '{word}' (the flags: {})",
                names.join(", ")
            )));
        };
        flags |= bit;
    }
    if flags == 0 {
        return Err(bad("no ct_state flags (e.g. trk,new or trk,est)".into()));
    }
    check_flags(flags).map_err(|why| bad(why.into()))?;
    Ok(flags)
}

/// OVS's `validate_ct_state`: the combinations a tracker never gives.
fn check_flags(f: u8) -> Result<(), &'static str> {
    use state::*;
    if f & TRACKED == 0 {
        return Err("invalid connection state: without trk no other flag may be set");
    }
    if f & INVALID != 0 && f & !(TRACKED | INVALID) != 0 {
        return Err("invalid connection state: with inv only trk may also be set");
    }
    if f & NEW != 0 && f & ESTABLISHED != 0 {
        return Err("invalid connection state: new and est are mutually exclusive");
    }
    if f & NEW != 0 && f & REPLY_DIR != 0 {
        return Err("invalid connection state: new and rpl are mutually exclusive");
    }
    Ok(())
}

/// One `ct(table=T)` among a pass's actions: a pass of its own after the tracker.
#[derive(Clone, Copy, Debug)]
pub struct Recirculation {
    /// Where the `ct` stands in the pass's actions.
    pub at: usize,
    /// The table the packet resumes in.
    pub table: u8,
    /// The key as the actions before the `ct` left it.
    pub key: FlowKey,
    /// The `ct` action (its zone already a number where the walk read it from a field).
    pub ct: CtId,
}

/// The recirculations caused by a pass classified from `key` whose translated actions are
/// `actions`, in the order the actions run: the actions are replayed on the key, so each
/// recirculated key holds what the rewrites (and a carried `write_metadata`) before its
/// `ct` did.
pub fn recirculations(key: &FlowKey, actions: &[Action]) -> Vec<Recirculation> {
    let mut k = *key;
    let mut out = Vec::new();
    for (at, a) in actions.iter().enumerate() {
        if let Action::Ct(ct) = *a {
            if let Some(table) = ct.spec().table {
                out.push(Recirculation {
                    at,
                    table,
                    key: k,
                    ct,
                });
            }
        }
        replay_on_key(a, &mut k);
    }
    out
}

impl Recirculation {
    pub fn spec(&self) -> &'static CtSpec {
        self.ct.spec()
    }

    /// The zone the tracker would look the packet up in.
    pub fn zone(&self) -> u16 {
        self.spec().zone.zone(&self.key)
    }

    /// The key the recirculated pass starts with: the recirculation id of its table,
    /// `ct_state` = `flags`, `ct_zone` from the action; a committing `ct`'s `exec` writes
    /// into `ct_mark`/`ct_label` as the tracker would. The other ct fields stay as they
    /// were (OVS's trace does the same).
    pub fn resumed_key(&self, flags: u8) -> FlowKey {
        let mut k = self.key;
        k.set(Field::RecircId, ct::recirc_id(self.table) as u128);
        k.set(Field::CtState, flags as u128);
        k.set(Field::CtZone, self.zone() as u128);
        let spec = self.spec();
        if spec.commit {
            if let Some((v, m)) = spec.set_mark {
                let old = k.get(Field::CtMark) as u32;
                k.set(Field::CtMark, ((old & !m) | (v & m)) as u128);
            }
            if let Some((v, m)) = spec.set_label {
                let old = k.get(Field::CtLabel);
                k.set(Field::CtLabel, (old & !m) | (v & m));
            }
        }
        k
    }

    /// What the action's NAT would do to the packet, in words; the trace does not do it.
    pub fn nat_note(&self) -> Option<String> {
        nat_note(self.spec()).map(|n| format!("{n} (give snat or dnat in --ct-next for the flags)"))
    }
}

/// What a `ct` action's NAT would do to the packet, in words (`None` without NAT): the
/// tracker is not run, so a trace sees the addresses and ports unchanged.
pub fn nat_note(spec: &CtSpec) -> Option<String> {
    let what = match spec.nat?.kind {
        Some(NatKind::Src) => "source NAT would rewrite the packet's source (+snat)",
        Some(NatKind::Dst) => "destination NAT would rewrite the packet's destination (+dnat)",
        None => "the connection's NAT, if it has one, would rewrite the packet",
    };
    Some(format!(
        "{what}; not simulated: the trace sees the addresses and ports unchanged"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::ct::{CtZoneSrc, NatFlags, NatSpec};

    #[test]
    fn both_of_ovs_forms_and_its_printed_form_parse() {
        let tn = state::TRACKED | state::NEW;
        assert_eq!(parse_ct_next("trk,new"), Ok(tn));
        assert_eq!(parse_ct_next("+trk+new"), Ok(tn));
        assert_eq!(parse_ct_next("new|trk"), Ok(tn));
        assert_eq!(
            parse_ct_next("trk,est,rpl,dnat"),
            Ok(state::TRACKED | state::ESTABLISHED | state::REPLY_DIR | state::DST_NAT)
        );
        assert_eq!(
            parse_ct_next("+trk+inv"),
            Ok(state::TRACKED | state::INVALID)
        );
    }

    #[test]
    fn bad_flags_are_named() {
        let e = parse_ct_next("trk,neww").unwrap_err();
        assert!(e.contains("'neww'") && e.contains("'trk,neww'"), "{e}");
        let e = parse_ct_next("+trk-new").unwrap_err();
        assert!(e.contains("'-new'"), "{e}");
        assert!(parse_ct_next("trk,-new").unwrap_err().contains("'-new'"));
        assert!(parse_ct_next("trk-").is_err());
        assert!(parse_ct_next("").unwrap_err().contains("no ct_state flags"));
        assert!(parse_ct_next("new").unwrap_err().contains("without trk"));
        assert!(parse_ct_next("trk,inv,est").unwrap_err().contains("inv"));
        assert!(parse_ct_next("trk,new,est")
            .unwrap_err()
            .contains("new and est"));
        assert!(parse_ct_next("trk,new,rpl")
            .unwrap_err()
            .contains("new and rpl"));
    }

    #[test]
    fn the_recirculated_key_is_the_key_at_the_ct() {
        let spec = CtSpec {
            commit: true,
            zone: CtZoneSrc::Value(7),
            table: Some(3),
            set_mark: Some((0x5, 0xf)),
            nat: Some(NatSpec {
                kind: Some(NatKind::Dst),
                addrs: None,
                ports: None,
                flags: NatFlags::default(),
            }),
            ..CtSpec::new()
        };
        let ct = Action::Ct(CtId::intern(spec).unwrap());
        let no_table = Action::Ct(CtId::intern(CtSpec::new()).unwrap());
        let mut key = FlowKey::ZERO;
        key.set(Field::EthType, 0x0800);
        key.set(Field::NwProto, 6);
        key.set(Field::CtMark, 0xf0);
        let actions = [
            Action::SetTpDst(80),
            no_table,
            ct,
            Action::SetTpDst(8080),
            Action::Output(2),
        ];
        let r = recirculations(&key, &actions);
        assert_eq!(r.len(), 1, "a ct without table is no recirculation");
        assert_eq!((r[0].at, r[0].table, r[0].zone()), (2, 3, 7));
        let k = r[0].resumed_key(DEFAULT_CT_NEXT);
        assert_eq!(
            k.get(Field::TpDst),
            80,
            "the rewrite before the ct, not after"
        );
        assert_eq!(ct::recirc_table(&k), Some(3));
        assert_eq!(k.get(Field::CtState) as u8, DEFAULT_CT_NEXT);
        assert_eq!(k.get(Field::CtZone), 7);
        assert_eq!(k.get(Field::CtMark), 0xf5);
        assert!(r[0].nat_note().unwrap().contains("not simulated"));
    }
}
