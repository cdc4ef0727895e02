//! OpenFlow 1.3 groups (§5.6): a group table published with the rules in every pipeline
//! snapshot, and how the slow path expands a `group:N` action into the flattened megaflow
//! action list.
//!
//! **Each bucket acts on its own copy of the packet**, for every group type (as OVS does):
//! the actions after a group, and the next bucket, see the packet as it was before the
//! group. The datapath has no "copy" action; instead the translation emits *compensating
//! rewrites* after each bucket that changed the packet, setting every field the bucket
//! wrote back to the key's pre-group value (and popping/pushing VLAN tags back). Those
//! fields are un-wildcarded in the megaflow, so every packet the megaflow covers had the
//! same pre-group values. Compensations at the very end of the list are dropped (nothing
//! observes them). What a key cannot say, a compensation cannot restore: `dec_ttl` in a
//! bucket is refused (there is no set-TTL action); a popped tag comes back as 802.1Q with
//! its VID and PCP and the DEI bit of the tag it was copied from (the key keeps neither
//! the TPID nor DEI). A bucket's `push_vlan` onto two tags drops that bucket's copy only.

use crate::rule::{Match, Rule, RuleCounters, RuleError, RuleId, RuleRef, RuleSpec};
use crate::translate::{translate_action, ActionList, Ending};
use flowpath_packet::key::{ethertype, VLAN_PRESENT};
use flowpath_packet::{Action, Field, FlowKey};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::sync::Arc;

pub use crate::rule::{GROUP_ALL, GROUP_ANY, GROUP_MAX, GROUP_TABLE};

/// OpenFlow group types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupType {
    /// Every bucket runs, each on its own copy of the packet (flooding, multicast).
    All,
    /// One bucket, chosen per flow by a stable hash of its L2–L4 fields, by weight.
    Select,
    /// Exactly one bucket (a shared next hop).
    Indirect,
    /// Refused: flowpath has no port liveness to fail over on.
    FastFailover,
}

impl GroupType {
    /// OpenFlow's `ofp_group_type` value.
    pub fn code(self) -> u8 {
        match self {
            GroupType::All => 0,
            GroupType::Select => 1,
            GroupType::Indirect => 2,
            GroupType::FastFailover => 3,
        }
    }

    pub fn from_code(c: u8) -> Option<GroupType> {
        Some(match c {
            0 => GroupType::All,
            1 => GroupType::Select,
            2 => GroupType::Indirect,
            3 => GroupType::FastFailover,
            _ => return None,
        })
    }
}

/// One bucket: a list of actions run in order on the bucket's copy of the packet.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// SELECT: the share of flows this bucket gets (0: never chosen). Ignored otherwise.
    pub weight: u16,
    /// FAST_FAILOVER's liveness port and group: kept for group_desc, not acted on.
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

impl Bucket {
    pub fn new(actions: impl IntoIterator<Item = Action>) -> Bucket {
        Bucket {
            weight: 1,
            watch_port: 0xffff_ffff,
            watch_group: GROUP_ANY,
            actions: actions.into_iter().collect(),
        }
    }

    pub fn weight(mut self, w: u16) -> Bucket {
        self.weight = w;
        self
    }
}

/// A group as a group_mod describes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupSpec {
    pub id: u32,
    pub kind: GroupType,
    pub buckets: Vec<Bucket>,
}

impl GroupSpec {
    pub fn new(id: u32, kind: GroupType, buckets: Vec<Bucket>) -> GroupSpec {
        GroupSpec { id, kind, buckets }
    }

    /// What flowpath runs of a group: the id in range, ALL/SELECT/INDIRECT, one bucket for
    /// INDIRECT, bucket actions in range, no group, `dec_ttl`, `ct` or `ct_clear` in a
    /// bucket.
    pub fn validate(&self) -> Result<(), RuleError> {
        let bad = |what| {
            Err(RuleError::BadGroup {
                group: self.id,
                what,
            })
        };
        if self.id > GROUP_MAX {
            return Err(RuleError::BadGroupId(self.id));
        }
        match self.kind {
            GroupType::FastFailover => return bad("fast-failover groups are not supported"),
            GroupType::Indirect if self.buckets.len() != 1 => {
                return bad("an indirect group needs exactly one bucket")
            }
            _ => {}
        }
        for b in &self.buckets {
            for a in &b.actions {
                match a {
                    Action::Group(_) => {
                        return bad("a group in a bucket (chaining) is not supported")
                    }
                    Action::DecTtl => return bad("dec_ttl in a bucket is not supported"),
                    // Nothing after a bucket could set the packet's ct state back.
                    Action::Ct(_) | Action::CtClear => {
                        return bad("ct and ct_clear in a bucket are not supported")
                    }
                    _ => {}
                }
            }
            // The rule checks cover the actions' arguments.
            let probe = RuleSpec::new(0, 0, Match::any()).actions(b.actions.clone());
            if probe.validate().is_err() {
                return bad("a bucket action has an out-of-range argument");
            }
        }
        Ok(())
    }
}

