//! The OpenFlow 1.3 action set (§5.10): what `write_actions` accumulate while a packet
//! walks the tables, run when the walk ends at a rule without `goto_table`.

use flowpath_packet::Action;

/// Set-field slots: one action per field (a later write replaces an earlier one).
const SETS: usize = 13;

/// An action set: at most one action of each type, run in the order OpenFlow 1.3 §5.10
/// gives: pop VLAN, push VLAN, decrement TTL, the set-fields (in the fixed order of
/// [`ActionSet::actions`]), then the group — or, without a group, the output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActionSet {
    pop_vlan: bool,
    push_vlan: Option<Action>,
    dec_ttl: bool,
    sets: [Option<Action>; SETS],
    group: Option<u32>,
    output: Option<Action>,
}

impl ActionSet {
    pub fn is_empty(&self) -> bool {
        *self == ActionSet::default()
    }

    /// The clear-actions instruction.
    pub fn clear(&mut self) {
        *self = ActionSet::default();
    }

    /// The write-actions instruction: merge `actions` in, each replacing the action of its
    /// type already in the set. Every kind of output (port, `IN_PORT`, controller,
    /// `NORMAL`, `FLOOD`, `ALL`) is the one output type.
    pub fn write(&mut self, actions: &[Action]) {
        for a in actions {
            let slot = match *a {
                Action::PopVlan => {
                    self.pop_vlan = true;
                    continue;
                }
                Action::PushVlan { .. } => {
                    self.push_vlan = Some(*a);
                    continue;
                }
                Action::DecTtl => {
                    self.dec_ttl = true;
                    continue;
                }
                Action::Group(g) => {
                    self.group = Some(g);
                    continue;
                }
                Action::SetEthSrc(_) => 0,
                Action::SetEthDst(_) => 1,
                Action::SetIpv4Src(_) => 2,
                Action::SetIpv4Dst(_) => 3,
                Action::SetIpv6Src(_) => 4,
                Action::SetIpv6Dst(_) => 5,
                Action::SetNwTos(_) => 6,
                Action::SetTpSrc(_) => 7,
                Action::SetTpDst(_) => 8,
                Action::SetVlanVid(_) => 9,
                Action::SetVlanPcp(_) => 10,
                Action::SetTunnel(_) => 11,
                Action::SetTunnelDst(_) => 12,
                // Output, InPort, Controller and the reserved-port outputs.
                _ => {
                    self.output = Some(*a);
                    continue;
                }
            };
            self.sets[slot] = Some(*a);
        }
    }

    /// The set's actions in execution order (a group, when there is one, instead of the
    /// output).
    pub fn actions(&self) -> impl Iterator<Item = Action> + '_ {
        let pop = self.pop_vlan.then_some(Action::PopVlan);
        let dec = self.dec_ttl.then_some(Action::DecTtl);
        let last = match self.group {
            Some(g) => Some(Action::Group(g)),
            None => self.output,
        };
        pop.into_iter()
            .chain(self.push_vlan)
            .chain(dec)
            .chain(self.sets.iter().flatten().copied())
            .chain(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_writes_replace_and_order_is_the_specs() {
        let mut s = ActionSet::default();
        s.write(&[
            Action::Output(1),
            Action::SetTpDst(80),
            Action::DecTtl,
            Action::PushVlan { tpid: 0x8100 },
        ]);
        s.write(&[Action::SetTpDst(443), Action::Output(2), Action::PopVlan]);
        let got: Vec<Action> = s.actions().collect();
        assert_eq!(
            got,
            vec![
                Action::PopVlan,
                Action::PushVlan { tpid: 0x8100 },
                Action::DecTtl,
                Action::SetTpDst(443),
                Action::Output(2),
            ]
        );
        s.write(&[Action::Group(7)]);
        assert_eq!(
            s.actions().last(),
            Some(Action::Group(7)),
            "a group hides the output"
        );
        s.clear();
        assert!(s.is_empty());
        assert_eq!(s.actions().count(), 0);
    }
}
