//! Fast traffic transmission for `flowpath gen --tx`: XDP live frames (BPF_PROG_RUN with
//! BPF_F_TEST_XDP_LIVE_FRAMES, as xdp-trafficgen does) running `bpf/gen_tx.bpf.c`.
//!
//! How it works: one `BPF_PROG_TEST_RUN` call hands the kernel a template frame, a repeat
//! count and an `xdp_md` whose `ingress_ifindex` is the transmit interface. The kernel runs
//! `gen_tx` once per packet on page-pool copies of the frame; the program rewrites the flow
//! (source port, then source address, with checksums fixed from the template's originals)
//! from a packet counter and returns XDP_TX, which the live-frame runner turns into a
//! redirect out of that interface (`ndo_xdp_xmit`), in batches of up to 256 frames.
//!
//! What was found here (Linux 6.18, veth):
//! - A veth only accepts `ndo_xdp_xmit` frames while its PEER has NAPI running, i.e. an XDP
//!   program attached (native) or GRO enabled; otherwise the frames are silently dropped and
//!   the syscall still succeeds. An AF_XDP port on the peer provides the program; for a peer
//!   served by the Linux stack, attach one with [`attach_xdp_pass`].
//! - Nothing reports frames the peer's ring (256 entries) had no room for: a transmitter
//!   that must not lose packets paces itself ([`TxPlan::rate_pps`]) so bursts stay short.
//! - `BPF_PROG_RUN` with repeat > 1 adds the program to the kernel's XDP dispatcher before
//!   the run and removes it after, and each change waits for an RCU grace period: ~25-35 ms
//!   per call here, whatever the packet count (a 1-packet call takes ~18 µs). The dispatcher
//!   entry is reference counted, so [`LiveFrameTx::open`] also attaches the program in
//!   generic mode to the transmit interface for its lifetime; there it passes every frame
//!   untouched (it only acts on frames carrying its metadata magic) and calls cost ~20 µs,
//!   which allows short paced bursts. When that attach is refused (the interface already
//!   has an XDP program), calls stay slow and [`LiveFrameTx::fast_calls`] says so.
//! - A call's page pool is made for it and destroyed after it, and a pool whose frames are
//!   still in flight (queued at a peer served on another CPU) lingers registered for about
//!   a second; unregistering one walks every registered pool. Pacing by many short calls
//!   (bursts of ≤ 256 frames, sleeping between them) therefore paid a pool per burst and
//!   capped a paced sender at ~0.7 Mpps into a veth whose peer runs on another CPU (`perf`:
//!   `mem_allocator_disconnect`, the frame copies into fresh pages, the pool allocator),
//!   whatever rate was asked. From [`KERNEL_PACE_FROM`] up the program paces itself
//!   instead (`gen_pace`): it sends a frame only when it is due by its own clock and drops
//!   the slot otherwise, untouched, so a call of thousands of slots sends at the rate asked
//!   in bursts of a few frames. The sender's CPU is busy for the whole run then.
//! - aya 0.14 exposes the live-frame mode (`TestRunAttrs::xdp_live_frames`), so no
//!   hand-laid `bpf_attr` is needed; `send` counts what actually ran from the program's own
//!   counter (a run interrupted by a signal stops early).

use crate::xdp::{ifindex, load_object, GEN_OBJ};
use aya::maps::{Array, MapData};
use aya::programs::xdp::XdpLinkId;
use aya::programs::{TestRun, TestRunAttrs, TestRunOptions, Xdp, XdpMode as AyaMode};
use aya::Ebpf;
use std::io;
use std::time::{Duration, Instant};

pub use crate::xdp::{attach_xdp_drop, attach_xdp_pass, XdpGuard};
pub use socket::PacketSocketTx;

mod socket;

