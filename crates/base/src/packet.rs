//! `Packet`: a mutable view of one frame inside a port's buffer, with headroom.

/// Headroom generated and port buffers leave in front of a frame, so that pushing a VLAN
/// tag (or, later, an encapsulation header) does not move the payload.
pub const HEADROOM: usize = 128;

/// One frame: `buf[start..start + len]` is the packet; bytes before `start` are headroom
/// and bytes after the end are tailroom. The view is borrowed from whoever owns the memory
/// (a generator's frame pool, an AF_XDP UMEM, a test's `Vec<u8>`), so no copy is made.
#[derive(Debug)]
pub struct Packet<'a> {
    buf: &'a mut [u8],
    start: u32,
    len: u32,
    /// Set when an action wrote to the bytes or moved the frame boundaries, so that a
    /// source that replays frames knows which ones to restore.
    pub modified: bool,
}

impl<'a> Packet<'a> {
    /// A packet occupying `buf[start..start + len]`.
    ///
    /// # Panics
    /// If the range does not fit in `buf` (a programming error of the port, not bad input).
    pub fn new(buf: &'a mut [u8], start: usize, len: usize) -> Packet<'a> {
        assert!(start + len <= buf.len(), "packet range outside its buffer");
        assert!(buf.len() <= u32::MAX as usize, "packet buffer beyond 4 GiB");
        Packet {
            buf,
            start: start as u32,
            len: len as u32,
            modified: false,
        }
    }

    /// A packet that fills all of `buf` (no headroom).
    pub fn whole(buf: &'a mut [u8]) -> Packet<'a> {
        let len = buf.len();
        Packet::new(buf, 0, len)
    }

    // `data` and `data_mut` run several times per packet on the hit path, where the
    // range check was a dozen instructions; the range is checked once, in `new`.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        // SAFETY: `start + len <= buf.len()` holds from `new` on: `push_front` keeps the
        // sum or grows `len` within the tailroom, `pull_front` keeps the sum, and nothing
        // else writes `start`, `len` or `buf` (private fields).
        unsafe {
            self.buf
                .get_unchecked(self.start as usize..(self.start + self.len) as usize)
        }
    }

    /// Mutable bytes; marks the packet modified.
    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.modified = true;
        // SAFETY: as in `data`.
        unsafe {
            self.buf
                .get_unchecked_mut(self.start as usize..(self.start + self.len) as usize)
        }
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn headroom(&self) -> usize {
        self.start as usize
    }

    pub fn tailroom(&self) -> usize {
        self.buf.len() - (self.start + self.len) as usize
    }

    /// Grow the packet by `n` bytes at the front (into the headroom, or by moving the
    /// frame into the tailroom when there is no headroom). Returns false if neither has room.
    pub fn push_front(&mut self, n: usize) -> bool {
        if self.headroom() >= n {
            self.start -= n as u32;
        } else if self.tailroom() >= n {
            let (s, l) = (self.start as usize, self.len as usize);
            self.buf.copy_within(s..s + l, s + n);
        } else {
            return false;
        }
        self.len += n as u32;
        self.modified = true;
        true
    }

    /// Remove `n` bytes from the front (decapsulation, tag pop). Returns false if the
    /// packet is shorter than `n`.
    pub fn pull_front(&mut self, n: usize) -> bool {
        if n > self.len as usize {
            return false;
        }
        self.start += n as u32;
        self.len -= n as u32;
        self.modified = true;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_uses_headroom_then_tailroom() {
        let mut buf = vec![0u8; 20];
        buf[4..8].copy_from_slice(&[1, 2, 3, 4]);
        let mut p = Packet::new(&mut buf, 4, 4);
        assert!(p.push_front(4));
        assert_eq!(p.headroom(), 0);
        assert_eq!(&p.data()[4..], &[1, 2, 3, 4]);
        assert!(p.push_front(2));
        assert_eq!(&p.data()[6..], &[1, 2, 3, 4]);
        assert_eq!(p.len(), 10);
        assert!(!p.push_front(11));
        assert!(p.pull_front(6));
        assert_eq!(p.data(), &[1, 2, 3, 4]);
        assert!(!p.pull_front(5));
    }
}
