//! Memory for the datapath's big tables: faulted in when a table is made, not by the
//! packets that first touch it, and on 2 MB pages where the kernel gives them.
//!
//! A fresh table from the allocator is only address space: each 4 KB page is faulted in
//! by the first write to it, inside whatever batch makes that write. On this project's VM
//! a fault costs ~10,000 cycles, and a new-flow flood on a freshly started switch makes
//! thousands of them (the megaflow arena's growth alone stalled one batch for 9 ms).
//! DPDK sidesteps this with pinned hugepages; here the tables ask for transparent huge
//! pages (`MADV_HUGEPAGE`, honoured when the kernel's THP mode is `always` or `madvise`),
//! which also spares the random lookups of an 8 MB table most of their TLB misses, and
//! are written once when made. Hand-written: it is a few system calls around the global
//! allocator, and the crates that map memory do not align it to the huge page.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The huge page size on x86-64 and arm64 with 4 KB base pages.
pub const HUGE_PAGE: usize = 2 << 20;
/// The base page size assumed when faulting memory in (a smaller stride would only touch
/// a page twice).
pub const BASE_PAGE: usize = 4096;

/// Tables from this size up take whole huge pages (the size rounded up to one). Smaller
/// ones are ordinary allocations: tried from 512 KB up, the megaflow index that doubles to
/// 1 MB under a new-flow flood stalled its batch for ~8 M cycles faulting in one huge page,
/// against ~3 M for 256 small pages (on the project's VM; why, I did not find).
pub const HUGE_TABLE: usize = HUGE_PAGE;

/// Ask the kernel to back the huge-page-aligned part of `[ptr, ptr + len)` with huge
/// pages. Returns whether it took the advice (false: no aligned 2 MB inside the range,
/// THP off, or not Linux). Only advice: the memory is usable either way.
pub fn advise_huge_pages(ptr: *const u8, len: usize) -> bool {
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize).saturating_add(len) / HUGE_PAGE * HUGE_PAGE;
    if end <= start {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: madvise with MADV_HUGEPAGE changes no contents; the range lies inside
        // memory the caller owns.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Fault in `[ptr, ptr + len)` now by writing a zero byte into each page.
///
/// # Safety
/// The range must be allocated, writable memory the caller owns whose bytes hold no value
/// yet (a `Vec`'s spare capacity) or are already zero there.
pub unsafe fn fault_in(ptr: *mut u8, len: usize) {
    let mut off = 0;
    while off < len {
        // SAFETY: `off < len`, inside the caller's range (see the function's contract).
        // Volatile, so the store of a byte nobody reads is not left out.
        unsafe { ptr.add(off).write_volatile(0) };
        off += BASE_PAGE - (ptr as usize + off) % BASE_PAGE;
    }
}

/// A fixed-length slice of `T`, written with a fill value when made (so every page is in
/// memory before the first packet); from [`HUGE_TABLE`] bytes up in whole, aligned huge
/// pages, with the kernel asked to back them so.
pub struct TableMemory<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    huge: bool,
}

// SAFETY: a TableMemory owns its elements like a Box<[T]> does.
unsafe impl<T: Copy + Send> Send for TableMemory<T> {}
// SAFETY: as above; shared access only hands out &[T].
unsafe impl<T: Copy + Sync> Sync for TableMemory<T> {}

impl<T: Copy> TableMemory<T> {
    /// `len` copies of `fill`.
    ///
    /// # Panics
    /// If the table's size overflows `isize`; aborts if the allocator has no memory, as a
    /// `Vec` does.
    pub fn new(len: usize, fill: T) -> TableMemory<T> {
        TableBuilder::new(len, fill).finish()
    }

    /// Room for `len` Ts with nothing written yet, advised onto huge pages (before the
    /// first write, so that write faults huge pages in) when the table is big enough.
    /// Only [`TableBuilder`] holds one of these, and hands it out once all is written.
    fn unwritten(len: usize) -> TableMemory<T> {
        let layout = Self::layout(len);
        if layout.size() == 0 {
            return TableMemory {
                ptr: NonNull::dangling(),
                len,
                huge: false,
            };
        }
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else {
            alloc::handle_alloc_error(layout)
        };
        // (The rounding's tail past `len` is never written: it comes with the huge page,
        // or without one is never faulted in.)
        let huge = layout.align() == HUGE_PAGE && advise_huge_pages(raw, layout.size());
        TableMemory { ptr, len, huge }
    }