/// Frames the kernel handles per batch inside one live-frame `BPF_PROG_RUN` call (its
/// maximum, the `batch_size` of the call); unrelated to the datapath's packet batch.
const FRAMES_PER_PROG_RUN_BATCH: u32 = 256;
/// Packets per call without a rate: ~1 ms at 4 Mpps, so templates interleave finely and
/// the per-call setup (~20 µs) stays a small share.
const CHUNK: u64 = 4096;
/// The same when every call costs an RCU grace period (see the module docs): ~0.5 s.
const SLOW_CHUNK: u64 = 1 << 21;
/// Rates (packets per second) from which the program paces itself (see the module docs);
/// below, bursts of a few frames with sleeps between them, which cost little CPU and hold
/// the rate there (100k and 500k measured exact into a veth; 1M gave 0.70).
pub const KERNEL_PACE_FROM: u64 = 250_000;
/// How long a self-paced call should run: long enough that its pool's setup is a small
/// share, short enough that the duration and the templates' turns stay fine-grained.
const PACED_CALL: Duration = Duration::from_millis(2);
/// The same when every call costs an RCU grace period.
const SLOW_PACED_CALL: Duration = Duration::from_millis(500);
/// Most frames a self-paced program sends late in a row to catch up (a call's setup, a
/// preemption): the peer's ring holds 256.
const MAX_CATCH_UP: u64 = 128;
/// gen_cfg entries (templates per run); must match GEN_TEMPLATES in the program.
pub const MAX_TEMPLATES: usize = 1024;
/// First word of the metadata that marks a frame as ours; must match GEN_MAGIC.
const GEN_MAGIC: u32 = 0x6670_6774;

/// Configuration the program reads; must match `struct gen_cfg` in `bpf/gen_tx.bpf.c`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct GenCfg {
    mode: u32,
    flows: u32,
    new_share: u32,
    port_span: u32,
    base_src: u32,
    base_src_raw: u32,
    ip_off: u16,
    src_off: u16,
    port_off: u16,
    l4_csum_off: u16,
    base_port: u16,
    base_port_raw: u16,
    base_ip_csum_raw: u16,
    base_l4_csum_raw: u16,
    ip_ver: u8,
    l4_pseudo: u8,
    order: u8,
    pad: [u8; 5],
}

// SAFETY: plain C struct of integers without padding holes that matter to the kernel.
unsafe impl aya::Pod for GenCfg {}

const _: () = assert!(std::mem::size_of::<GenCfg>() == 48);

impl GenCfg {
    /// What `gen_tx` does to the frame it sends as packet number `c` (the program's
    /// counter): the same flow choice and the same field and checksum rewrites, for a
    /// transmitter without the program ([`PacketSocketTx`]). False where the program
    /// would abort (an offset past the frame). The program is the reference: a test runs
    /// both over the same frames and counters (`vary_matches_the_program`).
    fn vary(&self, c: u64, f: &mut [u8]) -> bool {
        self.mode == 0 || self.rewrite(self.flow_of(c), f)
    }

    /// The flow of packet number `c`: new flows spread evenly (from `flows` up), the
    /// recurring ones in turn or at random.
    fn flow_of(&self, c: u64) -> u32 {
        let flows = self.flows.max(1);
        let share = u64::from(self.new_share);
        let (a, b) = (
            c.wrapping_mul(share) >> 24,
            (c + 1).wrapping_mul(share) >> 24,
        );
        if a != b {
            flows.wrapping_add(b as u32)
        } else {
            let k = if self.order != 0 { mix64(c - a) } else { c - a };
            (k % u64::from(flows)) as u32
        }
    }

