//! The XDP side of the AF_XDP port: loading the redirect-to-socket program, attaching it to
//! an interface (native or generic), the XSKMAP, and detaching on drop.
//!
//! One [`XskProgram`] serves every queue socket of an interface: [`XskProgram::get`] hands
//! out an `Arc` from a process-wide registry keyed by (network namespace, ifindex), each
//! [`crate::afxdp::AfXdpPort`] holds one, and the program is detached when the last port of
//! that interface is dropped.
//!
//! Stale programs: aya attaches through a BPF link, which the kernel removes when the owning
//! process exits, so a crashed flowpath leaves nothing behind. Programs attached the legacy
//! way (netlink, e.g. `ip link set dev X xdp obj ...`, older tools or the netlink fallback on
//! old kernels) do outlive their process; before attaching, [`XskProgram::get`] looks at the
//! interface over netlink and removes such a program if it is one of ours (`xsk_redirect`,
//! `xdp_pass`, `xdp_drop`). Anything else is reported, not removed; a program held by a live
//! process's link cannot be removed over netlink at all (the kernel answers EBUSY).

use aya::maps::{MapData, XskMap};
use aya::programs::{Xdp, XdpMode as AyaMode};
use aya::Ebpf;
use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The compiled programs (empty when the crate was built without clang).
static XSK_OBJ: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xsk_redirect.bpf.o"));
pub(crate) static GEN_OBJ: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gen_tx.bpf.o"));

/// Names of the programs flowpath attaches (and may therefore remove when stale): this
/// crate's, and the XDP tier's `flow_tier` (crates/xdptier).
const OUR_PROGRAMS: [&str; 6] = [
    "xsk_redirect",
    "xdp_pass",
    "xdp_drop",
    "xdp_fwd_all",
    "gen_tx",
    "flow_tier",
];

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

/// Before attaching a program of ours to `ifname`: remove a stale legacy-attached one of
/// ours (a dead flowpath's), refuse anyone else's (see the module documentation).
pub fn clear_stale_xdp(ifname: &str) -> io::Result<()> {
    clear_stale(ifname, ifindex(ifname)?)
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

/// Where an XDP program ended up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attached {
    /// Driver (native) mode.
    Native,
    /// Generic (SKB) mode.
    Generic,
}

impl Attached {
    pub fn as_str(self) -> &'static str {
        match self {
            Attached::Native => "native XDP",
            Attached::Generic => "generic XDP",
        }
    }
}

/// The interface index of `ifname` in the calling thread's network namespace.
pub fn ifindex(ifname: &str) -> io::Result<u32> {
    let c = CString::new(ifname).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface '{ifname}' in this network namespace"),
        ));
    }
    Ok(idx)
}

/// Load `prog` from `ebpf` and attach it to `ifindex` as `mode` asks (Auto: native, then
/// generic). Clears a stale program of ours first.
fn attach_prog(
    ebpf: &mut Ebpf,
    prog: &str,
    ifname: &str,
    ifindex: u32,
    mode: crate::XdpMode,
) -> io::Result<(aya::programs::xdp::XdpLinkId, Attached)> {
    clear_stale(ifname, ifindex)?;
    let p: &mut Xdp = ebpf
        .program_mut(prog)
        .ok_or_else(|| io::Error::other(format!("XDP object has no program {prog}")))?
        .try_into()
        .map_err(|e| io::Error::other(format!("{prog}: {e}")))?;
    p.load()
        .map_err(|e| io::Error::other(format!("loading {prog}: {e}")))?;
    attach_loaded(p, prog, ifname, ifindex, mode)
}

