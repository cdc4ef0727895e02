//! Per-worker datapath counters: packets per tier, drops by named reason, TSC cycles per
//! stage. Plain integers (only the worker writes them), merged on read by whoever shows them.

use flowpath_packet::DropReason;

/// TSC cycles spent per stage, summed over the batches that were timed (one in
/// [`crate::datapath::STAGE_SAMPLE`], chosen at random: a TSC read costs ~25 cycles here,
/// and five a batch would be ~3 cycles per packet). `packets` is how many packets those
/// batches held: divide by it for cycles per packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageCycles {
    pub parse: u64,
    pub emc: u64,
    pub megaflow: u64,
    pub upcall: u64,
    pub actions: u64,
    /// Packets in the timed batches.
    pub packets: u64,
}

impl StageCycles {
    pub fn total(&self) -> u64 {
        self.parse + self.emc + self.megaflow + self.upcall + self.actions
    }
}

/// Why the datapath dropped a packet that parsed (parse drops are [`DropReason`]s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatapathDrop {
    /// No rule matched in some table.
    TableMiss,
    /// The rules chose no output (explicit drop).
    RuleDrop,
    /// `dec_ttl` on a TTL or hop limit of 0 or 1.
    TtlExpired,
    /// A push (VLAN, encapsulation) found no head- or tailroom.
    NoRoom,
    /// A VLAN push beyond two tags.
    TooManyVlansPushed,
    /// The controller queue was full.
    ControllerQueueFull,
    /// A miss over its ingress port's share of the slow path (miss storm defence).
    MissBudget,
    /// A VXLAN packet that matches no configured tunnel port (wrong VNI, unknown remote or
    /// local address), while tunnel ports are configured.
    VxlanNoTunnel,
    /// An output to a tunnel port with no route to the remote (or no remote: `remote_ip =
    /// "flow"` and the packet has no `tun_dst`).
    TunnelNoRoute,
    /// An output to a tunnel port whose next hop's MAC is not resolved yet.
    TunnelNeighUnresolved,
    /// A `ct(table=)` in a packet's last allowed pass ([`crate::recirc::MAX_PASSES`]).
    RecircDepth,
    /// A `ct(table=)` past the packets one pass may recirculate
    /// ([`crate::recirc::RECIRC_MAX`], reached only by forks).
    RecircOverflow,
}

impl DatapathDrop {
    pub const ALL: [DatapathDrop; 12] = [
        DatapathDrop::TableMiss,
        DatapathDrop::RuleDrop,
        DatapathDrop::TtlExpired,
        DatapathDrop::NoRoom,
        DatapathDrop::TooManyVlansPushed,
        DatapathDrop::ControllerQueueFull,
        DatapathDrop::MissBudget,
        DatapathDrop::VxlanNoTunnel,
        DatapathDrop::TunnelNoRoute,
        DatapathDrop::TunnelNeighUnresolved,
        DatapathDrop::RecircDepth,
        DatapathDrop::RecircOverflow,
    ];

    /// The name `flowpath stats` and the metrics endpoint use: the one table of names.
    pub fn name(self) -> &'static str {
        match self {
            DatapathDrop::TableMiss => "table_miss",
            DatapathDrop::RuleDrop => "rule_drop",
            DatapathDrop::TtlExpired => "ttl_expired",
            DatapathDrop::NoRoom => "no_room",
            DatapathDrop::TooManyVlansPushed => "too_many_vlans_pushed",
            DatapathDrop::ControllerQueueFull => "controller_queue_full",
            DatapathDrop::MissBudget => "miss_budget",
            DatapathDrop::VxlanNoTunnel => "vxlan_no_tunnel",
            DatapathDrop::TunnelNoRoute => "tunnel_no_route",
            DatapathDrop::TunnelNeighUnresolved => "tunnel_neigh_unresolved",
            DatapathDrop::RecircDepth => "recirc_depth",
            DatapathDrop::RecircOverflow => "recirc_overflow",
        }
    }
}

/// Per-worker counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatapathStats {
    pub batches: u64,
    pub packets: u64,
    pub bytes: u64,
    pub emc_hits: u64,
    /// Megaflow hits (the signature-match cache's included).
    pub megaflow_hits: u64,
    /// Of those, the ones the signature-match cache found (no subtable search).
    pub smc_hits: u64,
    /// Times the signature-match cache was turned on or off (it runs while it pays).
    pub smc_switches: u64,
    /// Times EMC lookups were suspended or resumed (suspended while they hardly hit).
    pub emc_switches: u64,
    /// Packets classified by the slow path (each installs a megaflow).
    pub upcalls: u64,
    /// Misses answered by a megaflow that an earlier packet of the same batch installed.
    pub upcalls_avoided: u64,
    /// Upcalls whose megaflow was not cached (new-mask rate or mask limit): the packet was
    /// forwarded as classified.
    pub uncached: u64,
    pub parse_drops: [u64; DropReason::ALL.len()],
    /// Drops after parsing, indexed by [`DatapathDrop`].
    pub drops_by: [u64; DatapathDrop::ALL.len()],
    pub controller_sent: u64,
    /// Packet-outs run ([`crate::Datapath::packet_out`]).
    pub packet_outs: u64,
    /// MAC learning table changes this worker caught up with, and the NORMAL megaflows
    /// they removed (their decision changed).
    pub l2_revalidations: u64,
    pub l2_removed: u64,
    pub rule_syncs: u64,
    /// VXLAN packets mapped to a tunnel port on receive, and packets encapsulated for one.
    pub decapsulated: u64,
    pub encapsulated: u64,
    /// Packets for a tunnel held while the next hop's MAC was resolved, and of those the
    /// ones sent once it was (the rest are `tunnel_neigh_unresolved` drops).
    pub tunnel_held: u64,
    pub tunnel_released: u64,
    /// `ct` actions run through the tracker.
    pub ct_executed: u64,
    /// Packets the tracker found starting a connection (`+new`): the stateful switch's
    /// miss. The worker's cycle-fair polling charges a port for batches that have them,
    /// as for batches with flow misses.
    pub ct_new: u64,
    /// Packets `ct(table=)` sent back through the lookup stages (each one pass more).
    pub recirculations: u64,
    /// Recirculated passes run: batches of recirculated packets through the lookup stages
    /// (cache hits and upcalls on them count with the first passes').
    pub recirc_passes: u64,
    /// Connections the tracker expired in this worker's expiry steps.
    pub ct_expired: u64,
    /// Second passes the ct memo answered (each also counted as an exact-match hit, and
    /// in `recirculations`: the packet did go on to its second pass, without a lookup).
    pub ct_memo_hits: u64,
    pub cycles: StageCycles,
}

impl DatapathStats {
    pub fn parse_drops_total(&self) -> u64 {
        self.parse_drops.iter().sum()
    }

    /// Packets dropped for `why`.
    pub fn dropped(&self, why: DatapathDrop) -> u64 {
        self.drops_by[why as usize]
    }

    #[inline(always)]
    pub(crate) fn drop(&mut self, why: DatapathDrop) {
        self.drops_by[why as usize] += 1;
    }

    /// Every way a packet can be dropped, by name, with its count (zeros included).
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        let parse = DropReason::ALL
            .iter()
            .map(|r| (r.name(), self.parse_drops[*r as usize]));
        let after = DatapathDrop::ALL
            .iter()
            .map(|d| (d.name(), self.dropped(*d)));
        parse.chain(after).collect()
    }
}