    /// Rewrite the template `f` into flow `flow`: the source address and port, and the
    /// checksums from the template's originals (RFC 1624).
    fn rewrite(&self, flow: u32, f: &mut [u8]) -> bool {
        let span = self.port_span.max(1);
        let src = self.base_src.wrapping_add(flow / span);
        let port = self.base_port.wrapping_add((flow % span) as u16);
        // The program's stores are of network-order values; its checksum sums are over
        // the raw (memory-order) halves, which one's complement does not mind.
        let src_raw = u32::from_ne_bytes(src.to_be_bytes());
        let port_raw = u16::from_ne_bytes(port.to_be_bytes());
        let put = |f: &mut [u8], off: u16, bytes: &[u8]| -> bool {
            let off = usize::from(off & 0x1ff);
            match f.get_mut(off..off + bytes.len()) {
                Some(d) => {
                    d.copy_from_slice(bytes);
                    true
                }
                None => false,
            }
        };
        if !put(f, self.src_off, &src_raw.to_ne_bytes()) {
            return false;
        }
        if self.ip_ver == 4 {
            let s = add32(
                !u32::from(self.base_ip_csum_raw) & 0xffff,
                self.base_src_raw,
                src_raw,
            );
            let ck = !fold(s) as u16;
            if !put(f, self.ip_off.wrapping_add(10), &ck.to_ne_bytes()) {
                return false;
            }
        }
        if self.port_off != 0 && !put(f, self.port_off, &port_raw.to_ne_bytes()) {
            return false;
        }
        if self.l4_csum_off != 0 {
            let mut s = !u32::from(self.base_l4_csum_raw) & 0xffff;
            if self.l4_pseudo != 0 {
                s = add32(s, self.base_src_raw, src_raw);
            }
            if self.port_off != 0 {
                s += (!u32::from(self.base_port_raw) & 0xffff) + u32::from(port_raw);
            }
            let r = !fold(s) as u16;
            let ck = if r == 0 { 0xffff } else { r };
            if !put(f, self.l4_csum_off, &ck.to_ne_bytes()) {
                return false;
            }
        }
        true
    }
}

/// The program's `fold`: a 32-bit one's complement sum folded to 16 bits.
fn fold(mut s: u32) -> u32 {
    s = (s & 0xffff) + (s >> 16);
    (s & 0xffff) + (s >> 16)
}

/// The program's `add32`: replace the raw 32-bit field `old` by `new` in the sum.
fn add32(sum: u32, old: u32, new: u32) -> u32 {
    sum + (!old & 0xffff) + (!old >> 16) + (new & 0xffff) + (new >> 16)
}

/// The program's `mix64` (splitmix64's finaliser).
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The program's pacing state; must match `struct gen_pace` in `bpf/gen_tx.bpf.c`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct GenPace {
    interval_ns: u64,
    next_ns: u64,
    max_lag_ns: u64,
    interval_frac: u32,
    next_frac: u32,
}

// SAFETY: plain C struct of integers without padding.
unsafe impl aya::Pod for GenPace {}

const _: () = assert!(std::mem::size_of::<GenPace>() == 32);

impl GenPace {
    /// `rate_pps` from the first slot on (0: unpaced).
    fn at(rate_pps: u64) -> GenPace {
        if rate_pps == 0 {
            return GenPace::default();
        }
        // The interval in 2^-32 ns, split into whole ns and the fraction.
        let fixed = (1_000_000_000u128 << 32) / u128::from(rate_pps);
        let interval_ns = (fixed >> 32) as u64;
        GenPace {
            interval_ns,
            next_ns: 0,
            max_lag_ns: interval_ns.saturating_mul(MAX_CATCH_UP),
            interval_frac: fixed as u32,
            next_frac: 0,
        }
    }
}

/// How the program changes the flow of each packet.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vary {
    /// Send the templates unchanged (program mode 0).
    AsIs,
    /// Spread packets over `flows` flows (in `order`) by rewriting the source port (then
    /// the source address once the ports run out), and make `new_share` (0.0..=1.0) of
    /// the packets never-seen flows, spread evenly. `flows: N, new_share: 0` is "vary the
    /// source port over N values"; `new_share: 1` is "every packet a new flow".
    Flows {
        flows: u32,
        new_share: f64,
        order: FlowOrder,
    },
}

