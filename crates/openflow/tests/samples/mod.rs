//! The sample flow more than one test file encodes.

use flowpath_openflow::consts::*;
use flowpath_openflow::*;

/// A FLOW_MOD for TCP to 10.0.0.0/8 port 80 in table 0 at priority 100 that rewrites the
/// destination to 10.0.0.2, pops the VLAN, decrements the TTL and outputs to port 2 and to
/// the controller: `head` are the match fields before the IP ones, `then` the instructions
/// after the apply-actions.
pub fn web_flow_mod(head: Vec<Oxm>, then: Vec<Instruction>) -> FlowMod {
    let mut match_ = head;
    match_.extend([
        Oxm::exact(OxmField::IpProto, 6),
        Oxm::masked(OxmField::Ipv4Dst, 0x0a00_0000, 0xff00_0000),
        Oxm::exact(OxmField::TcpDst, 80),
    ]);
    let mut instructions = vec![Instruction::ApplyActions(vec![
        OfAction::SetField(Oxm::exact(OxmField::Ipv4Dst, 0x0a00_0002)),
        OfAction::PopVlan,
        OfAction::DecNwTtl,
        OfAction::output(2),
        OfAction::Output {
            port: OFPP_CONTROLLER,
            max_len: OFPCML_NO_BUFFER,
        },
    ])];
    instructions.extend(then);
    FlowMod {
        table_id: 0,
        priority: 100,
        match_,
        instructions,
        ..FlowMod::default()
    }
}
