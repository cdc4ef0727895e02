//! Recirculated passes: after a batch's actions, the packets its `ct(table=)` actions
//! queued go through the lookup stages again (EMC → SMC → megaflow → upcall → execute),
//! as batches, pass after pass until none is queued; and the tracker's expiry between
//! batches.

use super::execute::{Copies, Frames, Gathered};
use super::Datapath;
use crate::recirc::{RecircPacket, Src};
use crate::sink::OutputSink;
use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_base::packet::HEADROOM;
use flowpath_base::BATCH;
use flowpath_packet::Packet;
use smallvec::SmallVec;

/// The bits of a batch of `n` packets.
fn all(n: usize) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// Connections the tracker may expire in one step.
pub const CT_EXPIRE_BUDGET: usize = 256;

impl Datapath {
    /// Run the passes of what the batch `pkts` (received on `in_port`) recirculated. A pass
    /// of only moved packets (frames still in `pkts`, keys in the scratch arrays at their
    /// index: the common case) runs as the batch again for their bits; a pass with copies
    /// forks made runs its moved packets gathered and the copies as batches of their own.
    /// What a pass recirculates is the next one.
    #[inline(never)]
    pub(super) fn recirculate<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkts: &mut [Packet<'_>],
        sink: &mut S,
    ) {
        // Two sets of queue and copy buffers, swapped each pass: this pass's, and the next
        // pass's (both recycled, kept in the state between batches).
        let mut cur = std::mem::take(&mut self.recirc.cur);
        let mut bufs = std::mem::take(&mut self.recirc.cur_bufs);
        loop {
            let rc = &mut self.recirc;
            let moved = std::mem::take(&mut rc.moved);
            if moved == 0 && rc.next.is_empty() {
                break;
            }
            rc.pass += 1;
            std::mem::swap(&mut cur, &mut rc.next);
            std::mem::swap(&mut bufs, &mut rc.next_bufs);
            rc.next_used = 0;
            self.stats.recirc_passes += 1;
            self.scratch.recirc = true;
            if cur.is_empty() {
                // Only packets that stayed in place: the batch again, for their bits.
                self.recirc.in_place = true;
                self.pass_in_place(in_port, pkts, moved, sink);
            } else {
                // Copies too: the packets in place are queued (keys copied out of the
                // scratch the copies' batches will use), and the pass runs gathered.
                self.recirc.in_place = false;
                let mut m = moved;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    cur.push(RecircPacket {
                        src: Src::Batch(i as u8),
                        key: self.scratch.keys[i],
                        meta: self.scratch.metas[i],
                    });
                }
                self.pass_moved(in_port, pkts, &cur, sink);
                self.pass_copies(in_port, &cur, &mut bufs, sink);
            }
            self.scratch.recirc = false;
            cur.clear();
        }
        // Moved packets whose second pass ran gathered are not remembered.
        self.scratch.memo_seeded = 0;
        self.recirc.cur = cur;
        self.recirc.cur_bufs = bufs;
        self.recirc.in_place = true;
        self.recirc.pass = 1;
    }

    /// The pass's packets moved from the received batch, [`BATCH`] at a time.
    fn pass_moved<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkts: &mut [Packet<'_>],
        cur: &[RecircPacket],
        sink: &mut S,
    ) {
        let mut map = [0u8; BATCH];
        let mut n = 0;
        for rp in cur {
            let Src::Batch(i) = rp.src else {
                continue;
            };
            if i as usize >= pkts.len() {
                continue;
            }
            self.load(n, rp);
            map[n] = i;
            n += 1;
            if n == BATCH {
                self.pass_stages(in_port, &mut Gathered { pkts, map }, all(n), n, sink);
                n = 0;
            }
        }
        if n > 0 {
            self.pass_stages(in_port, &mut Gathered { pkts, map }, all(n), n, sink);
        }
    }

    /// The pass's copies (frames in `bufs`, in queue order), [`BATCH`] at a time.
    fn pass_copies<S: OutputSink>(
        &mut self,
        in_port: u32,
        cur: &[RecircPacket],
        bufs: &mut [Vec<u8>],
        sink: &mut S,
    ) {
        let mut frames: SmallVec<[Packet<'_>; BATCH]> = SmallVec::new();
        let mut bufs = bufs.iter_mut().enumerate();
        for rp in cur {
            let Src::Copy { buf, len } = rp.src else {
                continue;
            };
            // Copies are queued in the order of their buffers.
            let Some(b) = bufs.find_map(|(j, b)| (j == buf as usize).then_some(b)) else {
                continue;
            };
            self.load(frames.len(), rp);
            frames.push(Packet::new(b, HEADROOM, len as usize));
            if frames.len() == BATCH {
                let n = frames.len();
                let mut set = Copies(std::mem::take(&mut frames));
                self.pass_stages(in_port, &mut set, all(n), n, sink);
            }
        }
        if !frames.is_empty() {
            let n = frames.len();
            self.pass_stages(in_port, &mut Copies(frames), all(n), n, sink);
        }
    }

    /// Put queued packet `rp` at index `j` of the pass's scratch: its key, offsets and
    /// hash (the EMC's and SMC's index; a recirculated key is never narrow).
    #[inline(always)]
    fn load(&mut self, j: usize, rp: &RecircPacket) {
        let sc = &mut *self.scratch;
        sc.keys[j] = rp.key;
        sc.metas[j] = rp.meta;
        let h = rp.key.hash(self.emc_seed);
        sc.hashes[j] = h;
        if self.cfg.emc {
            self.emc.prefetch(h, false);
        }
    }

    /// The packets of the received batch `pkts` that stayed in place (bits of `moved`):
    /// their keys' hashes, then the lookup stages and execute.
    fn pass_in_place<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkts: &mut [Packet<'_>],
        moved: u32,
        sink: &mut S,
    ) {
        let sc = &mut *self.scratch;
        let mut m = moved;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let h = sc.keys[i].hash(self.emc_seed);
            sc.hashes[i] = h;
            if self.cfg.emc {
                self.emc.prefetch(h, false);
            }
        }
        self.pass_stages(in_port, pkts, moved, pkts.len(), sink);
        if self.scratch.memo_seeded != 0 && self.recirc.pass == 2 {
            self.remember_second_passes(in_port, moved);
        }
    }

    /// The packets `valid` of a recirculated batch of `n` (scratch loaded, hashes taken)
    /// through the lookup stages and execute.
    fn pass_stages<'a, F: Frames<'a> + ?Sized, S: OutputSink>(
        &mut self,
        in_port: u32,
        frames: &mut F,
        valid: u32,
        n: usize,
        sink: &mut S,
    ) {
        self.scratch.narrow = 0;
        self.scratch.smc_prefetched = false;
        let pending = if self.cfg.emc {
            self.stage_emc(valid)
        } else {
            valid
        };
        let pending = self.stage_megaflow(n, pending);
        let (valid, uncached, installed) = if pending != 0 {
            let (dropped, uncached, installed) = self.stage_upcall(in_port, pending, rdtsc());
            (valid & !dropped, uncached, installed)
        } else {
            (valid, 0, 0)
        };
        self.stage_execute(in_port, frames, valid, uncached, sink);
        if installed != 0 {
            self.unmark_installed(installed);
        }
    }

    /// Between batches, once this datapath has run `ct`: forget the batch's tracker
    /// clock, and at most once a millisecond (TSC `now`) let the tracker expire up to
    /// [`CT_EXPIRE_BUDGET`] idle connections.
    #[cold]
    pub(super) fn ct_housekeeping(&mut self, now: u64) {
        let rc = &mut self.recirc;
        let ms = rc.now_ms.take();
        if now.saturating_sub(rc.expired_at) < (tsc_hz() * 1e-3) as u64 {
            return;
        }
        rc.expired_at = now;
        if let Some(t) = &self.tracker {
            let now_ms = ms.unwrap_or_else(|| t.now_ms());
            self.stats.ct_expired += t.expire(now_ms, CT_EXPIRE_BUDGET) as u64;
        }
    }
}
