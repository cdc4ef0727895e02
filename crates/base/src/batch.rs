//! `PacketBatch`: a worker's receive buffers, [`BATCH`] frames with headroom, the unit every
//! stage works on; and [`BATCH`], the one batch capacity of the whole project.

use crate::packet::{Packet, HEADROOM};

/// Frames per batch: what a port delivers per `recv`, what the datapath classifies per
/// pass (it splits longer slices into runs of this size), what a generator hands out.
pub const BATCH: usize = 32;
/// Bytes of buffer per frame, headroom included.
pub const FRAME: usize = 2048;
/// Longest frame a [`PacketBatch`] holds; ports drop (and count) longer ones.
pub const MAX_FRAME: usize = FRAME - HEADROOM;
/// Distance between frames in the buffer: one cache line more than [`FRAME`], so the 32
/// frames' headers fall in different cache sets (at a stride of exactly 2 KiB they would
/// all compete for the same two sets of a 64-set L1 and evict each other mid-batch).
const STRIDE: usize = FRAME + 64;

/// A worker's receive buffers: [`BATCH`] frames of [`FRAME`] bytes, each starting after
/// [`HEADROOM`] bytes so VLAN pushes and encapsulation do not move the payload.
pub struct PacketBatch {
    buf: Box<[u8]>,
    lens: [u16; BATCH],
    n: usize,
    /// Frames this batch takes at most until the next `clear` (normally [`BATCH`]).
    cap: usize,
}

impl Default for PacketBatch {
    fn default() -> Self {
        PacketBatch::new()
    }
}

impl PacketBatch {
    pub fn new() -> PacketBatch {
        PacketBatch {
            buf: vec![0u8; BATCH * STRIDE].into_boxed_slice(),
            lens: [0; BATCH],
            n: 0,
            cap: BATCH,
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Frames that can still be appended.
    pub fn room(&self) -> usize {
        self.cap - self.n
    }

    /// Empty the batch (and lift any [`PacketBatch::limit`]).
    pub fn clear(&mut self) {
        self.n = 0;
        self.cap = BATCH;
    }

    /// Take at most `frames` frames in all until the next `clear` (a measurement that
    /// must receive an exact number of packets).
    pub fn limit(&mut self, frames: usize) {
        self.cap = frames.clamp(self.n, BATCH);
    }

    /// Copy `frame` in as the next packet. Returns false (nothing appended) when the batch
    /// is full or the frame is longer than [`MAX_FRAME`]; the port counts that as a drop.
    #[inline]
    pub fn push(&mut self, frame: &[u8]) -> bool {
        if self.n >= self.cap || frame.len() > MAX_FRAME {
            return false;
        }
        let at = self.n * STRIDE + HEADROOM;
        self.buf[at..at + frame.len()].copy_from_slice(frame);
        self.lens[self.n] = frame.len() as u16;
        self.n += 1;
        true
    }

    /// Append a frame of `len` bytes from `lines`, which holds it rounded up to whole
    /// 64-byte lines (a source with tailroom): copied line by line, which compiles to
    /// plain vector moves where a copy of `len` bytes would call `memcpy`. Returns the
    /// frame's bytes (to stamp in place), or `None` (nothing appended) when the batch is
    /// full or the frame does not fit a slot.
    #[inline(always)]
    pub fn push_lines(&mut self, lines: &[u8], len: usize) -> Option<&mut [u8]> {
        let n = lines.len();
        if self.n >= self.cap || n > MAX_FRAME || len > n || n % 64 != 0 {
            return None;
        }
        let at = self.n * STRIDE + HEADROOM;
        let dst = &mut self.buf[at..at + n];
        for (d, s) in dst.chunks_exact_mut(64).zip(lines.chunks_exact(64)) {
            d.copy_from_slice(s);
        }
        self.lens[self.n] = len as u16;
        self.n += 1;
        Some(&mut dst[..len])
    }

    /// The writable area of the next slot ([`MAX_FRAME`] bytes), for ports that read
    /// straight into it (e.g. `read(2)` on a TAP); follow with [`PacketBatch::commit`].
    /// `None` when the batch is full.
    pub fn next_slot(&mut self) -> Option<&mut [u8]> {
        if self.n >= self.cap {
            return None;
        }
        let at = self.n * STRIDE + HEADROOM;
        Some(&mut self.buf[at..at + MAX_FRAME])
    }

    /// Make the first `len` bytes written through [`PacketBatch::next_slot`] the next packet.
    ///
    /// # Panics
    /// If the batch is full or `len` exceeds [`MAX_FRAME`] (a bug in the port).
    pub fn commit(&mut self, len: usize) {
        assert!(
            self.n < self.cap && len <= MAX_FRAME,
            "PacketBatch::commit out of range"
        );
        self.lens[self.n] = len as u16;
        self.n += 1;
    }

    /// Frame `i` as received.
    pub fn frame(&self, i: usize) -> &[u8] {
        assert!(i < self.n);
        let at = i * STRIDE + HEADROOM;
        &self.buf[at..at + self.lens[i] as usize]
    }

    /// Mutable bytes of frame `i` (fault injection corrupts through this).
    pub fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.n);
        let at = i * STRIDE + HEADROOM;
        let len = self.lens[i] as usize;
        &mut self.buf[at..at + len]
    }

    /// Remove frame `i`, keeping the order of the others.
    pub fn remove(&mut self, i: usize) {
        assert!(i < self.n);
        for j in i..self.n - 1 {
            let (a, b) = self.buf.split_at_mut((j + 1) * STRIDE);
            let len = self.lens[j + 1] as usize;
            a[j * STRIDE + HEADROOM..j * STRIDE + HEADROOM + len]
                .copy_from_slice(&b[HEADROOM..HEADROOM + len]);
            self.lens[j] = self.lens[j + 1];
        }
        self.n -= 1;
    }

    /// Run `f` over the batch as datapath packets (views into these buffers, no copy and
    /// no allocation).
    #[inline]
    pub fn with_packets<R>(&mut self, f: impl FnOnce(&mut [Packet<'_>]) -> R) -> R {
        let mut pkts: smallvec::SmallVec<[Packet<'_>; BATCH]> = smallvec::SmallVec::new();
        for (chunk, &len) in self.buf.chunks_exact_mut(STRIDE).zip(&self.lens[..self.n]) {
            pkts.push(Packet::new(&mut chunk[..FRAME], HEADROOM, len as usize));
        }
        f(&mut pkts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HEADROOM;

    #[test]
    fn batch_push_remove_and_views() {
        let mut b = PacketBatch::new();
        for i in 0..BATCH {
            assert!(b.push(&[i as u8; 60]));
        }
        assert!(!b.push(&[0; 60]), "a full batch refuses");
        assert_eq!(b.room(), 0);
        b.remove(3);
        assert_eq!(b.len(), BATCH - 1);
        assert_eq!(b.frame(2)[0], 2);
        assert_eq!(b.frame(3)[0], 4);
        let lens = b.with_packets(|p| {
            p.iter()
                .map(|p| (p.len(), p.headroom()))
                .collect::<Vec<_>>()
        });
        assert_eq!(lens.len(), BATCH - 1);
        assert!(lens.iter().all(|&(l, h)| l == 60 && h == HEADROOM));
        b.clear();
        assert!(!b.push(&vec![0; MAX_FRAME + 1]), "too long is refused");
        assert!(b.push(&vec![7; MAX_FRAME]));
        let s = b.next_slot().unwrap();
        s[..3].copy_from_slice(&[1, 2, 3]);
        b.commit(3);
        assert_eq!(b.frame(1), &[1, 2, 3]);
    }
}
