//! A controller that sends more distinct `ct` actions than the interner holds gets an
//! OpenFlow error (OFPBAC_TOO_MANY), not a panic, and the actions already interned keep
//! working. Its own test binary: it fills the process-wide interner.

use flowpath_openflow::consts::*;
use flowpath_openflow::nx::{NxAction, NxConntrack, NX_CT_RECIRC_NONE};
use flowpath_openflow::translate::flow_mod_to_spec;
use flowpath_openflow::*;
use flowpath_packet::ct::{CtZoneSrc, MAX_CT_SPECS};
use flowpath_packet::{CtId, CtSpec};

/// A flow_mod (IPv4) whose one action is `ct(zone=zone,table=table)`.
fn ct_flow(zone: u16, table: u8) -> FlowMod {
    let c = NxConntrack {
        zone,
        recirc_table: table,
        ..NxConntrack::default()
    };
    FlowMod {
        match_: vec![Oxm::exact(OxmField::EthType, 0x800)],
        instructions: vec![Instruction::ApplyActions(vec![
            NxAction::Ct(c).to_of_action()
        ])],
        ..FlowMod::default()
    }
}

#[test]
fn a_full_interner_is_an_openflow_error() {
    assert!(flow_mod_to_spec(&ct_flow(7, NX_CT_RECIRC_NONE)).is_ok());
    // Fill the interner with specs no flow_mod below uses (tables 0..=199, zones 0..).
    let mut n = 0usize;
    'fill: for table in 0..200u8 {
        for zone in 0..=u16::MAX {
            let spec = CtSpec {
                zone: CtZoneSrc::Value(zone),
                table: Some(table),
                ..CtSpec::new()
            };
            if CtId::intern(spec).is_err() {
                break 'fill;
            }
            n += 1;
        }
    }
    assert!(n < MAX_CT_SPECS, "the interner took every spec offered");
    let err = flow_mod_to_spec(&ct_flow(9, 250)).unwrap_err();
    assert_eq!(err.pair(), (et::BAD_ACTION, bac::TOO_MANY));
    // Interned before the interner filled: still fine.
    assert!(flow_mod_to_spec(&ct_flow(7, NX_CT_RECIRC_NONE)).is_ok());
}