/// Packet and byte counters of a group and of each of its buckets, credited like rule
/// counters (a megaflow's counts reach them when the datapath pushes its stats; see
/// [`GROUP_TABLE`]). A group_mod modify keeps the group's counters and starts the buckets'
/// again.
#[derive(Debug, Default)]
pub struct GroupCounters {
    pub group: Arc<RuleCounters>,
    pub buckets: Vec<Arc<RuleCounters>>,
}

/// An installed group.
#[derive(Clone, Debug)]
pub struct Group {
    pub spec: Arc<GroupSpec>,
    pub counters: Arc<GroupCounters>,
}

impl Group {
    pub fn new(spec: GroupSpec) -> Group {
        let buckets = spec.buckets.iter().map(|_| Arc::default()).collect();
        Group {
            spec: Arc::new(spec),
            counters: Arc::new(GroupCounters {
                group: Arc::default(),
                buckets,
            }),
        }
    }

    /// The same group with new type and buckets: the group's counters are kept.
    pub fn modified(&self, spec: GroupSpec) -> Group {
        let buckets = spec.buckets.iter().map(|_| Arc::default()).collect();
        Group {
            spec: Arc::new(spec),
            counters: Arc::new(GroupCounters {
                group: self.counters.group.clone(),
                buckets,
            }),
        }
    }
}

/// The group table of one snapshot: groups by id, and the counter slots a translation's
/// `path` names ([`RuleRef`] with table [`GROUP_TABLE`]): a group's slot, then one per
/// bucket.
#[derive(Debug, Default)]
pub struct GroupTable {
    by_id: HashMap<u32, (Group, u32)>,
    /// Stand-in rules holding the counters, so that crediting a path (`Pipeline::rule`)
    /// works the same for groups as for rules.
    slots: Vec<Rule>,
}

impl GroupTable {
    pub(crate) fn build(groups: impl IntoIterator<Item = Group>) -> GroupTable {
        let mut all: Vec<Group> = groups.into_iter().collect();
        all.sort_by_key(|g| g.spec.id);
        let stand_in = Arc::new(RuleSpec::new(0, 0, Match::any()));
        let slot = |c: &Arc<RuleCounters>| Rule {
            id: RuleId(0),
            spec: stand_in.clone(),
            counters: c.clone(),
        };
        let mut t = GroupTable::default();
        for g in all {
            let first = t.slots.len() as u32;
            t.slots.push(slot(&g.counters.group));
            for c in &g.counters.buckets {
                t.slots.push(slot(c));
            }
            t.by_id.insert(g.spec.id, (g, first));
        }
        t
    }

    pub fn get(&self, id: u32) -> Option<&Group> {
        self.by_id.get(&id).map(|(g, _)| g)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Every group, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Group> {
        let mut v: Vec<&Group> = self.by_id.values().map(|(g, _)| g).collect();
        v.sort_by_key(|g| g.spec.id);
        v.into_iter()
    }

    pub(crate) fn slot(&self, index: u32) -> &Rule {
        &self.slots[index as usize]
    }

    pub(crate) fn groups(&self) -> impl Iterator<Item = &Group> {
        self.by_id.values().map(|(g, _)| g)
    }

    /// Which group (and bucket, `None` for the group itself) a path entry stands for.
    pub fn resolve(&self, r: RuleRef) -> Option<(u32, Option<usize>)> {
        if r.table != GROUP_TABLE {
            return None;
        }
        self.by_id.iter().find_map(|(&id, (g, first))| {
            let n = g.spec.buckets.len() as u32;
            (r.index >= *first && r.index <= first + n).then(|| {
                (
                    id,
                    (r.index > *first).then(|| (r.index - first - 1) as usize),
                )
            })
        })
    }
}

/// The fields a SELECT group hashes (L2–L4 of the packet as it reaches the group).
const HASHED: [Field; 11] = [
    Field::EthSrc,
    Field::EthDst,
    Field::EthType,
    Field::VlanTci,
    Field::NwProto,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::TpSrc,
    Field::TpDst,
];

/// A SELECT group's stable hash of a key's L2–L4 fields: the same flow picks the same
/// bucket in every process and after every restart (no random seed).
pub fn select_hash(k: &FlowKey) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in HASHED {
        let v = k.get(f);
        for x in [v as u64, (v >> 64) as u64] {
            h ^= x;
            h = h.wrapping_mul(0x0100_0000_01b3);
            h ^= h >> 29;
        }
    }
    h ^ (h >> 32)
}

