//! The vocabulary of connection tracking shared by the flow syntax, the OpenFlow codec, the
//! slow path, the datapath and the tracker: `ct_state` flags, a `ct(...)` action's
//! [`CtSpec`] (interned, so [`crate::Action`] stays small and `Copy`), and recirculation ids.

use crate::key::{Field, FlowKey};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};

/// `ct_state` flags, OVS's bit values (`CS_*` in OVS's `lib/packets.h`).
pub mod state {
    /// The first packet of a connection the tracker has not seen (or not committed).
    pub const NEW: u8 = 0x01;
    /// Part of a connection seen in both directions (or committed, for `+new` replies).
    pub const ESTABLISHED: u8 = 0x02;
    /// Related to a tracked connection (an ICMP error quoting it).
    pub const RELATED: u8 = 0x04;
    /// The reply direction.
    pub const REPLY_DIR: u8 = 0x08;
    /// Invalid: the tracker could not make sense of it (bad flags, out of window, ...).
    pub const INVALID: u8 = 0x10;
    /// Has been through the tracker.
    pub const TRACKED: u8 = 0x20;
    /// Source NAT applied.
    pub const SRC_NAT: u8 = 0x40;
    /// Destination NAT applied.
    pub const DST_NAT: u8 = 0x80;

    /// Every flag with its flow-syntax name, in OVS's print order.
    pub const NAMES: [(u8, &str); 8] = [
        (NEW, "new"),
        (ESTABLISHED, "est"),
        (RELATED, "rel"),
        (REPLY_DIR, "rpl"),
        (INVALID, "inv"),
        (TRACKED, "trk"),
        (SRC_NAT, "snat"),
        (DST_NAT, "dnat"),
    ];
}

/// Where a `ct` action's zone comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtZoneSrc {
    /// `zone=N`.
    Value(u16),
    /// `zone=FIELD[start..end]`: the low 16 bits of a slice of a key field, as the key is
    /// when the action runs (`bits` wide from bit `ofs`).
    Field { field: Field, ofs: u8, bits: u8 },
}

impl CtZoneSrc {
    /// The zone for a packet keyed `key`.
    #[inline]
    pub fn zone(&self, key: &FlowKey) -> u16 {
        match *self {
            CtZoneSrc::Value(z) => z,
            CtZoneSrc::Field { field, ofs, bits } => {
                let v = key.get(field) >> ofs;
                (v & ((1u128 << bits.min(16)) - 1)) as u16
            }
        }
    }
}

/// Which side of a connection NAT rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// `nat(src=...)`: source NAT of the original direction.
    Src,
    /// `nat(dst=...)`: destination NAT of the original direction.
    Dst,
}

/// How NAT picks a port from a range (OVS's `random`, `hash`, `persistent`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NatFlags {
    pub random: bool,
    pub hash: bool,
    pub persistent: bool,
}

/// `nat(...)` inside `ct(commit, ...)`; a bare `nat` (no `kind`) only applies the NAT a
/// connection already has (to its later packets and to replies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatSpec {
    /// `None`: bare `nat`.
    pub kind: Option<NatKind>,
    /// Inclusive address range (both of one family); `None` keeps the address.
    pub addrs: Option<(IpAddr, IpAddr)>,
    /// Inclusive port range; `None` keeps the port (unless it must change to be unique).
    pub ports: Option<(u16, u16)>,
    pub flags: NatFlags,
}

/// One `ct(...)` action, as OVS's `ofpact_conntrack` has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CtSpec {
    /// `commit`: create the connection if it is new (and apply `exec`).
    pub commit: bool,
    /// `force`: a committed connection seen in its reply direction is ended and started
    /// again in this direction.
    pub force: bool,
    pub zone: CtZoneSrc,
    /// `table=T`: recirculate the tracked packet into table T. `None`: the packet goes on
    /// with the next action, its ct fields unchanged for the rest of this pass.
    pub table: Option<u8>,
    pub nat: Option<NatSpec>,
    /// `exec(set_field:V/M->ct_mark)`: value and mask.
    pub set_mark: Option<(u32, u32)>,
    /// `exec(set_field:V/M->ct_label)`: value and mask.
    pub set_label: Option<(u128, u128)>,
}

