//! The kernel flow table, written from user space through mmaps of three BPF arrays:
//! `fp_index`, buckets of 16 signature slots, naming entries of `fp_flows`, which are
//! handed out lowest index first so that N flows occupy N entries side by side, and
//! `fp_hot`, one line per bucket holding a copy of one plain flow of it, so that most hits
//! read one cache line (see flowkey.h); a seqlock per entry and per line.
//!
//! Written by hand because no BPF map type does this: the kernel's own hash map costs a
//! helper call, jhash and a memcmp on every packet (about half the program's time on the
//! hit path), while an array lookup is inlined into the program.

use crate::{FpFlowKey, FpFlowValue};
use bytemuck::{Pod, Zeroable};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

/// `FP_INDEX_BUCKETS`: buckets of `fp_index`.
pub const INDEX_BUCKETS: u32 = 16384;
/// `FP_INDEX_WAYS`: slots per bucket (one 64-byte line).
pub const INDEX_WAYS: u32 = 16;
/// `FP_TABLE_ENTRIES`: `fp_flows` max_entries (an entry index fits a slot's low 16 bits).
pub const TABLE_ENTRIES: u32 = 65536;

/// `struct fp_entry`: one `fp_flows` element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpEntry {
    /// Odd while user space writes the entry.
    pub seq: u32,
    /// 1: holds a flow.
    pub used: u32,
    pub key: FpFlowKey,
    pub val: FpFlowValue,
}
const _: () = assert!(size_of::<FpEntry>() == 160);

/// `HOT_LINES`: lines of `fp_hot`, one per bucket (line b belongs to bucket b).
pub const HOT_LINES: u32 = INDEX_BUCKETS;
const HOT_USED: u8 = 0x80;
/// `FP_HOT_ALONE`: the line's bucket holds no flow but the line's own, if it has one, so
/// the program takes a key the line does not hold as absent without reading the bucket
/// ([`FlowTable::mark_alone`] keeps it so).
const HOT_ALONE: u8 = 0x40;

/// `struct fp_hot`: one `fp_hot` line, a copy of one plain flow of its bucket in a single
/// cache line: what a hit needs (lookup words [`HOT_WORDS`], all an IPv4 key has; words 5
/// and 7 must be zero), with narrower fields than an entry's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpHot {
    /// Odd while user space writes the line.
    pub seq: u32,
    pub mask_id: u16,
    /// `fp_stats` index.
    pub slot: u16,
    /// Lookup words 0, 1, 2, 3, 4 and 6 (little-endian loads of the masked key).
    pub w: [u64; 6],
    pub version: u32,
    pub out_port: u16,
    /// `fp_ports` index.
    pub out_dev: u8,
    /// `FP_HOT_USED` (0x80) when the line holds a flow, | `FP_ACT_OUTPUT` for an output,
    /// | `FP_HOT_ALONE` (0x40) while the bucket holds nothing else.
    pub flags: u8,
}
const _: () = assert!(size_of::<FpHot>() == 64 && std::mem::offset_of!(FpHot, version) == 56);

/// The lookup words a hot line keeps; the other two (the addresses' last 8 bytes) must be
/// zero.
pub const HOT_WORDS: [usize; 6] = [0, 1, 2, 3, 4, 6];