    /// A table of at least [`HUGE_TABLE`] bytes takes whole huge pages, aligned; a smaller
    /// one is an ordinary allocation.
    fn layout(len: usize) -> Layout {
        let size = std::mem::size_of::<T>()
            .checked_mul(len)
            .expect("table size overflows");
        let layout = if size >= HUGE_TABLE {
            Layout::from_size_align(size.next_multiple_of(HUGE_PAGE), HUGE_PAGE)
        } else {
            Layout::from_size_align(size, std::mem::align_of::<T>())
        };
        layout.expect("table size overflows")
    }

    /// Whether the kernel took the advice to back this table with huge pages.
    pub fn huge_pages_advised(&self) -> bool {
        self.huge
    }
}

impl<T: Copy> Deref for TableMemory<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: ptr holds len initialised Ts (or is dangling with a zero size).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> DerefMut for TableMemory<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref, and &mut self is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for TableMemory<T> {
    fn drop(&mut self) {
        let layout = Self::layout(self.len);
        if layout.size() != 0 {
            // SAFETY: allocated in `unwritten` with this same layout (T: Copy needs no drop).
            unsafe { alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for TableMemory<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableMemory")
            .field("len", &self.len)
            .field("huge", &self.huge)
            .finish()
    }
}

/// A [`TableMemory`] made a part at a time: allocated when the builder is made, written
/// (and so faulted in) a few elements at a time by [`TableBuilder::write`], spread over
/// whatever work comes before the table is needed, and handed over by
/// [`TableBuilder::finish`], which writes what is left. For a table that will be needed
/// later (the next size of an index that is filling up) without its page faults landing
/// all in the one batch that needs it.
pub struct TableBuilder<T: Copy> {
    /// Elements `..written` hold `fill`; the rest hold nothing yet, so this is never read
    /// (or dereferenced) before [`TableBuilder::finish`]. Dropped unfinished, it frees.
    memory: TableMemory<T>,
    written: usize,
    fill: T,
}

impl<T: Copy> TableBuilder<T> {
    /// A table of `len` copies of `fill`, none written yet.
    ///
    /// # Panics
    /// As [`TableMemory::new`].
    pub fn new(len: usize, fill: T) -> TableBuilder<T> {
        TableBuilder {
            memory: TableMemory::unwritten(len),
            written: 0,
            fill,
        }
    }

    /// The length of the table it makes.
    pub fn len(&self) -> usize {
        self.memory.len
    }

    pub fn is_empty(&self) -> bool {
        self.memory.len == 0
    }

    /// Elements still to write.
    pub fn remaining(&self) -> usize {
        self.memory.len - self.written
    }

    /// Write up to `n` more elements.
    pub fn write(&mut self, n: usize) {
        let end = self.written.saturating_add(n).min(self.memory.len);
        for i in self.written..end {
            // SAFETY: i < len, inside the allocation of len Ts (written through the
            // pointer: the memory is not yet a slice of initialised Ts).
            unsafe { self.memory.ptr.as_ptr().add(i).write(self.fill) };
        }
        self.written = end;
    }

    /// The table, with what was not written yet written now.
    pub fn finish(mut self) -> TableMemory<T> {
        self.write(self.memory.len);
        self.memory
    }
}

impl<T: Copy> std::fmt::Debug for TableBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableBuilder")
            .field("len", &self.memory.len)
            .field("written", &self.written)
            .finish()
    }
}

