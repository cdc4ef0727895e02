//! [`FlowTier`]: the loaded program and its maps — configuration, masks, the flow table,
//! ports and sockets, counters, test runs, attaching to interfaces, pinning.

use crate::layout::*;
use crate::table::{FlowTable, TableFull};
use crate::{ifindex, Attached, XdpMode};
use aya::maps::{Array, DevMap, HashMap, MapData, PerCpuArray, XskMap};
use aya::programs::xdp::XdpLinkId;
use aya::programs::{TestRun, TestRunOptions, Xdp};
use aya::Ebpf;
use bytemuck::Zeroable;
use flowpath_packet::FlowKey;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::time::Duration;

/// The compiled program (empty when the crate was built without clang).
static OBJ: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/flow_tier.bpf.o"));

/// One `BPF_PROG_TEST_RUN` of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    /// The XDP return code ([`xdp_action`]).
    pub action: u32,
    /// The frame as the program left it.
    pub data: Vec<u8>,
}

/// `bpf(2)` command: look up many elements at once (Linux 5.6).
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// `union bpf_attr`'s `batch` member (the `BPF_MAP_*_BATCH` commands).
#[repr(C)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// One slot's counters summed over CPUs.
fn sum_cpus(per_cpu: &[FpStat]) -> FpStat {
    per_cpu.iter().fold(FpStat::default(), |a, s| FpStat {
        packets: a.packets + s.packets,
        bytes: a.bytes + s.bytes,
    })
}

fn err(what: impl std::fmt::Display) -> io::Error {
    io::Error::other(what.to_string())
}

/// Whether the program was compiled in (clang was present at build time).
pub fn bpf_available() -> bool {
    !OBJ.is_empty()
}

/// The loaded program and its maps.
pub struct FlowTier {
    ebpf: Ebpf,
    /// The object's program this runs: [`PROGRAM`], or [`PARSE_FORWARD`] for the baseline.
    program: &'static str,
    links: Vec<(u32, XdpLinkId, Attached)>,
    cfg: FpConfig,
    /// `fp_flows`, mapped into this process.
    table: FlowTable,
}