/// The bucket a SELECT group with these buckets takes for `hash`: by weight; `None` when
/// every weight is 0.
pub fn select_bucket(buckets: &[Bucket], hash: u64) -> Option<usize> {
    let total: u64 = buckets.iter().map(|b| b.weight as u64).sum();
    if total == 0 {
        return None;
    }
    let mut x = hash % total;
    for (i, b) in buckets.iter().enumerate() {
        if x < b.weight as u64 {
            return Some(i);
        }
        x -= b.weight as u64;
    }
    None
}

/// The translation's state while it expands groups.
pub(crate) struct Expand<'a> {
    pub k: &'a mut FlowKey,
    pub wc: &'a mut FlowKey,
    pub out: &'a mut ActionList,
    pub path: &'a mut SmallVec<[RuleRef; 4]>,
    /// The last compensation emitted: (start, end) in `out`. When nothing follows it at
    /// the end of the walk it is dropped.
    pub tail: &'a mut Option<(usize, usize)>,
}

impl Expand<'_> {
    /// Run a list of actions (apply-actions or the action set's), expanding groups. Ends
    /// early as [`translate_action`] does (TTL expired, a third tag).
    pub(crate) fn run(&mut self, groups: &GroupTable, actions: &[Action]) -> Option<Ending> {
        for a in actions {
            if let Action::Group(id) = *a {
                self.group(groups, id);
                continue;
            }
            if let Some(end) = translate_action(a, self.k, self.wc, self.out) {
                return Some(end);
            }
        }
        None
    }

    /// Expand group `id` (a group that does not exist does nothing: the store keeps no rule
    /// naming a missing group).
    pub(crate) fn group(&mut self, groups: &GroupTable, id: u32) {
        let Some((g, first)) = groups.by_id.get(&id) else {
            return;
        };
        self.path.push(RuleRef {
            table: GROUP_TABLE,
            index: *first,
        });
        let buckets = &g.spec.buckets;
        let chosen: SmallVec<[usize; 4]> = match g.spec.kind {
            GroupType::All => (0..buckets.len()).collect(),
            GroupType::Indirect => (0..buckets.len().min(1)).collect(),
            GroupType::Select => {
                for f in HASHED {
                    self.wc.set_all(f);
                }
                select_bucket(buckets, select_hash(self.k))
                    .into_iter()
                    .collect()
            }
            GroupType::FastFailover => SmallVec::new(),
        };
        for i in chosen {
            self.path.push(RuleRef {
                table: GROUP_TABLE,
                index: first + 1 + i as u32,
            });
            self.bucket(&buckets[i].actions);
        }
    }

    /// One bucket on its own copy: run its actions, then emit what puts the packet back.
    fn bucket(&mut self, actions: &[Action]) {
        let pre = *self.k;
        for a in actions {
            let before = self.out.len();
            if translate_action(a, self.k, self.wc, self.out).is_some() {
                // This copy is dropped here (a third tag: the key is unchanged); the
                // action that would drop the whole packet is not emitted.
                self.out.truncate(before);
                break;
            }
        }
        self.restore(&pre, actions);
    }

    /// Emit rewrites that take the packet from `*self.k` back to `pre`, for every field
    /// `actions` may have written (each un-wildcarded, so the decision holds for the whole
    /// megaflow).
    fn restore(&mut self, pre: &FlowKey, actions: &[Action]) {
        let start = self.out.len();
        let (vlan, touched) = self.unwildcard_writes(actions);
        let k = *self.k;
        // The IPv4 and IPv6 addresses share the key's bytes: compare the family the packet
        // is (the address sets un-wildcarded the ethertype).
        let eth_type = k.get(Field::EthType) as u16;
        let mut emit = |a: Action| self.out.push(a);
        if vlan {
            restore_vlans(pre, &k, &mut emit);
        }
        // Each field at most once, in a fixed order.
        for f in RESTORED {
            let family = match f {
                Field::Ipv4Src | Field::Ipv4Dst => Some(ethertype::IPV4),
                Field::Ipv6Src | Field::Ipv6Dst => Some(ethertype::IPV6),
                _ => None,
            };
            if !touched.contains(&f) || family.is_some_and(|t| t != eth_type) {
                continue;
            }
            let (was, now) = (pre.get(f), k.get(f));
            if was != now {
                emit(set_back(f, was));
            }
        }
        *self.k = *pre;
        if self.out.len() > start {
            *self.tail = Some((start, self.out.len()));
        }
    }

    /// The fields of [`RESTORED`] that `actions` write, each un-wildcarded; and whether
    /// they change the VLAN tags (restored as a stack, not field by field).
    fn unwildcard_writes(&mut self, actions: &[Action]) -> (bool, SmallVec<[Field; 8]>) {
        let mut vlan = false;
        let mut touched: SmallVec<[Field; 8]> = SmallVec::new();
        for a in actions {
            let f = match a {
                Action::SetEthSrc(_) => Field::EthSrc,
                Action::SetEthDst(_) => Field::EthDst,
                Action::SetIpv4Src(_) => Field::Ipv4Src,
                Action::SetIpv4Dst(_) => Field::Ipv4Dst,
                Action::SetIpv6Src(_) => Field::Ipv6Src,
                Action::SetIpv6Dst(_) => Field::Ipv6Dst,
                Action::SetNwTos(_) => Field::NwTos,
                Action::SetTpSrc(_) => Field::TpSrc,
                Action::SetTpDst(_) => Field::TpDst,
                Action::SetTunnel(_) => Field::TunId,
                Action::PushVlan { .. }
                | Action::PopVlan
                | Action::SetVlanVid(_)
                | Action::SetVlanPcp(_) => {
                    vlan = true;
                    continue;
                }
                _ => continue,
            };
            self.wc.set_all(f);
            if !touched.contains(&f) {
                touched.push(f);
            }
        }
        (vlan, touched)
    }
}

