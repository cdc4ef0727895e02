//! The tree's shapes: the fields it cuts on ([`Dim`]), its nodes, one tree, and the
//! forest of trees over a table's rules with the rule copies their leaves name.

use crate::wildcards::read_bytes;
use flowpath_packet::{Field, WordSet, KEY_BYTES};

/// A field the tree cuts on.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dim {
    pub(super) field: Field,
    pub(super) off: u8,
    pub(super) len: u8,
    /// Width in bits.
    pub(super) w: u8,
}

impl Dim {
    pub(super) fn of(field: Field) -> Dim {
        let (off, len) = field.range();
        Dim {
            field,
            off: off as u8,
            len: len as u8,
            w: field.bits() as u8,
        }
    }

    /// The field's value in `key`, as a number.
    #[inline(always)]
    pub(super) fn read(&self, b: &[u8; KEY_BYTES]) -> u128 {
        read_bytes(b, self.off as usize, self.len as usize)
    }
}

/// One node: a cut (`bits > 0`; children at `nodes[a..a + 2^bits]`) or a leaf (`bits == 0`;
/// rules at `leaves[a..a + n]`). A cut may first check `skip` bits above the ones it cuts
/// on against `skips[n]` (path compression: every rule below shares them); a key that
/// differs there goes to the empty leaf at `nodes[a + 2^bits]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Node {
    pub(super) dim: u8,
    pub(super) shift: u8,
    pub(super) bits: u8,
    pub(super) skip: u8,
    pub(super) a: u32,
    pub(super) n: u32,
}

impl Node {
    pub(super) const LEAF: Node = Node {
        dim: 0,
        shift: 0,
        bits: 0,
        skip: 0,
        a: 0,
        n: 0,
    };
}

/// The low `n` bits set.
#[inline(always)]
pub(super) fn low_mask(n: u32) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

#[derive(Debug)]
pub(super) struct Tree {
    /// The best classifier order key of any rule in the tree.
    pub(super) best_key: u64,
    pub(super) nodes: Vec<Node>,
    pub(super) leaves: Vec<u32>,
    pub(super) skips: Vec<u128>,
}

/// Several trees (one per group of rules) over one table's rules.
#[derive(Debug)]
pub(super) struct Forest {
    pub(super) dims: Vec<Dim>,
    pub(super) trees: Vec<Tree>,
    /// The key words any rule's mask touches, and each rule's mask and value on just those
    /// words, interleaved (`stride` = 2 × words).
    pub(super) words: WordSet,
    pub(super) stride: usize,
    pub(super) compact: Vec<u64>,
    /// Each rule's port ranges (lo, hi, lo, hi); `[0, 0xffff, 0, 0xffff]` when none.
    pub(super) ports: Vec<[u16; 4]>,
    pub(super) any_ranges: bool,
    /// Each rule's classifier order key (`table::order_key`; smaller wins), by the
    /// forest's own rule numbering (the table's at build time).
    pub(super) order: Vec<u64>,
}

/// A node's region on every dim: (prefix length, value).
pub(super) type Region = Vec<(u32, u128)>;

impl Forest {
    pub(super) fn entries(&self) -> usize {
        self.trees.iter().map(|t| t.leaves.len()).sum()
    }

    pub(super) fn memory_bytes(&self) -> usize {
        let trees: usize = self
            .trees
            .iter()
            .map(|t| t.nodes.len() * 12 + t.leaves.len() * 4 + t.skips.len() * 16)
            .sum();
        trees + self.compact.len() * 8 + self.ports.len() * 8
    }
}
