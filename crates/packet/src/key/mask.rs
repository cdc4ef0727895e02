//! A tuple-space subtable's mask in the forms its search uses: [`MaskLanes`] (one to four
//! words, hashed and compared branch-free) and [`SubtableMask`] (the mask, its words and
//! lanes, and the packed rows of its entries).

use super::hash::{finish, pair, K};
use super::{FlowKey, WordSet};

/// A mask of one to four words in a fixed form, for the megaflow search's hot loop: four
/// lanes of (word index, mask word), the last word repeated to fill the lanes. Hashing and
/// matching a key take one branch-free path of four loads, where [`FlowKey::masked_hash`]
/// and [`FlowKey::matches_words`] first dispatch on the word count (a fifth of the
/// search's instructions). Its hash is its own (not `masked_hash`'s): a table must use
/// one of the two for all its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskLanes {
    // Invariant (unchecked indexing relies on it): every index is below KEY_WORDS.
    idx: [u8; 4],
    mask: [u64; 4],
}

impl MaskLanes {
    /// The lanes of `mask`, whose words in use are `set`; `None` for a mask of no words
    /// (it matches everything) or of more than four.
    pub fn of(mask: &FlowKey, set: &WordSet) -> Option<MaskLanes> {
        let ix = set.indices();
        if ix.is_empty() || ix.len() > 4 {
            return None;
        }
        let mut lanes = MaskLanes {
            idx: [0; 4],
            mask: [0; 4],
        };
        for j in 0..4 {
            let a = ix[j.min(ix.len() - 1)];
            lanes.idx[j] = a;
            lanes.mask[j] = mask.words[a as usize];
        }
        Some(lanes)
    }

    #[inline(always)]
    fn lane(&self, key: &FlowKey, j: usize) -> u64 {
        // SAFETY: idx holds word indices below KEY_WORDS (built from a WordSet in `of`).
        unsafe { key.words.get_unchecked(self.idx[j] as usize) & self.mask[j] }
    }

    /// Hash of `key & mask`.
    #[inline(always)]
    pub fn hash(&self, key: &FlowKey, seed: u64) -> u32 {
        let l = |j: usize| self.lane(key, j) ^ K[j];
        finish(pair(l(0), l(1), seed).wrapping_add(pair(l(2), l(3), seed)))
    }

    /// `(key & mask) == value`, for a `value` that is zero outside the mask.
    #[inline(always)]
    pub fn matches(&self, key: &FlowKey, value: &FlowKey) -> bool {
        let mut diff = 0u64;
        for j in 0..4 {
            // SAFETY: as in `lane`.
            diff |= self.lane(key, j) ^ unsafe { value.words.get_unchecked(self.idx[j] as usize) };
        }
        diff == 0
    }
}

/// A tuple-space subtable's mask in the forms its search uses: the mask, the words it
/// uses, and the four-lane form when it has one to four words (then hashing and comparing
/// go through [`MaskLanes`], else through [`FlowKey::masked_hash`] and
/// [`FlowKey::matches_words`]). One value per subtable: its entries are all filed by
/// [`SubtableMask::hash`].
#[derive(Clone, Copy, Debug)]
pub struct SubtableMask {
    mask: FlowKey,
    words: WordSet,
    lanes: Option<MaskLanes>,
}

impl SubtableMask {
    pub fn new(mask: FlowKey) -> SubtableMask {
        let words = WordSet::of_mask(&mask);
        SubtableMask {
            lanes: MaskLanes::of(&mask, &words),
            mask,
            words,
        }
    }

    pub fn mask(&self) -> &FlowKey {
        &self.mask
    }

    /// The hash `key` is filed under.
    #[inline(always)]
    pub fn hash(&self, key: &FlowKey, seed: u64) -> u32 {
        match &self.lanes {
            Some(l) => l.hash(key, seed),
            None => key.masked_hash(&self.mask, &self.words, seed),
        }
    }

    /// The four-lane form, when the mask has one to four words: a search over many keys
    /// can dispatch on it once instead of once a key.
    #[inline(always)]
    pub fn lanes(&self) -> Option<&MaskLanes> {
        self.lanes.as_ref()
    }

    /// Whether `key` falls inside the masked key `value`.
    #[inline(always)]
    pub fn matches(&self, key: &FlowKey, value: &FlowKey) -> bool {
        match &self.lanes {
            Some(l) => l.matches(key, value),
            None => key.matches_words(&self.mask, value, &self.words),
        }
    }

    /// Words in a row ([`SubtableMask::write_row`]): four for a mask of one to four words
    /// (its lanes, the last repeated), else one per word in use.
    pub fn row_len(&self) -> usize {
        match &self.lanes {
            Some(_) => 4,
            None => self.words.len(),
        }
    }

    /// `key & mask` packed into `row` ([`SubtableMask::row_len`] words): only the words
    /// the mask uses, so a table of masked keys can keep a row of 8–32 bytes per entry
    /// instead of a whole 104-byte key.
    pub fn write_row(&self, key: &FlowKey, row: &mut [u64]) {
        assert_eq!(row.len(), self.row_len(), "row length");
        match &self.lanes {
            Some(l) => {
                for (j, r) in row.iter_mut().enumerate() {
                    *r = l.lane(key, j);
                }
            }
            None => {
                for (r, &w) in row.iter_mut().zip(self.words.indices()) {
                    *r = key.words[w as usize] & self.mask.words[w as usize];
                }
            }
        }
    }

    /// Whether `key` falls inside the masked key whose row is `row` (from
    /// [`SubtableMask::write_row`] with this mask): [`SubtableMask::matches`] on rows.
    #[inline(always)]
    pub fn row_matches(&self, key: &FlowKey, row: &[u64]) -> bool {
        match &self.lanes {
            Some(l) => {
                debug_assert_eq!(row.len(), 4);
                let Some(row) = row.first_chunk::<4>() else {
                    return false;
                };
                let mut diff = 0u64;
                for (j, r) in row.iter().enumerate() {
                    diff |= l.lane(key, j) ^ r;
                }
                diff == 0
            }
            None => {
                debug_assert_eq!(row.len(), self.words.len());
                let mut diff = 0u64;
                for (r, &w) in row.iter().zip(self.words.indices()) {
                    // SAFETY: as in `masked_hash`, every index is below KEY_WORDS.
                    unsafe {
                        let w = w as usize;
                        diff |= (key.words.get_unchecked(w) & self.mask.words.get_unchecked(w)) ^ r;
                    }
                }
                diff == 0
            }
        }
    }
}
