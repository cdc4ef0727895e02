//! What the parser's fast-path tests share: run a frame through `parse_into` (every fast
//! path) and `parse_into_general` (the general parser alone) and require the same result,
//! key and header offsets, starting from garbage in both.

use flowpath_packet::parse::{parse_into, parse_into_general};
use flowpath_packet::{DropReason, FlowKey, PacketMeta, ParseOptions};

pub type Outcome = (Result<(), DropReason>, FlowKey, PacketMeta);

pub fn both(data: &[u8], opts: &ParseOptions) -> (Outcome, Outcome) {
    let run = |general: bool| {
        // Start from garbage: the result must not depend on it.
        let mut key = FlowKey::ONES;
        let mut meta = PacketMeta {
            l2: 7,
            l3: 7,
            l4: 7,
            vlans: 7,
        };
        let r = if general {
            parse_into_general(data, 0x0a0b_0c0d, opts, &mut key, &mut meta)
        } else {
            parse_into(data, 0x0a0b_0c0d, opts, &mut key, &mut meta)
        };
        (r, key, meta)
    };
    (run(false), run(true))
}

pub fn assert_same(data: &[u8], opts: &ParseOptions) -> Result<(), DropReason> {
    let (fast, general) = both(data, opts);
    assert_eq!(fast.0, general.0, "result differs for {data:02x?}");
    assert_eq!(fast.2, general.2, "offsets differ for {data:02x?}");
    assert!(
        fast.1 == general.1,
        "key differs for {data:02x?}:\n{:?}\n{:?}",
        fast.1,
        general.1
    );
    fast.0
}