/// Attach a loaded XDP program to `ifindex` as `mode` asks (Auto: native, then generic):
/// the one attach path of the ports' programs and the XDP tier. Says which mode it got.
pub fn attach_loaded(
    p: &mut Xdp,
    prog: &str,
    ifname: &str,
    ifindex: u32,
    mode: crate::XdpMode,
) -> io::Result<(aya::programs::xdp::XdpLinkId, Attached)> {
    let tries: &[(AyaMode, Attached)] = match mode {
        crate::XdpMode::Auto => &[
            (AyaMode::Driver, Attached::Native),
            (AyaMode::Skb, Attached::Generic),
        ],
        crate::XdpMode::Native => &[(AyaMode::Driver, Attached::Native)],
        crate::XdpMode::Generic => &[(AyaMode::Skb, Attached::Generic)],
    };
    let mut last = String::new();
    for &(m, a) in tries {
        match p.attach_to_if_index(ifindex, m) {
            Ok(id) => return Ok((id, a)),
            Err(e) => last = format!("{} attach of {prog} to {ifname}: {e}", a.as_str()),
        }
    }
    Err(io::Error::other(last))
}

/// An XDP program attached to one interface, detached when dropped.
pub struct XdpGuard {
    ebpf: Ebpf,
    prog: &'static str,
    link: Option<aya::programs::xdp::XdpLinkId>,
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
    link: Option<aya::programs::xdp::XdpLinkId>,
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

/// What netlink says is attached to an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpAttachment {
    pub prog_id: u32,
    /// IFLA_XDP_ATTACHED: 1 driver, 2 generic (skb), 3 hardware, 4 several.
    pub mode: u8,
}

/// The XDP program attached to `ifname`, if any (netlink RTM_GETLINK).
pub fn attached_program(ifname: &str) -> io::Result<Option<XdpAttachment>> {
    nl::query(ifindex(ifname)?)
}

/// Remove whatever XDP program is attached to `ifname` the legacy (netlink) way, whoever
/// attached it; returns its id. Fails with EBUSY when a live process holds it by a link.
pub fn detach_xdp(ifname: &str) -> io::Result<Option<u32>> {
    let idx = ifindex(ifname)?;
    match nl::query(idx)? {
        None => Ok(None),
        Some(a) => {
            nl::detach(idx, a.mode)?;
            Ok(Some(a.prog_id))
        }
    }
}

/// Before attaching: remove a stale netlink-attached program of ours, refuse anyone else's.
fn clear_stale(ifname: &str, idx: u32) -> io::Result<()> {
    let Some(a) = nl::query(idx)? else {
        return Ok(());
    };
    let name = aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .find(|p| p.id() == a.prog_id)
        .and_then(|p| p.name_as_str().map(str::to_string))
        .unwrap_or_default();
    if !OUR_PROGRAMS.contains(&name.as_str()) {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "{ifname} already has XDP program id {} ('{name}'); remove it first \
                 (ip link set dev {ifname} xdp off)",
                a.prog_id
            ),
        ));
    }
    nl::detach(idx, a.mode).map_err(|e| {
        if e.raw_os_error() == Some(libc::EBUSY) {
            io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{ifname} has XDP program '{name}' (id {}) held by a running process \
                     (another flowpath?)",
                    a.prog_id
                ),
            )
        } else {
            io::Error::new(
                e.kind(),
                format!(
                    "removing stale XDP program {} from {ifname}: {e}",
                    a.prog_id
                ),
            )
        }
    })
}

/// Minimal rtnetlink: read IFLA_XDP of a link and detach a legacy-attached program.
/// Hand-written (plain `libc` sockets) because aya keeps its netlink helpers private and a
/// netlink crate would be a new dependency for two messages.
mod nl {
    use super::XdpAttachment;
    use std::io;

    const IFLA_XDP: u16 = 43;
    const IFLA_XDP_FD: u16 = 1;
    const IFLA_XDP_ATTACHED: u16 = 2;
    const IFLA_XDP_FLAGS: u16 = 3;
    const IFLA_XDP_PROG_ID: u16 = 4;
    const NLA_F_NESTED: u16 = 1 << 15;
    const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
    const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
    const XDP_FLAGS_HW_MODE: u32 = 1 << 3;