/// Minor page faults the calling thread has taken so far (`getrusage(RUSAGE_THREAD)`: a
/// fault counts to the thread whose access took it, so other threads' faults stay out; the
/// whole process's where that is not available; 0 if neither is).
pub fn minor_page_faults() -> u64 {
    #[cfg(target_os = "linux")]
    let who = libc::RUSAGE_THREAD;
    #[cfg(not(target_os = "linux"))]
    let who = libc::RUSAGE_SELF;
    // SAFETY: getrusage fills the zeroed struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut u) != 0 {
            return 0;
        }
        u.ru_minflt.max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minor_faults() -> i64 {
        minor_page_faults() as i64
    }

    #[test]
    fn holds_its_fill_and_writes() {
        let mut t = TableMemory::new(1000, 7u32);
        assert!(t.iter().all(|&x| x == 7));
        t[999] = 3;
        assert_eq!(t[999], 3);
        assert_eq!(t.iter().filter(|&&x| x == 7).count(), 999);
        assert!(TableMemory::new(0, 1u8).is_empty());
        assert!(!TableMemory::new(10, 0u64).huge_pages_advised());
    }

    #[test]
    fn a_big_table_is_aligned_to_the_huge_page() {
        for bytes in [HUGE_TABLE, HUGE_PAGE * 3 + 64] {
            let t = TableMemory::new(bytes / 8, 0u64);
            assert_eq!(t.as_ptr() as usize % HUGE_PAGE, 0, "{bytes} bytes");
        }
        let small = TableMemory::new(HUGE_TABLE / 8 - 1, 0u64);
        assert!(!small.huge_pages_advised());
    }

    /// The point of the type: once made, writing the whole table faults nothing in. An
    /// 8 MB table written page by page through a `Vec` faults ~2,048 times with 4 KB pages.
    /// (The count is this thread's, so the tests running beside it stay out; the slack is
    /// for the allocator's and the test harness's own pages.)
    #[test]
    fn writing_a_made_table_does_not_fault() {
        let mut t = TableMemory::new(8 << 20, 0u8);
        let before = minor_faults();
        for i in (0..t.len()).step_by(BASE_PAGE) {
            t[i] = 1;
        }
        let faults = minor_faults() - before;
        assert!(
            faults < 256,
            "{faults} page faults writing a made 8 MB table"
        );
    }

    /// What a builder finishes holds the fill everywhere, whether written ahead or at the
    /// end, and writing the finished table faults nothing more. (How many faults the
    /// writes ahead take is not asserted: the allocator may hand back pages it already
    /// had.)
    #[test]
    fn a_builder_finishes_whole_and_faulted_in() {
        let mut b = TableBuilder::new(256 * BASE_PAGE / 8, 5u64);
        assert_eq!(b.remaining(), b.len());
        b.write(b.len() / 2);
        assert_eq!(b.remaining(), b.len() - b.len() / 2);
        b.write(usize::MAX);
        assert_eq!(b.remaining(), 0);
        let mut b = TableBuilder::new(256 * BASE_PAGE / 8, 5u64);
        b.write(b.len() / 2 + 3);
        let mut t = b.finish();
        assert!(t.iter().all(|&x| x == 5));
        let before = minor_faults();
        for i in (0..t.len()).step_by(BASE_PAGE / 8) {
            t[i] = 1;
        }
        let after = minor_faults() - before;
        assert!(after < 16, "{after} faults writing a finished table");
        // Dropped unfinished, a builder frees what it allocated (run under Miri or a leak
        // checker to see it; here it must not crash).
        let mut unfinished = TableBuilder::new(1000, 1u32);
        unfinished.write(10);
        drop(unfinished);
        assert_eq!(TableBuilder::new(0, 1u8).finish().len(), 0);
    }

    #[test]
    fn fault_in_touches_every_page_of_a_range() {
        let mut v: Vec<u8> = Vec::with_capacity(4 << 20);
        let spare = v.spare_capacity_mut();
        // SAFETY: the spare capacity is owned, writable and holds no value.
        unsafe { fault_in(spare.as_mut_ptr().cast(), spare.len()) };
        let before = minor_faults();
        v.resize(4 << 20, 1);
        let faults = minor_faults() - before;
        assert!(
            faults < 128,
            "{faults} page faults filling a faulted-in 4 MB Vec"
        );
    }
}
