//! The lab's parse-then-redirect baseline (`parse_forward`, `flowpath xdp-forward --parse`)
//! must run the tier's own parser: on every hand-picked frame it redirects exactly the frames
//! the tier parses (with nothing cached, the tier's verdict is a miss) and passes the ones
//! the tier hands over unparsed, and it changes no frame. Needs root (skips without).

mod common;

use common::*;
use flowpath_xdptier::{xdp_action, FlowTier, Reason};

#[test]
fn the_baseline_redirects_what_the_tier_parses() {
    let Some(tier) = tier() else { return };
    let mut base = FlowTier::load_parse_forward().expect("load parse_forward");
    base.set_output_dev(0, LO).unwrap();
    let (mut redirected, mut passed) = (0, 0);
    for f in frames() {
        let before = tier.last_debug().unwrap().seq;
        tier.test_run(&f, LO).unwrap();
        let d = tier.last_debug().unwrap();
        assert_eq!(d.seq, before.wrapping_add(1), "no record for {f:02x?}");
        let parsed = match Reason::from_u32(d.reason).expect("known reason") {
            Reason::Miss => true,
            Reason::UpParse | Reason::UpUnsupported => false,
            other => panic!("unexpected tier verdict {other:?} for {f:02x?}"),
        };
        let r = base.test_run(&f, LO).unwrap();
        assert_eq!(r.data, f, "the baseline changed a frame");
        if parsed {
            assert_eq!(r.action, xdp_action::REDIRECT, "not redirected: {f:02x?}");
            redirected += 1;
        } else {
            assert_eq!(
                r.action,
                xdp_action::PASS,
                "parsed what the tier hands over: {f:02x?}"
            );
            passed += 1;
        }
    }
    // The frames exercise both outcomes.
    assert!(redirected >= 50 && passed >= 10, "{redirected} {passed}");
}
