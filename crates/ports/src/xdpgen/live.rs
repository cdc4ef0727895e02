//! [`LiveFrameTx`]: XDP live frames (BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, as
//! xdp-trafficgen does) running `bpf/gen_tx.bpf.c`.
//!
//! How it works: one `BPF_PROG_TEST_RUN` call hands the kernel a template frame, a repeat
//! count and an `xdp_md` whose `ingress_ifindex` is the transmit interface. The kernel runs
//! `gen_tx` once per packet on page-pool copies of the frame; the program rewrites the flow
//! (source port, then source address, with checksums fixed from the template's originals)
//! from a packet counter and returns XDP_TX, which the live-frame runner turns into a
//! redirect out of that interface (`ndo_xdp_xmit`), in batches of up to 256 frames.
//!
//! The kernel behaviour this is built around (measured on Linux 6.18, veth):
//! - A veth only accepts `ndo_xdp_xmit` frames while its PEER has NAPI running, i.e. an XDP
//!   program attached (native) or GRO enabled; otherwise the frames are silently dropped and
//!   the syscall still succeeds. An AF_XDP port on the peer provides the program; for a peer
//!   served by the Linux stack, attach one with
//!   [`attach_xdp_pass`](crate::xdp::attach_xdp_pass).
//! - Nothing reports frames the peer's ring (256 entries) had no room for: a transmitter
//!   that must not lose packets paces itself ([`TxPlan::rate_pps`]) so bursts stay short.
//! - `BPF_PROG_RUN` with repeat > 1 adds the program to the kernel's XDP dispatcher before
//!   the run and removes it after, and each change waits for an RCU grace period: ~25-35 ms
//!   per call, whatever the packet count (a 1-packet call takes ~18 µs). The dispatcher
//!   entry is reference counted, so [`LiveFrameTx::open`] also attaches the program in
//!   generic mode to the transmit interface for its lifetime; there it passes every frame
//!   untouched (it only acts on frames carrying its metadata magic) and calls cost ~20 µs,
//!   which allows short paced bursts. When that attach is refused (the interface already
//!   has an XDP program), calls stay slow and [`LiveFrameTx::fast_calls`] says so.
//! - A call's page pool is made for it and destroyed after it, and a pool whose frames are
//!   still in flight (queued at a peer served on another CPU) lingers registered for about
//!   a second; unregistering one walks every registered pool. Pacing by many short calls
//!   (bursts of ≤ 256 frames, sleeping between them) therefore pays a pool per burst and
//!   caps a paced sender at ~0.7 Mpps into a veth whose peer runs on another CPU (`perf`:
//!   `mem_allocator_disconnect`, the frame copies into fresh pages, the pool allocator),
//!   whatever rate is asked. From [`KERNEL_PACE_FROM`] up the program paces itself
//!   instead (`gen_pace`): it sends a frame only when it is due by its
//!   own clock and drops the slot otherwise, untouched, so a call of thousands of slots
//!   sends at the rate asked in bursts of a few frames. The sender's CPU is busy for the
//!   whole run then.
//! - aya 0.14 exposes the live-frame mode (`TestRunAttrs::xdp_live_frames`), so no
//!   hand-laid `bpf_attr` is needed; `send` counts what actually ran from the program's own
//!   counter (a run interrupted by a signal stops early).

use super::pace::{next_burst, Burst, GenPace, KERNEL_PACE_FROM};
use super::plan::{TxPlan, TxReport, Vary};
use super::template::{config_for, with_meta, GenCfg, MAX_TEMPLATES, META};
use crate::xdp::{ifindex, load_object, GEN_OBJ};
use aya::maps::{Array, MapData};
use aya::programs::xdp::XdpLinkId;
use aya::programs::{TestRun, TestRunAttrs, TestRunOptions, Xdp, XdpMode as AyaMode};
use aya::Ebpf;
use std::io;
use std::time::{Duration, Instant};

