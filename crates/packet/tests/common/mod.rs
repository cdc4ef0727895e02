//! What the parser's fast-path tests share: run a frame through `parse_into` (every fast
//! path) and `parse_into_general` (the general parser alone) and require the same result,
//! key and header offsets, starting from garbage in both; and `parse_into_hashed` too,
//! whose hash must be the key's and whose "narrow" must be true of the key.

use flowpath_packet::parse::{parse_into, parse_into_general, parse_into_hashed};
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
    let (mut key, mut meta) = (FlowKey::ONES, PacketMeta::default());
    let seed = 0x5eed;
    let hashed = parse_into_hashed(data, 0x0a0b_0c0d, opts, &mut key, &mut meta, seed);
    assert_eq!(
        hashed.map(|_| ()),
        fast.0,
        "hashed result differs for {data:02x?}"
    );
    if hashed.is_ok() {
        assert!(
            key == fast.1 && meta == fast.2,
            "hashed key differs for {data:02x?}"
        );
    }
    if let Ok(Some((h, narrow))) = hashed {
        assert_eq!(h, key.hash(seed), "fast-path hash for {data:02x?}");
        assert!(!narrow || key.is_narrow(), "said narrow: {data:02x?}");
    }
    fast.0
}
