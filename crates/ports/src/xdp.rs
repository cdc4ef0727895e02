//! The XDP side of the AF_XDP port: loading the redirect-to-socket program, attaching it to
//! an interface (native or generic), the XSKMAP, and detaching on drop.
//!
//! One [`XskProgram`] serves every queue socket of an interface: [`XskProgram::get`] hands
//! out an `Arc` from a process-wide registry keyed by (network namespace, ifindex), each
//! [`crate::afxdp::AfXdpPort`] holds one, and the program is detached when the last port of
//! that interface is dropped.
//!
//! Attaching, and the interface's XDP state over netlink, are `flowpath-xdpattach`'s (shared
//! with the XDP tier); its names are re-exported here. Before attaching, every program of
//! this module first clears a stale legacy-attached program of ours from the interface
//! ([`clear_stale_xdp`]: a dead flowpath's is removed, anyone else's refused).

use aya::maps::{MapData, XskMap};
use aya::programs::Xdp;
use aya::Ebpf;
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use flowpath_xdpattach::XdpLinkId;
pub use flowpath_xdpattach::{
    attach_loaded, attached_program, clear_stale_xdp, detach_xdp, ifindex, Attached, XdpAttachment,
};

/// The compiled programs (empty when the crate was built without clang).
static XSK_OBJ: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xsk_redirect.bpf.o"));
pub(crate) static GEN_OBJ: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gen_tx.bpf.o"));

/// Whoever owns the XDP program and XSKMAP an AF_XDP socket is steered through. By default
/// each interface gets its own [`XskProgram`]; the XDP tier (one program and one XSKMAP for
/// every interface) supplies its own, see [`crate::afxdp::AfXdpPort::open_with`].
pub trait XskRegistrar: Send + Sync {
    /// Steer frames arriving on rx queue `queue` of `ifindex` to the XDP socket `fd`.
    fn register(&self, ifindex: u32, queue: u32, fd: RawFd) -> io::Result<()>;
    /// Stop steering them (the socket is about to close).
    fn unregister(&self, ifindex: u32, queue: u32);
    /// How the program is attached to `ifindex`, and by whom, for port info
    /// (e.g. "native XDP").
    fn describe(&self, ifindex: u32) -> String;
}

impl XskRegistrar for XskProgram {
    fn register(&self, _ifindex: u32, queue: u32, fd: RawFd) -> io::Result<()> {
        XskProgram::register(self, queue, fd)
    }
    fn unregister(&self, _ifindex: u32, queue: u32) {
        XskProgram::unregister(self, queue)
    }
    fn describe(&self, _ifindex: u32) -> String {
        self.mode.as_str().to_string()
    }
}

/// Whether the XDP objects were compiled in (clang was present at build time).
pub fn bpf_available() -> bool {
    !XSK_OBJ.is_empty() && !GEN_OBJ.is_empty()
}

/// Load one of the embedded objects, or say why it cannot be.
pub(crate) fn load_object(obj: &[u8]) -> io::Result<Ebpf> {
    if obj.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "flowpath was built without clang; install clang and libbpf-dev and rebuild",
        ));
    }
    Ebpf::load(obj).map_err(|e| io::Error::other(format!("loading XDP object: {e}")))
}

/// Load `prog` from `ebpf` and attach it to `ifindex` as `mode` asks (Auto: native, then
/// generic). Clears a stale program of ours first.
fn attach_prog(
    ebpf: &mut Ebpf,
    prog: &str,
    ifname: &str,
    ifindex: u32,
    mode: crate::XdpMode,
) -> io::Result<(XdpLinkId, Attached)> {
    clear_stale_xdp(ifname)?;
    let p: &mut Xdp = ebpf
        .program_mut(prog)
        .ok_or_else(|| io::Error::other(format!("XDP object has no program {prog}")))?
        .try_into()
        .map_err(|e| io::Error::other(format!("{prog}: {e}")))?;
    p.load()
        .map_err(|e| io::Error::other(format!("loading {prog}: {e}")))?;
    attach_loaded(p, prog, ifname, ifindex, mode)
}

/// An XDP program attached to one interface, detached when dropped.
pub struct XdpGuard {
    ebpf: Ebpf,
    prog: &'static str,
    link: Option<XdpLinkId>,
    ifname: String,
    mode: Attached,
}

impl XdpGuard {
    pub fn mode(&self) -> Attached {
        self.mode
    }
    pub fn interface(&self) -> &str {
        &self.ifname
    }
}

impl Drop for XdpGuard {
    fn drop(&mut self) {
        if let (Some(id), Some(p)) = (self.link.take(), self.ebpf.program_mut(self.prog)) {
            if let Ok(x) = <&mut Xdp>::try_from(p) {
                let _ = x.detach(id);
            }
        }
    }
}

fn attach_simple(ifname: &str, prog: &'static str, mode: crate::XdpMode) -> io::Result<XdpGuard> {
    attach_with(ifname, prog, mode, |_| Ok(()))
}