/// Lookup word `i` of `k` as the program loads it.
fn word(k: &FpFlowKey, i: usize) -> u64 {
    u64::from_le_bytes(k.key[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

/// `k`'s [`HOT_WORDS`], or None when one of the other two is not zero.
fn hot_words(k: &FpFlowKey) -> Option<[u64; 6]> {
    (word(k, 5) == 0 && word(k, 7) == 0).then(|| HOT_WORDS.map(|i| word(k, i)))
}

impl FpHot {
    /// `k` with value `v` as a hot line, when it may be one: a plain output or drop (no
    /// rewrite, no VLAN change), words 5 and 7 zero (no IPv6 address), and every field
    /// narrow enough.
    pub fn of(k: &FpFlowKey, v: &FpFlowValue) -> Option<FpHot> {
        let plain = v.act.flags & !crate::act::OUTPUT == 0 && v.act.pop_vlans == 0;
        let narrow = k.mask_id <= 0xffff
            && v.slot <= 0xffff
            && v.act.out_port <= 0xffff
            && v.act.out_dev <= 0xff;
        if !plain || !narrow {
            return None;
        }
        Some(FpHot {
            seq: 0,
            mask_id: k.mask_id as u16,
            slot: v.slot as u16,
            w: hot_words(k)?,
            version: v.act.version,
            out_port: v.act.out_port as u16,
            out_dev: v.act.out_dev as u8,
            flags: HOT_USED | (v.act.flags & crate::act::OUTPUT) as u8,
        })
    }

    fn is_used(&self) -> bool {
        self.flags & HOT_USED != 0
    }

    /// Whether the line holds lookup key `k`.
    fn holds(&self, k: &FpFlowKey) -> bool {
        self.is_used() && u32::from(self.mask_id) == k.mask_id && hot_words(k) == Some(self.w)
    }
}

/// The writer's side of a seqlock (an entry's or a hot line's): `seq` odd, `write` (given
/// that odd value, which it must leave in place), then `seq` even and past it. The program
/// discards what it read under an odd or changed seq.
fn seqlock_write(seq: &AtomicU32, write: impl FnOnce(u32)) {
    let odd = seq.load(Ordering::Relaxed) | 1;
    seq.store(odd, Ordering::Relaxed);
    fence(Ordering::Release);
    write(odd);
    fence(Ordering::Release);
    seq.store(odd.wrapping_add(1), Ordering::Release);
}

/// `struct fp_bucket`: one `fp_index` element.
type Bucket = [AtomicU32; INDEX_WAYS as usize];
const _: () = assert!(size_of::<Bucket>() == 64);

const HASH_MUL: u64 = 0xff51_afd7_ed55_8ccd;
const HASH_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

/// `fp_hash` of flowkey.h: the table's hash of a lookup key (each word times its own odd
/// constant, summed, then mixed).
pub fn table_hash(k: &FpFlowKey) -> u64 {
    let bytes: &[u8] = bytemuck::bytes_of(k);
    let mut h = 0u64;
    for (i, w) in bytes.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        let m = HASH_MUL.wrapping_add((2 * i as u64).wrapping_mul(HASH_STEP));
        h = h.wrapping_add((w ^ (w >> 29)).wrapping_mul(m));
    }
    h ^= h >> 32;
    h = h.wrapping_mul(HASH_MUL);
    h ^ (h >> 29)
}

/// `k`'s bucket in `fp_index`.
pub fn bucket_of(k: &FpFlowKey) -> u32 {
    Place::of(k).bucket
}

/// Where a key goes: its `fp_index` bucket and the signature (`FP_SIG`) its slot
/// carries in the high 16 bits (never 0, so a slot of 0 is empty), from one hash.
#[derive(Clone, Copy)]
struct Place {
    bucket: u32,
    sig: u32,
}

impl Place {
    fn of(k: &FpFlowKey) -> Place {
        let h = table_hash(k);
        Place {
            bucket: h as u32 & (INDEX_BUCKETS - 1),
            sig: (h >> 48) as u32 | 1,
        }
    }
}

/// Bucket locks: writers of different buckets never wait for each other (a lock guards
/// the buckets whose index is equal modulo this).
const WRITE_LOCKS: usize = 1024;

/// One shared mapping of a BPF array.
struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(map: &aya::maps::MapData, name: &str, entries: u32, size: usize) -> io::Result<Self> {
        let len = entries as usize * size;
        let fd = map.fd().as_fd().as_raw_fd();
        // SAFETY: a shared mapping of the map's fd with the array's exact size; the kernel
        // checks the size and that the map is BPF_F_MMAPABLE.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("mmap of {name} (must be an mmapable array of {entries} x {size} B): {e}"),
            ));
        }
        Ok(Mapping {
            base: p.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// The mmaps of `fp_index` and `fp_flows`. Any number of user-space writers (workers
/// installing flows) work at once: each holds the lock of the bucket it writes, for the
/// few hundred cycles of the write, and takes entry indices from a shared free list. The
/// program reads concurrently and discards entries whose `seq` is odd or changes under it.
pub struct FlowTable {
    entries: Mapping,
    index: Mapping,
    hot: Mapping,
    locks: Box<[AtomicBool]>,
    /// Free entry indices, the lowest last (taken first): live entries stay packed at the
    /// start of `fp_flows`.
    free: Mutex<Vec<u32>>,
}

/// A held bucket lock, released when dropped.
struct BucketLock<'a>(&'a AtomicBool);

impl Drop for BucketLock<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

// SAFETY: the mappings are process-wide shared memory owned by this value; writes are
// serialised per bucket by `locks` (an entry belongs to one bucket's slot while in use,
// and to the free list otherwise), and the kernel only reads.
unsafe impl Send for FlowTable {}
unsafe impl Sync for FlowTable {}

/// Why an insert did not happen.
#[derive(Debug, PartialEq, Eq)]
pub enum TableFull {
    /// All slots of the key's bucket name other flows, or one names a flow with the
    /// same signature (a one-in-32,768 chance per flow already there).
    Bucket,
    /// Every entry holds a flow.
    Entries,
}

impl FlowTable {
    /// Map `fp_flows` (an mmapable array of [`TABLE_ENTRIES`] [`FpEntry`]), `fp_index`
    /// (of [`INDEX_BUCKETS`] 64-byte buckets) and `fp_hot` (of [`HOT_LINES`] [`FpHot`]).
    pub fn map(
        flows: &aya::maps::MapData,
        index: &aya::maps::MapData,
        hot: &aya::maps::MapData,
    ) -> io::Result<FlowTable> {
        let table = FlowTable {
            entries: Mapping::new(flows, "fp_flows", TABLE_ENTRIES, size_of::<FpEntry>())?,
            index: Mapping::new(index, "fp_index", INDEX_BUCKETS, size_of::<Bucket>())?,
            hot: Mapping::new(hot, "fp_hot", HOT_LINES, size_of::<FpHot>())?,
            locks: (0..WRITE_LOCKS).map(|_| AtomicBool::new(false)).collect(),
            free: Mutex::new((0..TABLE_ENTRIES).rev().collect()),
        };
        // Every bucket starts empty: every line says so, and a key under any mask costs
        // one line until its bucket holds a flow that is not the line's.
        for b in 0..HOT_LINES {
            let _held = table.lock_bucket(b);
            table.mark_alone(b);
        }
        Ok(table)
    }

    fn entry(&self, i: u32) -> *mut FpEntry {
        assert!(i < TABLE_ENTRIES);
        // SAFETY: i is in bounds of the mapping.
        unsafe { self.entries.base.cast::<FpEntry>().add(i as usize) }
    }

    fn bucket(&self, b: u32) -> &Bucket {
        assert!(b < INDEX_BUCKETS);
        // SAFETY: b is in bounds; the mapping is page-aligned, slots are 4-byte words.
        unsafe { &*self.index.base.cast::<Bucket>().add(b as usize) }
    }

    fn seq(&self, i: u32) -> &AtomicU32 {
        // SAFETY: seq is the first, 4-byte aligned field of a live entry in the mapping.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*self.entry(i)).seq)) }
    }

    fn hot_line(&self, b: u32) -> *mut FpHot {
        assert!(b < HOT_LINES);
        // SAFETY: b is in bounds of the mapping.
        unsafe { self.hot.base.cast::<FpHot>().add(b as usize) }
    }

    fn hot_seq(&self, b: u32) -> &AtomicU32 {
        // SAFETY: seq is the first, 4-byte aligned field of a line in the mapping.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*self.hot_line(b)).seq)) }
    }

    fn read_hot(&self, b: u32) -> FpHot {
        // SAFETY: in bounds; only writers holding bucket b's lock write the line.
        unsafe { std::ptr::read_volatile(self.hot_line(b)) }
    }

    /// Write hot line `b` (bucket `b`'s lock held), seqlock style as an entry.
    fn write_hot(&self, b: u32, mut line: FpHot) {
        seqlock_write(self.hot_seq(b), |odd| {
            // The whole line is written, its seq still odd.
            line.seq = odd;
            // SAFETY: in bounds; the program treats the line as absent while seq is odd.
            unsafe { std::ptr::write_volatile(self.hot_line(b), line) };
        });
    }

    /// `k` leaves its bucket's hot line, if it holds it (bucket `at.bucket`'s lock held):
    /// before its entry is rewritten or removed, so that the line never says other than
    /// the entry.
    fn leave_hot(&self, at: Place, k: &FpFlowKey) {
        if self.read_hot(at.bucket).holds(k) {
            self.write_hot(at.bucket, FpHot::zeroed());
        }
    }

    /// A free hot line goes to the first flow of its bucket that may live there, so the
    /// line serves whenever it can (bucket `at.bucket`'s lock held; after every insert and
    /// removal, once the bucket's slots say what the bucket holds).
    fn fill_hot(&self, at: Place) {
        if self.read_hot(at.bucket).is_used() {
            return;
        }
        let next = self.bucket(at.bucket).iter().find_map(|s| {
            let s = s.load(Ordering::Relaxed);
            let e = (s != 0).then(|| self.read(s & 0xffff))?;
            let key = FpFlowKey { pad: 0, ..e.key }; // the stored key keeps the slot there
            (e.used == 1).then(|| FpHot::of(&key, &e.val))?
        });
        if let Some(line) = next {
            self.write_hot(at.bucket, line);
        }
    }

    /// Set or clear line `b`'s `FP_HOT_ALONE` to say whether bucket `b` holds no flow but
    /// the line's own (bucket `b`'s lock held; after every change once the slots and the
    /// line say what the bucket holds).
    fn mark_alone(&self, b: u32) {
        let mut line = self.read_hot(b);
        let alone = self.holds_only(b, &line);
        if (line.flags & HOT_ALONE != 0) != alone {
            line.flags ^= HOT_ALONE;
            self.write_hot(b, line);
        }
    }

    /// Clear line `b`'s `FP_HOT_ALONE` (bucket `b`'s lock held): before a slot that is
    /// not the line's flow is published, so that the program never takes that flow's key
    /// as absent once it can be found.
    fn clear_alone(&self, b: u32) {
        let mut line = self.read_hot(b);
        if line.flags & HOT_ALONE != 0 {
            line.flags &= !HOT_ALONE;
            self.write_hot(b, line);
        }
    }

    /// Whether every line's `FP_HOT_ALONE` says what its bucket holds (a full scan: for
    /// tests).
    pub fn alone_marks_agree(&self) -> bool {
        (0..HOT_LINES).all(|b| {
            let line = self.read_hot(b);
            (line.flags & HOT_ALONE != 0) == self.holds_only(b, &line)
        })
    }

    /// Whether bucket `b` holds no flow but `line`'s (its hot line's), if it has one: no
    /// slot in use, or one and a used line (the line is a copy of one of its flows).
    fn holds_only(&self, b: u32, line: &FpHot) -> bool {
        let n = self
            .bucket(b)
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) != 0)
            .count();
        n == 0 || (n == 1 && line.is_used())
    }

    /// Whether `k` is served from its bucket's hot line (as well as from its entry).
    pub fn in_hot_line(&self, k: &FpFlowKey) -> bool {
        self.read_hot(Place::of(k).bucket).holds(k)
    }

    /// Flows served from hot lines (a full scan: for tests and statistics).
    pub fn hot_len(&self) -> usize {
        (0..HOT_LINES)
            .filter(|&b| self.read_hot(b).is_used())
            .count()
    }

    /// Read entry `i`. Only called with its bucket's lock held (or by tests and scans,
    /// which tolerate a torn entry): the kernel never writes entries.
    fn read(&self, i: u32) -> FpEntry {
        // SAFETY: in bounds; writers of this bucket are excluded by its lock.
        unsafe { std::ptr::read_volatile(self.entry(i)) }
    }

    /// Take the lock of bucket `b` (spinning: it is held for one entry write).
    fn lock_bucket(&self, b: u32) -> BucketLock<'_> {
        let l = &self.locks[b as usize % WRITE_LOCKS];
        while l
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        BucketLock(l)
    }

    /// Write entry `i` as (used, key, val), seqlock style (its bucket lock held). The
    /// stored key carries the value's stats slot in its `pad` (the program compares only
    /// the low half of the key's first word), so that a hit needs nothing of the entry
    /// past its first 96 bytes: two cache lines, not three.
    fn write(&self, i: u32, used: bool, mut key: FpFlowKey, val: FpFlowValue) {
        key.pad = val.slot;
        let e = self.entry(i);
        seqlock_write(self.seq(i), |_| {
            // SAFETY: in bounds; fields after seq, written while seq is odd.
            unsafe {
                std::ptr::write_volatile(std::ptr::addr_of_mut!((*e).key), key);
                std::ptr::write_volatile(std::ptr::addr_of_mut!((*e).val), val);
                std::ptr::write_volatile(std::ptr::addr_of_mut!((*e).used), used as u32);
            }
        });
    }

    /// The slot of `at`'s bucket with `at`'s signature, as (way, slot value): as in the
    /// program, the first is the only candidate (a bucket never holds two).
    fn candidate(&self, at: Place) -> Option<(usize, u32)> {
        self.bucket(at.bucket)
            .iter()
            .map(|s| s.load(Ordering::Acquire))
            .enumerate()
            .find(|&(_, s)| s >> 16 == at.sig)
    }

    /// Whether entry `i` holds `k`.
    fn holds(&self, i: u32, k: &FpFlowKey) -> bool {
        let e = self.read(i);
        e.used == 1 && e.key.mask_id == k.mask_id && e.key.key == k.key
    }

    /// Where `k` is: its slot in its bucket and its entry index.
    fn locate(&self, k: &FpFlowKey, at: Place) -> Option<(usize, u32)> {
        let (way, s) = self.candidate(at)?;
        self.holds(s & 0xffff, k).then_some((way, s & 0xffff))
    }

    /// The entry index holding `k`, if it is there.
    pub fn find(&self, k: &FpFlowKey) -> Option<u32> {
        self.locate(k, Place::of(k)).map(|(_, i)| i)
    }

    /// Insert or replace `k`'s entry.
    pub fn insert(&self, k: FpFlowKey, v: FpFlowValue) -> Result<u32, TableFull> {
        let at = Place::of(&k);
        let _held = self.lock_bucket(at.bucket);
        if let Some((_, s)) = self.candidate(at) {
            let i = s & 0xffff;
            if !self.holds(i, &k) {
                // One slot per signature in a bucket: the program takes the first.
                return Err(TableFull::Bucket);
            }
            self.leave_hot(at, &k);
            self.write(i, true, k, v);
            self.fill_hot(at);
            self.mark_alone(at.bucket);
            return Ok(i);
        }
        let bucket = self.bucket(at.bucket);
        let way = bucket
            .iter()
            .position(|s| s.load(Ordering::Relaxed) == 0)
            .ok_or(TableFull::Bucket)?;
        let i = self
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .ok_or(TableFull::Entries)?;
        self.write(i, true, k, v);
        // Published only once the entry is complete, and once the line no longer says
        // the bucket holds nothing else.
        self.clear_alone(at.bucket);
        bucket[way].store(at.sig << 16 | i, Ordering::Release);
        self.fill_hot(at);
        self.mark_alone(at.bucket);
        Ok(i)
    }

    /// Remove `k`'s entry; false when it was not there.
    pub fn remove(&self, k: &FpFlowKey) -> bool {
        let at = Place::of(k);
        let _held = self.lock_bucket(at.bucket);
        let Some((way, i)) = self.locate(k, at) else {
            return false;
        };
        // Out of the hot line and unpublished first: a reader that still got the line or
        // the slot finds its seq changed, or the key no longer k's.
        self.leave_hot(at, k);
        self.bucket(at.bucket)[way].store(0, Ordering::Release);
        self.write(i, false, FpFlowKey::zeroed(), FpFlowValue::zeroed());
        self.fill_hot(at);
        self.mark_alone(at.bucket);
        self.free.lock().unwrap_or_else(|p| p.into_inner()).push(i);
        true
    }

    /// Mark entry `i` as being written (`seq` odd) or done, without changing it: what
    /// the program sees while a writer is in the middle of the entry; the entry's hot
    /// line, if it has one, alike. For tests.
    pub fn hold(&mut self, i: u32, held: bool) {
        let flip = |seq: &AtomicU32| {
            let s = seq.load(Ordering::Relaxed);
            let next = match (held, s & 1 == 1) {
                (true, false) | (false, true) => s.wrapping_add(1),
                _ => s,
            };
            seq.store(next, Ordering::Release);
        };
        let key = FpFlowKey {
            pad: 0,
            ..self.read(i).key
        };
        let b = Place::of(&key).bucket;
        if self.read_hot(b).holds(&key) {
            flip(self.hot_seq(b));
        }
        flip(self.seq(i));
    }

    /// Entries in use (a full scan: for tests and statistics).
    pub fn len(&self) -> usize {
        (0..TABLE_ENTRIES)
            .filter(|&i| self.read(i).used == 1)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_spreads_keys_that_differ_in_one_byte_over_buckets() {
        let mut buckets = std::collections::HashSet::new();
        for i in 0..4096u32 {
            let mut k = FpFlowKey::zeroed();
            k.key[32..36].copy_from_slice(&i.to_be_bytes()); // ip_src
            buckets.insert(bucket_of(&k));
        }
        // 4,096 keys into 16,384 buckets: a good hash gives ~3,620 distinct ones.
        assert!(buckets.len() > 3_450, "{} buckets", buckets.len());
    }

    #[test]
    fn the_mask_id_is_part_of_the_hash() {
        let a = FpFlowKey::zeroed();
        let b = FpFlowKey { mask_id: 1, ..a };
        assert_ne!(table_hash(&a), table_hash(&b));
    }

    #[test]
    fn only_plain_narrow_flows_without_address_tails_may_live_in_a_hot_line() {
        let mut k = FpFlowKey::zeroed();
        k.key[32..36].copy_from_slice(&[10, 0, 0, 1]); // ip_src, word 4
        k.key[28..30].copy_from_slice(&[0, 80]); // tp_src, word 3
        let mut v = FpFlowValue::zeroed();
        v.act.flags = crate::act::OUTPUT;
        v.act.out_dev = 3;
        v.slot = 9;
        let line = FpHot::of(&k, &v).expect("a plain IPv4 output");
        assert_eq!((line.slot, line.out_dev, line.flags), (9, 3, HOT_USED | 1));
        assert!(line.holds(&k));
        let mut ports = k;
        ports.key[29] = 81;
        assert!(!line.holds(&ports), "word 3 is compared");
        assert!(
            !line.holds(&FpFlowKey { mask_id: 1, ..k }),
            "so is the mask id"
        );
        let no = |k: &FpFlowKey, v: &FpFlowValue| FpHot::of(k, v).is_none();
        let mut tail = k;
        tail.key[40] = 1; // ip_src bytes 8..16: word 5
        assert!(no(&tail, &v) && !line.holds(&tail));
        let mut rewrite = v;
        rewrite.act.flags |= crate::act::SET_ETH_DST;
        assert!(no(&k, &rewrite));
        let mut pop = v;
        pop.act.pop_vlans = 1;
        assert!(no(&k, &pop));
        assert!(no(&k, &FpFlowValue { slot: 65_536, ..v }));
        let mut wide = v;
        wide.act.out_dev = 256;
        assert!(no(&k, &wide));
        let mut drop = v;
        drop.act.flags = 0;
        assert_eq!(FpHot::of(&k, &drop).unwrap().flags, HOT_USED, "a drop");
    }
}