/// The sequence in which packets visit the recurring flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowOrder {
    /// Flow 0, 1, …, N−1, 0, 1, …: each flow comes back every N packets. A cache whose
    /// entries were laid out in the order the flows arrived is then read as a sequential
    /// stream, which the hardware prefetcher runs ahead of.
    #[default]
    RoundRobin,
    /// Each packet's flow is a mix of its number, uniform over the N flows: no order a
    /// cache's layout could follow, as with traffic interleaved from many hosts.
    Random,
}

impl FlowOrder {
    /// `round-robin` or `random`.
    pub fn parse(s: &str) -> Option<FlowOrder> {
        match s {
            "round-robin" => Some(FlowOrder::RoundRobin),
            "random" => Some(FlowOrder::Random),
            _ => None,
        }
    }
}

impl Vary {
    /// Round-robin over `flows` flows with `new_share` of the packets new flows, or the
    /// templates as they are when that changes nothing (one flow, no new ones).
    pub fn for_flows(flows: u32, new_share: f64) -> Vary {
        Vary::for_flows_in(flows, new_share, FlowOrder::RoundRobin)
    }

    /// [`Vary::for_flows`] with the recurring flows visited in `order`.
    pub fn for_flows_in(flows: u32, new_share: f64, order: FlowOrder) -> Vary {
        if flows <= 1 && new_share == 0.0 {
            Vary::AsIs
        } else {
            Vary::Flows {
                flows,
                new_share,
                order,
            }
        }
    }

    /// Every packet a new flow.
    pub fn churn() -> Vary {
        Vary::Flows {
            flows: 1,
            new_share: 1.0,
            order: FlowOrder::RoundRobin,
        }
    }
}

/// What [`LiveFrameTx::run`] should do.
#[derive(Clone, Debug)]
pub struct TxPlan {
    /// Stop after this long.
    pub duration: Duration,
    /// Stop after this many packets (whichever comes first).
    pub packets: Option<u64>,
    /// Pace to this many packets per second: below [`KERNEL_PACE_FROM`] short bursts
    /// with sleeps between them, from it up paced by the program itself (see the module
    /// docs); `None` sends as fast as the kernel goes.
    pub rate_pps: Option<u64>,
    pub vary: Vary,
}

/// What a run sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct TxReport {
    /// Packets the program ran for (handed to the interface; a veth peer without room drops
    /// silently, see the module docs).
    pub packets: u64,
    pub seconds: f64,
    pub mpps: f64,
}

impl TxReport {
    /// `packets` sent from `start` until now.
    fn since(start: Instant, packets: u64) -> TxReport {
        let seconds = start.elapsed().as_secs_f64();
        TxReport {
            packets,
            seconds,
            mpps: if seconds > 0.0 {
                packets as f64 / seconds / 1e6
            } else {
                0.0
            },
        }
    }
}

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
    /// the module docs); when false, bursts are long and pacing coarse.
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

/// The transmitter of `flowpath gen --tx`: XDP live frames where the kernel runs them for
/// this process, else a packet socket sending the same frames and flows (slower).
pub enum FrameTx {
    LiveFrames(Box<LiveFrameTx>),
    PacketSocket(PacketSocketTx),
}

impl FrameTx {
    /// Live frames on `ifname`, or the packet socket when the live-frame program cannot
    /// be loaded (the refusal is kept for the report).
    pub fn open(ifname: &str) -> io::Result<FrameTx> {
        match LiveFrameTx::open(ifname) {
            Ok(t) => Ok(FrameTx::LiveFrames(Box::new(t))),
            Err(e) => Ok(FrameTx::PacketSocket(PacketSocketTx::open(
                ifname,
                format!("the live-frame program: {e}"),
            )?)),
        }
    }