/// The fields a bucket's set actions write that a compensation sets back, in the order
/// it emits them.
const RESTORED: [Field; 10] = [
    Field::EthSrc,
    Field::EthDst,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::NwTos,
    Field::TpSrc,
    Field::TpDst,
    Field::TunId,
];

/// The action that sets field `f` (one of [`RESTORED`]) back to `was`.
fn set_back(f: Field, was: u128) -> Action {
    match f {
        Field::EthSrc => Action::SetEthSrc(mac_bytes(was)),
        Field::EthDst => Action::SetEthDst(mac_bytes(was)),
        Field::Ipv4Src => Action::SetIpv4Src((was as u32).to_be_bytes()),
        Field::Ipv4Dst => Action::SetIpv4Dst((was as u32).to_be_bytes()),
        Field::Ipv6Src => Action::SetIpv6Src(was.to_be_bytes()),
        Field::Ipv6Dst => Action::SetIpv6Dst(was.to_be_bytes()),
        Field::NwTos => Action::SetNwTos(was as u8 & 0xfc),
        Field::TpSrc => Action::SetTpSrc(was as u16),
        Field::TpDst => Action::SetTpDst(was as u16),
        Field::TunId => Action::SetTunnel(was as u32),
        _ => unreachable!("only the fields of RESTORED"),
    }
}

/// A key's VLAN stack, innermost first.
fn vlan_stack(k: &FlowKey) -> SmallVec<[u16; 2]> {
    let outer = k.get(Field::VlanTci) as u16;
    let inner = k.get(Field::VlanInnerTci) as u16;
    let mut s = SmallVec::new();
    if outer & VLAN_PRESENT != 0 {
        if inner & VLAN_PRESENT != 0 {
            s.push(inner);
        }
        s.push(outer);
    }
    s
}

/// The VLAN actions that take the tags of `now` back to those of `pre`: set the outer
/// tag's VID/PCP when only it differs; else pop down to the tags both share and push the
/// rest back (as 802.1Q).
fn restore_vlans(pre: &FlowKey, now: &FlowKey, emit: &mut impl FnMut(Action)) {
    let (want, have) = (vlan_stack(pre), vlan_stack(now));
    if want == have {
        return;
    }
    let common = want.iter().zip(&have).take_while(|(a, b)| a == b).count();
    if want.len() == have.len() && common + 1 == want.len() {
        let (w, h) = (want[common], have[common]);
        if w & 0x0fff != h & 0x0fff {
            emit(Action::SetVlanVid(w & 0x0fff));
        }
        if w >> 13 != h >> 13 {
            emit(Action::SetVlanPcp((w >> 13) as u8));
        }
        return;
    }
    for _ in common..have.len() {
        emit(Action::PopVlan);
    }
    for &t in &want[common..] {
        emit(Action::PushVlan { tpid: 0x8100 });
        emit(Action::SetVlanVid(t & 0x0fff));
        emit(Action::SetVlanPcp((t >> 13) as u8));
    }
}

fn mac_bytes(v: u128) -> [u8; 6] {
    let b = (v as u64).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}