impl FlowTier {
    /// Load the program (not attached anywhere yet): version 1, no masks, VXLAN port 4789
    /// (flowpath's default `ParseOptions`).
    pub fn load() -> io::Result<FlowTier> {
        if OBJ.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "flowpath-xdptier was built without clang; install clang and libbpf-dev and rebuild",
            ));
        }
        FlowTier::load_object(OBJ)
    }

    /// Load another object in place of the built-in one: a program of your own that keeps
    /// the map contract (docs/xdp-tier.md): an XDP program named `flow_tier` and maps
    /// with the same names, types and sizes. A map that is missing or of another shape is
    /// reported by name when it is first used.
    pub fn load_object(obj: &[u8]) -> io::Result<FlowTier> {
        FlowTier::load_program(obj, PROGRAM)
    }

    /// A baseline for measuring the tier, not a switch: the built-in object with its
    /// [`PARSE_FORWARD`] program in place of `flow_tier`. That program parses each frame
    /// exactly as the tier does and redirects it to `fp_ports[0]` ([`FlowTier::set_output_dev`]),
    /// with no lookup, actions or counters (frames the tier would hand to user space
    /// unparsed go to the kernel stack). `flowpath xdp-forward --parse` runs it.
    pub fn load_parse_forward() -> io::Result<FlowTier> {
        if OBJ.is_empty() {
            return FlowTier::load();
        }
        FlowTier::load_program(OBJ, PARSE_FORWARD)
    }

    fn load_program(obj: &[u8], program: &'static str) -> io::Result<FlowTier> {
        let mut ebpf = Ebpf::load(obj).map_err(|e| err(format!("loading XDP object: {e}")))?;
        let p: &mut Xdp = ebpf
            .program_mut(program)
            .ok_or_else(|| err(format!("object has no {program} program")))?
            .try_into()
            .map_err(|e| err(format!("{program}: {e}")))?;
        p.load()
            .map_err(|e| err(format!("loading {program} (verifier): {e}")))?;
        let array = |name: &str| match ebpf.map(name) {
            Some(aya::maps::Map::Array(md)) => Ok(md),
            Some(_) => Err(err(format!(
                "{name} is not an array (see docs/xdp-tier.md)"
            ))),
            None => Err(err(format!("object has no map {name}"))),
        };
        let table = FlowTable::map(array("fp_flows")?, array("fp_index")?, array("fp_hot")?)?;
        let mut t = FlowTier {
            ebpf,
            program,
            table,
            links: Vec::new(),
            cfg: FpConfig {
                version: 1,
                vxlan_port: 4789,
                ..FpConfig::zeroed()
            },
        };
        t.write_config()?;
        Ok(t)
    }

    fn write_config(&mut self) -> io::Result<()> {
        let cfg = self.cfg;
        let mut m: Array<&mut MapData, FpConfig> = self.map("fp_config")?;
        m.set(0, cfg, 0).map_err(|e| err(format!("fp_config: {e}")))
    }

    fn map<'a, T>(&'a mut self, name: &str) -> io::Result<T>
    where
        T: TryFrom<&'a mut aya::maps::Map, Error = aya::maps::MapError>,
    {
        let m = self
            .ebpf
            .map_mut(name)
            .ok_or_else(|| err(format!("object has no map {name}")))?;
        T::try_from(m).map_err(|e| err(format!("{name}: {e}")))
    }

    fn map_ro<'a, T>(&'a self, name: &str) -> io::Result<T>
    where
        T: TryFrom<&'a aya::maps::Map, Error = aya::maps::MapError>,
    {
        let m = self
            .ebpf
            .map(name)
            .ok_or_else(|| err(format!("object has no map {name}")))?;
        T::try_from(m).map_err(|e| err(format!("{name}: {e}")))
    }

    /// The current configuration (`fp_config[0]`).
    pub fn config(&self) -> FpConfig {
        self.cfg
    }

    /// The current entry version.
    pub fn version(&self) -> u32 {
        self.cfg.version
    }

    /// Invalidate every cached entry at once (one map write): entries carrying the old
    /// version are misses from now on. Returns the new version.
    pub fn bump_version(&mut self) -> io::Result<u32> {
        self.cfg.version = self.cfg.version.wrapping_add(1);
        self.write_config()?;
        Ok(self.cfg.version)
    }

    /// Make `version` the one entries must carry (one map write). [`INVALID_VERSION`] turns
    /// every entry into a miss.
    pub fn set_version(&mut self, version: u32) -> io::Result<()> {
        self.cfg.version = version;
        self.write_config()
    }

    /// UDP destination port handed to user space as VXLAN (`None`: none), to match the
    /// datapath's `ParseOptions::vxlan_port`.
    pub fn set_vxlan_port(&mut self, port: Option<u16>) -> io::Result<()> {
        self.cfg.vxlan_port = port.unwrap_or(0);
        self.write_config()
    }

    /// Record each packet's key and verdict in `fp_debug[0]` (for tests and tracing).
    pub fn set_debug(&mut self, on: bool) -> io::Result<()> {
        if on {
            self.cfg.flags |= CFG_DEBUG;
        } else {
            self.cfg.flags &= !CFG_DEBUG;
        }
        self.write_config()
    }

    /// The masks, tried in this order; each `(id, mask)` keys its entries by `id`.
    pub fn set_masks(&mut self, masks: &[(u32, FlowKey)]) -> io::Result<()> {
        if masks.len() > MAX_MASKS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} masks, the XDP tier tries at most {MAX_MASKS}",
                    masks.len()
                ),
            ));
        }
        // Shrink the count first so the program never reads a half-written mask list.
        self.cfg.n_masks = self.cfg.n_masks.min(masks.len() as u32);
        self.write_config()?;
        {
            let mut m: Array<&mut MapData, FpMask> = self.map("fp_masks")?;
            for (i, (id, mask)) in masks.iter().enumerate() {
                m.set(i as u32, FpMask::of(*id, mask), 0)
                    .map_err(|e| err(format!("fp_masks[{i}]: {e}")))?;
            }
        }
        self.cfg.n_masks = masks.len() as u32;
        self.write_config()
    }

    /// Cache a flow: packets whose key ANDed with mask `mask_id` equals `key & mask`
    /// (`mask` must be the one registered under that id) run `actions`, counted in `slot`.
    /// The entry gets the current version.
    pub fn insert(
        &self,
        mask_id: u32,
        mask: &FlowKey,
        key: &FlowKey,
        actions: FpActions,
        slot: u32,
    ) -> io::Result<()> {
        let version = self.cfg.version;
        self.insert_versioned(mask_id, mask, key, actions, slot, version)
    }

    /// As [`FlowTier::insert`], but stamped with `version` (the rule version the flow was
    /// classified under) instead of the current one: it is a hit only while
    /// `fp_config.version == version`.
    pub fn insert_versioned(
        &self,
        mask_id: u32,
        mask: &FlowKey,
        key: &FlowKey,
        actions: FpActions,
        slot: u32,
        version: u32,
    ) -> io::Result<()> {
        if slot >= MAX_FLOWS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("slot {slot} >= {MAX_FLOWS}"),
            ));
        }
        let k = flow_key(mask_id, mask, key).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the megaflow matches non-zero tunnel fields: never a hit in the XDP tier",
            )
        })?;
        let v = FpFlowValue {
            act: FpActions { version, ..actions },
            slot,
            pad: 0,
        };
        self.table.insert(k, v).map(|_| ()).map_err(|full| {
            io::Error::new(
                io::ErrorKind::StorageFull,
                match full {
                    TableFull::Bucket => "fp_index: all 16 slots of the flow's bucket are taken",
                    TableFull::Entries => "fp_flows: every entry holds a flow",
                },
            )
        })
    }

    /// Remove a cached flow (as inserted).
    pub fn remove(&self, mask_id: u32, mask: &FlowKey, key: &FlowKey) -> io::Result<()> {
        let Some(k) = flow_key(mask_id, mask, key) else {
            return Ok(()); // never inserted
        };
        if self.table.remove(&k) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "fp_flows: no such flow",
            ))
        }
    }

    /// The kernel flow table, as mapped into this process.
    pub fn table(&self) -> &FlowTable {
        &self.table
    }

    /// The same, to write (what `insert`/`remove` use; mind the seqlock protocol).
    pub fn table_mut(&mut self) -> &mut FlowTable {
        &mut self.table
    }

    /// Cached flows in `fp_flows` (a scan of the whole table).
    pub fn flow_count(&self) -> usize {
        self.table.len()
    }

    /// Packets arriving on `ifindex` get `in_port = port` in their key; their upcalls go
    /// to `xsks_map[xsk_base + rx queue]`.
    pub fn set_in_port(&mut self, ifindex: u32, port: u32, xsk_base: u32) -> io::Result<()> {
        let v = FpInPort {
            port,
            xsk_base: u16::try_from(xsk_base)
                .map_err(|_| err(format!("xsk_base {xsk_base} > 65535")))?,
            flags: INPORT_PRESENT,
        };
        if ifindex < INPORT_DIRECT {
            let mut m: Array<&mut MapData, FpInPort> = self.map("fp_inport")?;
            m.set(ifindex, v, 0)
        } else {
            let mut m: HashMap<&mut MapData, u32, FpInPort> = self.map("fp_inport_hash")?;
            m.insert(ifindex, v, 0)
        }
        .map_err(|e| err(format!("fp_inport[{ifindex}]: {e}")))
    }

    /// Output through devmap index `dev` goes to interface `ifindex`.
    pub fn set_output_dev(&mut self, dev: u32, ifindex: u32) -> io::Result<()> {
        let mut m: DevMap<&mut MapData> = self.map("fp_ports")?;
        m.set(dev, ifindex, None, 0)
            .map_err(|e| err(format!("fp_ports[{dev}]: {e}")))
    }

    /// Upcalls for `xsks_map[index]` (`xsk_base + rx queue`) go to the AF_XDP socket `fd`.
    pub fn register_xsk(&mut self, index: u32, fd: RawFd) -> io::Result<()> {
        let mut m: XskMap<&mut MapData> = self.map("xsks_map")?;
        m.set(index, fd, 0)
            .map_err(|e| err(format!("xsks_map[{index}]: {e}")))
    }

    /// Empty `xsks_map[index]` (upcalls there go to the kernel stack).
    pub fn unregister_xsk(&mut self, index: u32) -> io::Result<()> {
        let mut m: XskMap<&mut MapData> = self.map("xsks_map")?;
        m.unset(index)
            .map_err(|e| err(format!("xsks_map[{index}]: {e}")))
    }

    /// How the program is attached to `ifindex`, if it is.
    pub fn attached(&self, ifindex: u32) -> Option<Attached> {
        self.links
            .iter()
            .find(|(i, _, _)| *i == ifindex)
            .map(|(_, _, a)| *a)
    }

    /// A slot's counters summed over CPUs.
    pub fn stats(&self, slot: u32) -> io::Result<FpStat> {
        let m: PerCpuArray<&MapData, FpStat> = self.map_ro("fp_stats")?;
        let v = m
            .get(&slot, 0)
            .map_err(|e| err(format!("fp_stats[{slot}]: {e}")))?;
        Ok(sum_cpus(&v))
    }

    /// The counters of slots `first..first + out.len()`, each summed over CPUs, into
    /// `out` (slots past the table's end are left alone), with one `BPF_MAP_LOOKUP_BATCH`
    /// for the lot where [`FlowTier::stats`] takes a system call per slot. Hand-written:
    /// aya has no batch lookup, and the tier agent reads every tracked slot's counters
    /// again and again.
    pub fn stats_window(&self, first: u32, out: &mut [FpStat]) -> io::Result<()> {
        use std::os::fd::{AsFd, AsRawFd};
        let Some(aya::maps::Map::PerCpuArray(m)) = self.ebpf.map("fp_stats") else {
            return Err(err("object has no per-CPU map fp_stats"));
        };
        let n = out.len().min(MAX_FLOWS.saturating_sub(first) as usize);
        if n == 0 {
            return Ok(());
        }
        let cpus = aya::util::nr_cpus().map_err(|(what, e)| err(format!("{what}: {e}")))?;
        let mut keys = vec![0u32; n];
        let mut values = vec![FpStat::default(); n * cpus];
        // The batch starts after `in_batch` (none: from slot 0).
        let prev = first.wrapping_sub(1);
        let mut next = 0u32;
        let mut attr = BatchAttr {
            in_batch: if first == 0 {
                0
            } else {
                &prev as *const u32 as u64
            },
            out_batch: &mut next as *mut u32 as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: n as u32,
            map_fd: m.fd().as_fd().as_raw_fd() as u32,
            elem_flags: 0,
            flags: 0,
        };
        // SAFETY: `attr` is the kernel's `bpf_attr.batch` layout (the kernel zero-fills the
        // rest of the union); `keys` holds `count` keys and `values` `count` per-CPU
        // values (`fp_stat` is 16 bytes, a multiple of 8, times the possible CPUs).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_BATCH,
                &mut attr as *mut BatchAttr,
                std::mem::size_of::<BatchAttr>(),
            )
        };
        // ENOENT: the array ended before `count` (cannot happen: n is clamped to it).
        if rc != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT) {
            return Err(err(format!(
                "fp_stats: BPF_MAP_LOOKUP_BATCH from slot {first}: {}",
                io::Error::last_os_error()
            )));
        }
        let got = attr.count as usize;
        if got != n || keys.iter().enumerate().any(|(i, &k)| k != first + i as u32) {
            return Err(err(format!(
                "fp_stats: BPF_MAP_LOOKUP_BATCH from slot {first} gave {got} of {n} slots"
            )));
        }
        for (o, per_cpu) in out.iter_mut().zip(values.chunks_exact(cpus)) {
            *o = sum_cpus(per_cpu);
        }
        Ok(())
    }

    /// How many packets got each verdict (summed over CPUs), indexed by `Reason as usize`.
    pub fn reason_counts(&self) -> io::Result<[u64; Reason::COUNT]> {
        let m: PerCpuArray<&MapData, u64> = self.map_ro("fp_reasons")?;
        let mut out = [0u64; Reason::COUNT];
        for (i, o) in out.iter_mut().enumerate() {
            let v = m
                .get(&(i as u32), 0)
                .map_err(|e| err(format!("fp_reasons: {e}")))?;
            *o = v.iter().sum();
        }
        Ok(out)
    }

    /// The last packet's record (with [`FlowTier::set_debug`]).
    pub fn last_debug(&self) -> io::Result<FpDebug> {
        let m: Array<&MapData, FpDebug> = self.map_ro("fp_debug")?;
        m.get(&0, 0).map_err(|e| err(format!("fp_debug: {e}")))
    }

    /// Run the program once on `frame` as if it arrived on `ifindex`, rx queue 0, with
    /// `BPF_PROG_TEST_RUN` (not live: a redirect is only a return code, nothing is sent).
    /// `ifindex` must exist (the kernel checks); `lo` (1) will do.
    pub fn test_run(&self, frame: &[u8], ifindex: u32) -> io::Result<RunResult> {
        // Room for the frame to grow by a pushed tag (and then some).
        let mut out = vec![0u8; frame.len() + 64];
        let r = self.prog_test_run(frame, ifindex, 1, Some(&mut out))?;
        out.truncate(r.data_size_out as usize);
        Ok(RunResult {
            action: r.return_value,
            data: out,
        })
    }

    /// The program's mean time per run on `frame` over `repeat` runs of
    /// `BPF_PROG_TEST_RUN` (the kernel times the loop; nothing is sent): what parsing,
    /// the lookups and the actions cost, without the driver and the redirect.
    pub fn time_run(&self, frame: &[u8], ifindex: u32, repeat: u32) -> io::Result<Duration> {
        Ok(self
            .prog_test_run(frame, ifindex, repeat.max(1), None)?
            .duration)
    }

    fn prog_test_run(
        &self,
        frame: &[u8],
        ifindex: u32,
        repeat: u32,
        data_out: Option<&mut [u8]>,
    ) -> io::Result<aya::programs::TestRunResult> {
        let name = self.program;
        let prog: &Xdp = self
            .ebpf
            .program(name)
            .ok_or_else(|| err(format!("{name} missing")))?
            .try_into()
            .map_err(|e| err(format!("{name}: {e}")))?;
        // struct xdp_md { data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex }: data = metadata length (none), data_end = frame length.
        let md: [u32; 6] = [0, frame.len() as u32, 0, ifindex, 0, 0];
        prog.test_run(TestRunOptions {
            data_in: Some(frame),
            data_out,
            ctx_in: Some(bytemuck::cast_slice(&md)),
            repeat,
            ..TestRunOptions::new()
        })
        .map_err(|e| err(format!("BPF_PROG_TEST_RUN: {e}")))
    }

    /// Attach to `ifname` (Auto: native, then generic); says which mode it got.
    pub fn attach(&mut self, ifname: &str, mode: XdpMode) -> io::Result<Attached> {
        let idx = ifindex(ifname)?;
        let name = self.program;
        let p = program(&mut self.ebpf, name)?;
        let (id, a) = flowpath_xdpattach::attach_loaded(p, name, ifname, idx, mode)?;
        self.links.push((idx, id, a));
        Ok(a)
    }

    /// Detach from `ifname` (no-op if not attached there).
    pub fn detach(&mut self, ifname: &str) -> io::Result<()> {
        let idx = ifindex(ifname)?;
        let p = program(&mut self.ebpf, self.program)?;
        let mut keep = Vec::new();
        for (i, id, a) in self.links.drain(..) {
            if i == idx {
                p.detach(id).map_err(|e| err(format!("detach: {e}")))?;
            } else {
                keep.push((i, id, a));
            }
        }
        self.links = keep;
        Ok(())
    }

    /// Pin every map as `dir/<map name>` (dir on a bpffs, e.g.
    /// `/sys/fs/bpf/flowpath/<name>`; created if missing), so another program can share
    /// them (see docs/xdp-tier.md).
    pub fn pin_maps(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for (name, map) in self.ebpf.maps() {
            if name.starts_with('.') {
                continue; // .rodata/.bss of the object, not part of the contract
            }
            map.pin(dir.join(name))
                .map_err(|e| err(format!("pinning {name}: {e}")))?;
        }
        Ok(())
    }
}

/// The program `name` of the object.
fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> io::Result<&'a mut Xdp> {
    ebpf.program_mut(name)
        .ok_or_else(|| err(format!("{name} missing")))?
        .try_into()
        .map_err(|e| err(format!("{name}: {e}")))
}

impl Drop for FlowTier {
    fn drop(&mut self) {
        if let Some(p) = self.ebpf.program_mut(self.program) {
            if let Ok(x) = <&mut Xdp>::try_from(p) {
                for (_, id, _) in self.links.drain(..) {
                    let _ = x.detach(id);
                }
            }
        }
    }
}