    /// [`LiveFrameTx::run`]; if the kernel refuses the first live-frame call (EPERM,
    /// EACCES: nothing was sent), the packet socket runs the plan instead, from then on.
    pub fn run<T: AsRef<[u8]>>(&mut self, templates: &[T], plan: &TxPlan) -> io::Result<TxReport> {
        if let FrameTx::LiveFrames(t) = self {
            match t.run(templates, plan) {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied && t.packets() == 0 => {
                    let s = PacketSocketTx::open(t.interface(), e.to_string())?;
                    *self = FrameTx::PacketSocket(s);
                }
                r => return r,
            }
        }
        match self {
            FrameTx::PacketSocket(s) => s.run(templates, plan),
            FrameTx::LiveFrames(_) => unreachable!("replaced above"),
        }
    }

    /// `xdp-live-frames` or `packet-socket`.
    pub fn kind(&self) -> &'static str {
        match self {
            FrameTx::LiveFrames(_) => "xdp-live-frames",
            FrameTx::PacketSocket(_) => "packet-socket",
        }
    }

    /// Why live frames were not used (None while they are).
    pub fn why_not_live(&self) -> Option<&str> {
        match self {
            FrameTx::LiveFrames(_) => None,
            FrameTx::PacketSocket(s) => Some(s.why()),
        }
    }

    /// Whether kernel calls are cheap ([`LiveFrameTx::fast_calls`]; a socket's always are).
    pub fn fast_calls(&self) -> bool {
        match self {
            FrameTx::LiveFrames(t) => t.fast_calls(),
            FrameTx::PacketSocket(_) => true,
        }
    }
}

/// Where a burst-paced run stands before its next burst.
enum Burst {
    /// The plan's duration is over.
    Stop,
    /// Ahead of the rate: it waited (slept when more than 200 µs ahead, else spun once);
    /// look again.
    Waited,
    /// Send now.
    Due,
}

/// [`Burst`] for a run of `plan` started at `start` that has sent `sent` packets.
fn next_burst(plan: &TxPlan, start: Instant, sent: u64) -> Burst {
    let elapsed = start.elapsed();
    if elapsed >= plan.duration {
        return Burst::Stop;
    }
    let Some(r) = plan.rate_pps else {
        return Burst::Due;
    };
    let due = Duration::from_secs_f64(sent as f64 / r as f64);
    if due <= elapsed {
        return Burst::Due;
    }
    let ahead = due - elapsed;
    if ahead > Duration::from_micros(200) {
        std::thread::sleep(ahead - Duration::from_micros(100));
    } else {
        std::hint::spin_loop();
    }
    Burst::Waited
}

/// Bytes of XDP metadata in front of each frame: GEN_MAGIC and the gen_cfg index.
const META: usize = 8;

fn with_meta(frame: &[u8], slot: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(META + frame.len());
    v.extend_from_slice(&GEN_MAGIC.to_ne_bytes());
    v.extend_from_slice(&slot.to_ne_bytes());
    v.extend_from_slice(frame);
    v
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

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

fn raw16(f: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([f[at], f[at + 1]])
}

fn unvaried(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("cannot vary flows of this template: {what}"),
    )
}

/// What the program needs to rewrite `frame`'s flow (offsets and original field values).
fn config_for(frame: &[u8], vary: &Vary) -> io::Result<GenCfg> {
    if frame.len() < 14 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "template frame shorter than an Ethernet header",
        ));
    }
    let (flows, new_share, order) = match *vary {
        Vary::AsIs => return Ok(GenCfg::default()),
        Vary::Flows {
            flows,
            new_share,
            order,
        } => (flows.max(1), new_share, order),
    };
    if !(0.0..=1.0).contains(&new_share) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("new-flow share {new_share} is outside 0..=1"),
        ));
    }
    let mut off = 12;
    let mut ethertype = be16(frame, off);
    while matches!(ethertype, 0x8100 | 0x88a8) && frame.len() >= off + 6 {
        off += 4;
        ethertype = be16(frame, off);
    }
    let ip = off + 2;
    let mut c = GenCfg {
        mode: 1,
        flows,
        new_share: (new_share * f64::from(1u32 << 24)).round() as u32,
        order: u8::from(order == FlowOrder::Random),
        ip_off: ip as u16,
        ..GenCfg::default()
    };
    let (proto, l4) = config_ip(frame, ethertype, ip, &mut c)?;
    config_l4(frame, proto, l4, &mut c)?;
    if [c.src_off, c.port_off, c.l4_csum_off]
        .iter()
        .any(|&o| usize::from(o) + 4 > 0x200)
    {
        return Err(unvaried("headers deeper than 508 bytes"));
    }
    Ok(c)
}