/// Frames the kernel handles per batch inside one live-frame `BPF_PROG_RUN` call (its
/// maximum, the `batch_size` of the call); unrelated to the datapath's packet batch.
const FRAMES_PER_PROG_RUN_BATCH: u32 = 256;
/// Packets per call without a rate: ~1 ms at 4 Mpps, so templates interleave finely and
/// the per-call setup (~20 µs) stays a small share.
const CHUNK: u64 = 4096;
/// The same when every call costs an RCU grace period (see the module documentation): ~0.5 s.
const SLOW_CHUNK: u64 = 1 << 21;
/// How long a self-paced call should run: long enough that its pool's setup is a small
/// share, short enough that the duration and the templates' turns stay fine-grained.
const PACED_CALL: Duration = Duration::from_millis(2);
/// The same when every call costs an RCU grace period.
const SLOW_PACED_CALL: Duration = Duration::from_millis(500);

/// The transmitter bound to one interface (in the caller's network namespace).
pub struct LiveFrameTx {
    ebpf: Ebpf,
    /// The generic-mode attachment that keeps calls cheap (None: refused).
    pin: Option<XdpLinkId>,
    cfg: Array<MapData, GenCfg>,
    ctr: Array<MapData, u64>,
    pace: Array<MapData, GenPace>,
    /// Whether `pace` holds a rate (cleared before an unpaced send).
    paced: bool,
    ifname: String,
    ifindex: u32,
    last_cfg: Option<GenCfg>,
    counter: u64,
}

impl LiveFrameTx {
    /// Load the program for transmitting out of `ifname`.
    pub fn open(ifname: &str) -> io::Result<LiveFrameTx> {
        let idx = ifindex(ifname)?;
        let mut ebpf = load_object(GEN_OBJ)?;
        let p: &mut Xdp = ebpf
            .program_mut("gen_tx")
            .ok_or_else(|| io::Error::other("XDP object has no gen_tx"))?
            .try_into()
            .map_err(|e| io::Error::other(format!("gen_tx: {e}")))?;
        p.load()
            .map_err(|e| io::Error::other(format!("loading gen_tx: {e}")))?;
        let take = |ebpf: &mut Ebpf, name: &str| {
            ebpf.take_map(name)
                .ok_or_else(|| io::Error::other(format!("XDP object has no {name}")))
        };
        let cfg = Array::try_from(take(&mut ebpf, "gen_cfg")?)
            .map_err(|e| io::Error::other(format!("gen_cfg: {e}")))?;
        let ctr = Array::try_from(take(&mut ebpf, "gen_ctr")?)
            .map_err(|e| io::Error::other(format!("gen_ctr: {e}")))?;
        let pace = Array::try_from(take(&mut ebpf, "gen_pace")?)
            .map_err(|e| io::Error::other(format!("gen_pace: {e}")))?;
        let mut tx = LiveFrameTx {
            ebpf,
            cfg,
            ctr,
            pace,
            paced: false,
            ifname: ifname.to_string(),
            ifindex: idx,
            last_cfg: None,
            counter: 0,
            pin: None,
        };
        tx.counter = tx.read_counter()?;
        if let Some(p) = tx.ebpf.program_mut("gen_tx") {
            let p: &mut Xdp = p.try_into().map_err(|e| io::Error::other(format!("{e}")))?;
            tx.pin = p.attach_to_if_index(idx, AyaMode::Skb).ok();
        }
        Ok(tx)
    }

    /// Whether calls are cheap (the program could also be attached to the interface, see
    /// the module documentation); when false, bursts are long and pacing coarse.
    pub fn fast_calls(&self) -> bool {
        self.pin.is_some()
    }

    pub fn interface(&self) -> &str {
        &self.ifname
    }

    /// Packets the program has run for since `open`.
    pub fn packets(&self) -> u64 {
        self.counter
    }