    struct Sock(i32);
    impl Drop for Sock {
        fn drop(&mut self) {
            // SAFETY: we own the fd.
            unsafe { libc::close(self.0) };
        }
    }

    fn open() -> io::Result<Sock> {
        // SAFETY: plain socket(2).
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Sock(fd))
    }

    /// nlmsghdr + ifinfomsg for `ifindex`, followed by `attrs`.
    fn message(ty: u16, flags: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
        let len = 16 + 16 + attrs.len();
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&flags.to_ne_bytes());
        m.extend_from_slice(&1u32.to_ne_bytes()); // seq
        m.extend_from_slice(&0u32.to_ne_bytes()); // pid
        m.extend_from_slice(&[0u8; 4]); // family, pad, type
        m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
        m.extend_from_slice(&[0u8; 8]); // flags, change
        m.extend_from_slice(attrs);
        m
    }

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let len = 4 + payload.len();
        let mut a = Vec::with_capacity((len + 3) & !3);
        a.extend_from_slice(&(len as u16).to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(payload);
        a.resize((len + 3) & !3, 0);
        a
    }

    fn exchange(msg: &[u8]) -> io::Result<Vec<u8>> {
        let s = open()?;
        // SAFETY: msg is a valid buffer; the kernel address is zeroed sockaddr_nl.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        let r = unsafe {
            libc::sendto(
                s.0,
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; 65536];
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::recv(s.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        if buf.len() >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == libc::NLMSG_ERROR as u16 {
            let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            if err != 0 {
                return Err(io::Error::from_raw_os_error(-err));
            }
        }
        Ok(buf)
    }

    /// Walk rtattrs in `b`, calling `f(type, payload)`.
    fn attrs(mut b: &[u8], mut f: impl FnMut(u16, &[u8])) {
        while b.len() >= 4 {
            let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
            let ty = u16::from_ne_bytes([b[2], b[3]]) & !NLA_F_NESTED;
            if len < 4 || len > b.len() {
                break;
            }
            f(ty, &b[4..len]);
            b = &b[((len + 3) & !3).min(b.len())..];
        }
    }

    pub fn query(ifindex: u32) -> io::Result<Option<XdpAttachment>> {
        let msg = message(libc::RTM_GETLINK, libc::NLM_F_REQUEST as u16, ifindex, &[]);
        let resp = exchange(&msg)?;
        if resp.len() < 32 || u16::from_ne_bytes([resp[4], resp[5]]) != libc::RTM_NEWLINK {
            return Err(io::Error::other("unexpected netlink answer to RTM_GETLINK"));
        }
        let len =
            (u32::from_ne_bytes([resp[0], resp[1], resp[2], resp[3]]) as usize).min(resp.len());
        let (mut mode, mut id) = (0u8, 0u32);
        attrs(&resp[32..len], |ty, p| {
            if ty == IFLA_XDP {
                attrs(p, |ty, p| match ty {
                    IFLA_XDP_ATTACHED if !p.is_empty() => mode = p[0],
                    IFLA_XDP_PROG_ID if p.len() >= 4 => {
                        id = u32::from_ne_bytes([p[0], p[1], p[2], p[3]])
                    }
                    _ => {}
                });
            }
        });
        Ok((mode != 0).then_some(XdpAttachment { prog_id: id, mode }))
    }

    pub fn detach(ifindex: u32, attached_mode: u8) -> io::Result<()> {
        let flags = match attached_mode {
            1 => XDP_FLAGS_DRV_MODE,
            2 => XDP_FLAGS_SKB_MODE,
            3 => XDP_FLAGS_HW_MODE,
            _ => 0,
        };
        let mut inner = attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
        inner.extend(attr(IFLA_XDP_FLAGS, &flags.to_ne_bytes()));
        let nest = attr(IFLA_XDP | NLA_F_NESTED, &inner);
        let msg = message(
            libc::RTM_SETLINK,
            (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16,
            ifindex,
            &nest,
        );
        exchange(&msg).map(|_| ())
    }
}
