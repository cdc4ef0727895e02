//! The `ct_nat` check: any bytes as a rewrite and a frame through the NAT's `apply` (or
//! `apply_related`), with the invariants that must hold (shared with a stable test).
//!
//! Compiled twice: by the fuzz crate (`fuzz/fuzz_targets/ct_nat.rs`) and, through
//! `#[path]`, by `crates/conntrack/tests/nat_fuzz_corpus.rs`, so it only uses
//! `flowpath_conntrack`.
//!
//! The input:
//!
//! ```text
//! 0      bit 0: IPv6; bit 1: apply_related; bits 2-3: protocol (TCP, UDP, ICMP, GRE)
//! 1      l3 (mod 64)
//! 2      l4 - l3 (mod 128)
//! 3..39  from: source, destination address (16 bytes each; IPv4: the first 4), ports
//! 39..75 to: likewise
//! 75..   the frame
//! ```

use flowpath_conntrack::nat::{apply, apply_related, Rewrite};
use flowpath_conntrack::Tuple;

/// What the rewrite did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The input is shorter than its header.
    Short,
    Applied {
        related: bool,
    },
    Refused {
        related: bool,
    },
}

/// Rewrite the frame in `data`; panics when an invariant breaks.
pub fn check(data: &[u8]) -> Outcome {
    let Some((head, frame)) = data.split_at_checked(75) else {
        return Outcome::Short;
    };
    let v6 = head[0] & 1 != 0;
    let related = head[0] & 2 != 0;
    let proto = match (head[0] >> 2) & 3 {
        0 => 6,
        1 => 17,
        2 if v6 => 58,
        2 => 1,
        _ => 47,
    };
    let l3 = usize::from(head[1] % 64);
    let l4 = l3 + usize::from(head[2] % 128);
    let tuple = |b: &[u8]| Tuple {
        src: addr(&b[0..16], v6),
        dst: addr(&b[16..32], v6),
        src_port: u16::from_be_bytes([b[32], b[33]]),
        dst_port: u16::from_be_bytes([b[34], b[35]]),
        proto,
        ipv6: v6,
        zone: 0,
    };
    let rw = Rewrite {
        from: tuple(&head[3..39]),
        to: tuple(&head[39..75]),
    };
    let mut f = frame.to_vec();
    let ip_ok = ipv4_header_ok(&f, l3);
    let csum_ok = if related {
        None
    } else {
        l4_ok(&f, l3, l4, v6, proto)
    };
    let done = if related {
        apply_related(&mut f, l3, l4, &rw)
    } else {
        apply(&mut f, l3, l4, &rw)
    };
    let mut again = frame.to_vec();
    let redo = if related {
        apply_related(&mut again, l3, l4, &rw)
    } else {
        apply(&mut again, l3, l4, &rw)
    };
    assert_eq!(
        (redo, &again),
        (done, &f),
        "the rewrite is not deterministic"
    );
    if !done {
        assert_eq!(f, frame, "a refused rewrite wrote to the frame");
        return Outcome::Refused { related };
    }
    assert_eq!(f.len(), frame.len());
    if ip_ok == Some(true) {
        assert_eq!(
            ipv4_header_ok(&f, l3),
            Some(true),
            "broke the IPv4 header checksum"
        );
    }
    if csum_ok == Some(true) {
        assert_eq!(
            l4_ok(&f, l3, l4, v6, proto),
            Some(true),
            "broke the L4 checksum"
        );
    }
    if related {
        // The ICMP checksum is summed anew: it verifies whatever it was before.
        let end = ip_end(&f, l3, v6).expect("an applied error has its length");
        let ok = if v6 {
            let len = ((end - l4) as u32).to_be_bytes();
            sum(&[&f[l3 + 8..l3 + 40], &len, &[0, 0, 0, 58], &f[l4..end]])
        } else {
            sum(&[&f[l4..end]])
        };
        assert_eq!(ok, 0xffff, "ICMP checksum of an error");
    }
    Outcome::Applied { related }
}

fn addr(b: &[u8], v6: bool) -> u128 {
    let a = u128::from_be_bytes(b.try_into().expect("16 bytes"));
    if v6 {
        a
    } else {
        a >> 96 << 96
    }
}

/// Folded one's-complement sum of the chunks (each even-length but the last).
fn sum(chunks: &[&[u8]]) -> u16 {
    let mut s: u64 = 0;
    let mut odd = false;
    for c in chunks {
        for b in c.iter() {
            s += if odd {
                u64::from(*b)
            } else {
                u64::from(*b) << 8
            };
            odd = !odd;
        }
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Whether an IPv4 header at `l3` has a right checksum (`None`: no IPv4 header there).
fn ipv4_header_ok(f: &[u8], l3: usize) -> Option<bool> {
    let ihl = usize::from(f.get(l3)? & 15) * 4;
    if f[l3] >> 4 != 4 || ihl < 20 {
        return None;
    }
    Some(sum(&[f.get(l3..l3 + ihl)?]) == 0xffff)
}

/// Where the IP payload ends, if within the frame.
fn ip_end(f: &[u8], l3: usize, v6: bool) -> Option<usize> {
    let len = usize::from(u16::from_be_bytes([
        *f.get(l3 + 2 + 2 * usize::from(v6))?,
        *f.get(l3 + 3 + 2 * usize::from(v6))?,
    ]));
    let end = if v6 { l3 + 40 + len } else { l3 + len };
    (end <= f.len()).then_some(end)
}

/// Whether the transport checksum at `l4` verifies (`None`: nothing to verify there).
fn l4_ok(f: &[u8], l3: usize, l4: usize, v6: bool, proto: u8) -> Option<bool> {
    let end = ip_end(f, l3, v6)?;
    let seg = f.get(l4..end)?;
    let csum_at = match proto {
        6 => 16,
        17 => 6,
        1 | 58 => 2,
        _ => return None,
    };
    let c = seg.get(csum_at..csum_at + 2)?;
    if proto == 17 && c == [0, 0] {
        return None;
    }
    let (src, plen) = if v6 { (l3 + 8, 32) } else { (l3 + 12, 8) };
    // (An IPv4 fragment after the first has no transport header to verify.)
    if l4 < src + plen || f.len() < l3 + 10 {
        return None;
    }
    let later_fragment = !v6 && u16::from_be_bytes([f[l3 + 6], f[l3 + 7]]) & 0x1fff != 0;
    if (!v6 && f[l3 + 9] != proto) || later_fragment {
        return None;
    }
    let len = (seg.len() as u32).to_be_bytes();
    let pseudo: [&[u8]; 4] = [&f[src..src + plen], &[0, proto], &len[..2], &len[2..]];
    Some(if proto == 1 {
        sum(&[seg]) == 0xffff
    } else if v6 {
        sum(&[pseudo[0], &len, &[0, 0, 0, proto], seg]) == 0xffff
    } else {
        sum(&[pseudo[0], pseudo[1], pseudo[3], seg]) == 0xffff
    })
}