    fn read_counter(&self) -> io::Result<u64> {
        self.ctr
            .get(&0, 0)
            .map_err(|e| io::Error::other(format!("gen_ctr: {e}")))
    }

    fn set_cfg(&mut self, slot: u32, cfg: GenCfg) -> io::Result<()> {
        self.cfg
            .set(slot, cfg, 0)
            .map_err(|e| io::Error::other(format!("gen_cfg[{slot}]: {e}")))
    }

    /// Let the program pace itself to `rate_pps` from its next slot on (0: unpaced).
    fn set_pace(&mut self, rate_pps: u64) -> io::Result<()> {
        if rate_pps == 0 && !self.paced {
            return Ok(());
        }
        self.pace
            .set(0, GenPace::at(rate_pps), 0)
            .map_err(|e| io::Error::other(format!("gen_pace: {e}")))?;
        self.paced = rate_pps != 0;
        Ok(())
    }

    /// Transmit `frame` `count` times, changing flows as `vary` says (the flow sequence
    /// continues from the previous call). Returns the packets actually run (fewer only if a
    /// signal interrupted the run).
    pub fn send(&mut self, frame: &[u8], count: u64, vary: &Vary) -> io::Result<u64> {
        let cfg = config_for(frame, vary)?;
        self.set_pace(0)?;
        if self.last_cfg != Some(cfg) {
            self.set_cfg(0, cfg)?;
            self.last_cfg = Some(cfg);
        }
        self.send_raw(&with_meta(frame, 0), count)
    }

    /// Run `count` packets of `data` (metadata + frame, see [`with_meta`]).
    fn send_raw(&mut self, data: &[u8], count: u64) -> io::Result<u64> {
        let before = self.counter;
        let mut left = count;
        // struct xdp_md { data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex }: data = the metadata length, data_end = the whole length.
        let md: [u32; 6] = [META as u32, data.len() as u32, 0, self.ifindex, 0, 0];
        // SAFETY: reinterpreting [u32; 6] as its 24 bytes.
        let ctx: &[u8] = unsafe { std::slice::from_raw_parts(md.as_ptr().cast(), 24) };
        let prog: &Xdp = self
            .ebpf
            .program("gen_tx")
            .ok_or_else(|| io::Error::other("gen_tx missing"))?
            .try_into()
            .map_err(|e| io::Error::other(format!("gen_tx: {e}")))?;
        let mut result = Ok(());
        while left > 0 {
            let n = left.min(u64::from(u32::MAX / 2)) as u32;
            let opts = TestRunOptions {
                data_in: Some(data),
                ctx_in: Some(ctx),
                repeat: n,
                attrs: TestRunAttrs::new().xdp_live_frames(FRAMES_PER_PROG_RUN_BATCH.min(n)),
                ..TestRunOptions::new()
            };
            if let Err(e) = prog.test_run(opts) {
                // The errno decides what the caller can do: EPERM/EACCES means this kernel
                // (or a security module) refuses live frames to this process, and
                // [`FrameTx`] then transmits through a packet socket instead.
                let os = match &e {
                    aya::programs::ProgramError::SyscallError(s) => s.io_error.raw_os_error(),
                    _ => None,
                };
                let kind = match os {
                    Some(libc::EPERM | libc::EACCES) => io::ErrorKind::PermissionDenied,
                    _ => io::ErrorKind::Other,
                };
                let why = os
                    .map(|n| format!(": {}", io::Error::from_raw_os_error(n)))
                    .unwrap_or_default();
                result = Err(io::Error::new(
                    kind,
                    format!("BPF_PROG_RUN (live frames) on {}: {e}{why}", self.ifname),
                ));
                break;
            }
            left -= u64::from(n);
        }
        self.counter = self.read_counter()?;
        let ran = self.counter.wrapping_sub(before);
        match result {
            Err(e) if ran == 0 => Err(e),
            _ => Ok(ran),
        }
    }