impl CtSpec {
    /// `ct()` with everything off: zone 0, no commit, no recirculation.
    pub const fn new() -> CtSpec {
        CtSpec {
            commit: false,
            force: false,
            zone: CtZoneSrc::Value(0),
            table: None,
            nat: None,
            set_mark: None,
            set_label: None,
        }
    }
}

impl Default for CtSpec {
    fn default() -> Self {
        CtSpec::new()
    }
}

/// An interned [`CtSpec`]: what [`crate::Action::Ct`] carries. Equal specs get the same id
/// for the life of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CtId(u32);

/// At most this many distinct `ct` actions exist in one process: a controller that sends
/// more gets [`TooManyCtSpecs`], so it cannot grow the interner without bound.
pub const MAX_CT_SPECS: usize = CHUNK * CHUNKS;
const CHUNK: usize = 1024;
const CHUNKS: usize = 64;

/// The interner is full ([`MAX_CT_SPECS`] distinct `ct` actions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyCtSpecs;

impl std::fmt::Display for TooManyCtSpecs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "more than {MAX_CT_SPECS} distinct ct() actions")
    }
}

impl std::error::Error for TooManyCtSpecs {}

type Chunk = Box<[OnceLock<CtSpec>]>;
static SPECS: [OnceLock<Chunk>; CHUNKS] = [const { OnceLock::new() }; CHUNKS];
static INDEX: OnceLock<Mutex<HashMap<CtSpec, u32>>> = OnceLock::new();

impl CtId {
    /// The id of `spec`, interning it on first sight (a lock: control path only).
    pub fn intern(spec: CtSpec) -> Result<CtId, TooManyCtSpecs> {
        let mut index = INDEX
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = index.get(&spec) {
            return Ok(CtId(id));
        }
        let id = index.len();
        if id >= MAX_CT_SPECS {
            return Err(TooManyCtSpecs);
        }
        let chunk = SPECS[id / CHUNK].get_or_init(|| (0..CHUNK).map(|_| OnceLock::new()).collect());
        let _ = chunk[id % CHUNK].set(spec);
        index.insert(spec, id as u32);
        Ok(CtId(id as u32))
    }

    /// The spec this id stands for (two loads, no lock: the datapath calls it per packet).
    #[inline]
    pub fn spec(self) -> &'static CtSpec {
        let i = self.0 as usize;
        SPECS[i / CHUNK]
            .get()
            .and_then(|c| c[i % CHUNK].get())
            .expect("a CtId is only made by intern")
    }

    pub fn index(self) -> u32 {
        self.0
    }
}

/// The recirculation id of table `table`: what `ct(table=T)` writes into
/// [`Field::RecircId`], and from which the slow path knows where to resume. Never 0 (the
/// first pass).
#[inline]
pub const fn recirc_id(table: u8) -> u32 {
    table as u32 + 1
}

/// The table a recirculated key resumes in (`None` for a first-pass key).
#[inline]
pub fn recirc_table(key: &FlowKey) -> Option<u8> {
    match key.get(Field::RecircId) as u32 {
        0 => None,
        id => Some((id - 1) as u8),
    }
}

/// Clear every ct field of `key` (what `ct_clear` does).
pub fn clear(key: &mut FlowKey) {
    for f in Field::CT {
        key.set(f, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_gives_one_id_per_spec() {
        let a = CtSpec {
            commit: true,
            zone: CtZoneSrc::Value(7),
            table: Some(3),
            ..CtSpec::new()
        };
        let b = CtSpec { commit: false, ..a };
        let ia = CtId::intern(a).unwrap();
        assert_eq!(CtId::intern(a).unwrap(), ia);
        let ib = CtId::intern(b).unwrap();
        assert_ne!(ia, ib);
        assert_eq!(*ia.spec(), a);
        assert_eq!(*ib.spec(), b);
    }

    #[test]
    fn recirc_ids_round_trip_and_clear_zeroes_ct_words() {
        let mut k = FlowKey::ZERO;
        assert_eq!(recirc_table(&k), None);
        k.set(Field::RecircId, recirc_id(5) as u128);
        assert_eq!(recirc_table(&k), Some(5));
        k.set(Field::CtState, 0x22);
        k.set(Field::CtLabel, u128::MAX);
        k.set(Field::CtIpv6Dst, 1);
        clear(&mut k);
        assert_eq!(k.words[14..], [0; 7]);
        assert_eq!(k.get(Field::RecircId), recirc_id(5) as u128);
    }
}