/// Fill in the IP header's part of `c` (the header of `ethertype` at `ip`): version,
/// source address and IPv4 header checksum. Returns the transport protocol (0 for an IPv4
/// fragment) and the transport header's offset.
fn config_ip(frame: &[u8], ethertype: u16, ip: usize, c: &mut GenCfg) -> io::Result<(u8, usize)> {
    let (proto, l4) = match ethertype {
        0x0800 => {
            if frame.len() < ip + 20 {
                return Err(unvaried("truncated IPv4 header"));
            }
            let ihl = usize::from(frame[ip] & 0xf) * 4;
            c.ip_ver = 4;
            c.src_off = (ip + 12) as u16;
            c.base_ip_csum_raw = raw16(frame, ip + 10);
            let frag = be16(frame, ip + 6) & 0x3fff;
            (if frag != 0 { 0 } else { frame[ip + 9] }, ip + ihl)
        }
        0x86dd => {
            if frame.len() < ip + 40 {
                return Err(unvaried("truncated IPv6 header"));
            }
            c.ip_ver = 6;
            c.src_off = (ip + 8 + 12) as u16;
            (frame[ip + 6], ip + 40)
        }
        t => return Err(unvaried(&format!("ethertype {t:#06x} is not IPv4/IPv6"))),
    };
    let so = usize::from(c.src_off);
    c.base_src = u32::from_be_bytes(frame[so..so + 4].try_into().unwrap());
    c.base_src_raw = u32::from_ne_bytes(frame[so..so + 4].try_into().unwrap());
    Ok((proto, l4))
}

/// Fill in the transport header's part of `c` (protocol `proto` at `l4`): the port and
/// the checksum the program fixes, and how many source ports there are to cycle through.
fn config_l4(frame: &[u8], proto: u8, l4: usize, c: &mut GenCfg) -> io::Result<()> {
    let need = |n: usize| {
        if frame.len() < l4 + n {
            Err(unvaried("truncated transport header"))
        } else {
            Ok(())
        }
    };
    match proto {
        17 => {
            need(8)?;
            c.port_off = l4 as u16;
            let ck = raw16(frame, l4 + 6);
            // IPv4 UDP without a checksum stays without one.
            if c.ip_ver == 6 || ck != 0 {
                c.l4_csum_off = (l4 + 6) as u16;
                c.base_l4_csum_raw = ck;
                c.l4_pseudo = 1;
            }
        }
        6 => {
            need(20)?;
            c.port_off = l4 as u16;
            c.l4_csum_off = (l4 + 16) as u16;
            c.base_l4_csum_raw = raw16(frame, l4 + 16);
            c.l4_pseudo = 1;
        }
        58 if c.ip_ver == 6 => {
            need(4)?;
            c.l4_csum_off = (l4 + 2) as u16;
            c.base_l4_csum_raw = raw16(frame, l4 + 2);
            c.l4_pseudo = 1;
        }
        // ICMPv4, fragments, anything else: only the address changes (IPv4 header checksum
        // fixed; nothing else covers it).
        _ if c.ip_ver == 4 => {}
        p => return Err(unvaried(&format!("IPv6 next header {p}"))),
    }
    if c.port_off != 0 {
        c.base_port = be16(frame, l4);
        c.base_port_raw = raw16(frame, l4);
        c.port_span = (65536 - u32::from(c.base_port)).max(1);
    } else {
        c.port_span = 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