    /// Cycle through `templates` (each gets equal chunks, so repeats weight them) until the
    /// plan's duration or packet count is reached, pacing when it has a rate.
    pub fn run<T: AsRef<[u8]>>(&mut self, templates: &[T], plan: &TxPlan) -> io::Result<TxReport> {
        if templates.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no template frames",
            ));
        }
        if templates.len() > MAX_TEMPLATES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} templates, at most {MAX_TEMPLATES}", templates.len()),
            ));
        }
        let mut data = Vec::with_capacity(templates.len());
        for (i, t) in templates.iter().enumerate() {
            self.set_cfg(i as u32, config_for(t.as_ref(), &plan.vary)?)?;
            data.push(with_meta(t.as_ref(), i as u32));
        }
        self.last_cfg = None;
        match plan.rate_pps {
            Some(r) if r >= KERNEL_PACE_FROM => return self.run_self_paced(&data, plan, r),
            _ => self.set_pace(0)?,
        }
        let chunk = match (plan.rate_pps, self.fast_calls()) {
            // ~200 µs of traffic per burst, at most one kernel batch.
            (Some(r), true) => (r / 5000).clamp(1, u64::from(FRAMES_PER_PROG_RUN_BATCH)),
            (None, true) => CHUNK,
            // ~50 ms bursts: each call costs tens of ms anyway.
            (Some(r), false) => (r / 20).clamp(1, SLOW_CHUNK),
            (None, false) => SLOW_CHUNK,
        };
        let limit = plan.packets.unwrap_or(u64::MAX);
        let start = Instant::now();
        let mut sent = 0u64;
        let mut i = 0usize;
        while sent < limit {
            match next_burst(plan, start, sent) {
                Burst::Stop => break,
                Burst::Waited => continue,
                Burst::Due => {}
            }
            let n = chunk.min(limit - sent);
            let ran = self.send_raw(&data[i], n)?;
            sent += ran;
            if ran < n {
                break; // interrupted by a signal
            }
            i = (i + 1) % templates.len();
        }
        Ok(TxReport::since(start, sent))
    }

    /// [`LiveFrameTx::run`] at `rate_pps` paced by the program: calls of as many slots as
    /// take about [`PACED_CALL`] (never more than the packets left, since a slot sends at
    /// most one), templates taking turns by call.
    fn run_self_paced(
        &mut self,
        data: &[Vec<u8>],
        plan: &TxPlan,
        rate_pps: u64,
    ) -> io::Result<TxReport> {
        self.set_pace(rate_pps)?;
        let call = if self.fast_calls() {
            PACED_CALL
        } else {
            SLOW_PACED_CALL
        };
        let limit = plan.packets.unwrap_or(u64::MAX);
        let start = Instant::now();
        let mut sent = 0u64;
        let mut slots = 4096u64;
        let mut i = 0usize;
        let result = loop {
            if sent >= limit || start.elapsed() >= plan.duration {
                break Ok(());
            }
            let t = Instant::now();
            match self.send_raw(&data[i], slots.min(limit - sent)) {
                Ok(ran) => sent += ran,
                Err(e) => break Err(e),
            }
            // Scale the next call to the time this one took (at most 4x either way).
            let took = t.elapsed().as_secs_f64().max(1e-6);
            let scale = (call.as_secs_f64() / took).clamp(0.25, 4.0);
            slots = ((slots as f64 * scale) as u64).clamp(256, 1 << 24);
            i = (i + 1) % data.len();
        };
        // Whatever happened, later sends are not paced by a stale clock.
        let unpaced = self.set_pace(0);
        result?;
        unpaced?;
        Ok(TxReport::since(start, sent))
    }
}

impl Drop for LiveFrameTx {
    fn drop(&mut self) {
        if let (Some(id), Some(p)) = (self.pin.take(), self.ebpf.program_mut("gen_tx")) {
            if let Ok(x) = <&mut Xdp>::try_from(p) {
                let _ = x.detach(id);
            }
        }
    }
}