/// Load our object, let `setup` fill its maps, attach `prog` to `ifname`.
fn attach_with(
    ifname: &str,
    prog: &'static str,
    mode: crate::XdpMode,
    setup: impl FnOnce(&mut Ebpf) -> io::Result<()>,
) -> io::Result<XdpGuard> {
    let idx = ifindex(ifname)?;
    let mut ebpf = load_object(XSK_OBJ)?;
    setup(&mut ebpf)?;
    let (link, mode) = attach_prog(&mut ebpf, prog, ifname, idx, mode)?;
    Ok(XdpGuard {
        ebpf,
        prog,
        link: Some(link),
        ifname: ifname.to_string(),
        mode,
    })
}

/// Attach a program that passes every frame to the stack, natively where possible. On a veth
/// this is what makes the peer's XDP_TX / redirects (and `LiveFrameTx`) arrive at all.
pub fn attach_xdp_pass(ifname: &str) -> io::Result<XdpGuard> {
    attach_simple(ifname, "xdp_pass", crate::XdpMode::Auto)
}

/// Attach a program that drops every frame (a sink for measuring transmitters).
pub fn attach_xdp_drop(ifname: &str) -> io::Result<XdpGuard> {
    attach_simple(ifname, "xdp_drop", crate::XdpMode::Auto)
}

/// Attach a program that redirects every frame arriving on `from` to `to` (a devmap, no
/// parsing, no lookup), natively where possible: the cheapest XDP forwarding there is, the
/// baseline `flowpath lab` measures the XDP tier against. On a veth `to`, the frames arrive
/// only if `to`'s peer has an XDP program (see docs/xdp-tier.md).
pub fn attach_xdp_forward(from: &str, to: &str) -> io::Result<XdpGuard> {
    let out = ifindex(to)?;
    attach_with(from, "xdp_fwd_all", crate::XdpMode::Auto, |ebpf| {
        let map = ebpf
            .map_mut("fwd_to")
            .ok_or_else(|| io::Error::other("XDP object has no map fwd_to"))?;
        let mut devmap: aya::maps::DevMap<&mut MapData> = map
            .try_into()
            .map_err(|e| io::Error::other(format!("fwd_to: {e}")))?;
        devmap
            .set(0, out, None, 0)
            .map_err(|e| io::Error::other(format!("fwd_to[0] = {to}: {e}")))
    })
}

struct XskInner {
    ebpf: Ebpf,
    map: XskMap<MapData>,
    link: Option<XdpLinkId>,
}

/// The redirect-to-socket program on one interface, shared by all its queue sockets.
pub struct XskProgram {
    inner: Mutex<XskInner>,
    ifname: String,
    ifindex: u32,
    mode: Attached,
    key: (u64, u64, u32),
}

type Registry = Mutex<HashMap<(u64, u64, u32), Weak<XskProgram>>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// (device, inode) of the calling thread's network namespace.
fn netns_id() -> io::Result<(u64, u64)> {
    let md = std::fs::metadata("/proc/thread-self/ns/net")?;
    use std::os::unix::fs::MetadataExt;
    Ok((md.dev(), md.ino()))
}

impl XskProgram {
    /// The program on `ifname` (in the calling thread's namespace), attaching it first if no
    /// port of this process has yet.
    pub fn get(ifname: &str, mode: crate::XdpMode) -> io::Result<Arc<XskProgram>> {
        let idx = ifindex(ifname)?;
        let (dev, ino) = netns_id()?;
        let key = (dev, ino, idx);
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = reg.get(&key).and_then(Weak::upgrade) {
            return Ok(p);
        }
        let mut ebpf = load_object(XSK_OBJ)?;
        let (link, attached) = attach_prog(&mut ebpf, "xsk_redirect", ifname, idx, mode)?;
        let map = ebpf
            .take_map("xsks_map")
            .ok_or_else(|| io::Error::other("XDP object has no xsks_map"))?;
        let map = XskMap::try_from(map).map_err(|e| io::Error::other(format!("xsks_map: {e}")))?;
        let p = Arc::new(XskProgram {
            inner: Mutex::new(XskInner {
                ebpf,
                map,
                link: Some(link),
            }),
            ifname: ifname.to_string(),
            ifindex: idx,
            mode: attached,
            key,
        });
        reg.retain(|_, w| w.strong_count() > 0);
        reg.insert(key, Arc::downgrade(&p));
        Ok(p)
    }

    /// Steer frames arriving on `queue` to the XDP socket `fd`.
    pub fn register(&self, queue: u32, fd: RawFd) -> io::Result<()> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.map
            .set(queue, fd, 0)
            .map_err(|e| io::Error::other(format!("xsks_map[{queue}]: {e}")))
    }

    /// Stop steering `queue` (frames go to the stack again).
    pub fn unregister(&self, queue: u32) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let _ = g.map.unset(queue);
    }

    pub fn mode(&self) -> Attached {
        self.mode
    }
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
    pub fn interface(&self) -> &str {
        &self.ifname
    }
}

impl Drop for XskProgram {
    fn drop(&mut self) {
        let g = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        if let (Some(id), Some(p)) = (g.link.take(), g.ebpf.program_mut("xsk_redirect")) {
            if let Ok(x) = <&mut Xdp>::try_from(p) {
                let _ = x.detach(id);
            }
        }
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        if reg.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
            reg.remove(&self.key);
        }
    }
}
