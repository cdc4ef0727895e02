//! Attaching XDP programs to interfaces (native or generic mode) and reading, detaching and
//! clearing stale ones over rtnetlink: the one attach path of the ports and the XDP tier.
//!
//! A crate of its own so that the XDP tier attaches its program the way the ports attach
//! theirs without depending on the ports crate.
//!
//! Stale programs: aya attaches through a BPF link, which the kernel removes when the owning
//! process exits, so a crashed flowpath leaves nothing behind. Programs attached the legacy
//! way (netlink, e.g. `ip link set dev X xdp obj ...`, older tools or aya's netlink fallback
//! on old kernels) do outlive their process; [`clear_stale_xdp`] looks at the interface over
//! netlink and removes such a program if it is one of ours ([`OUR_PROGRAMS`]). Anything else
//! is reported, not removed; a program held by a live process's link cannot be removed over
//! netlink at all (the kernel answers EBUSY).

use aya::programs::{Xdp, XdpMode as AyaMode};
use serde::Deserialize;
use std::ffi::CString;
use std::io;

mod nl;

pub use aya::programs::xdp::XdpLinkId;

/// Names of the programs flowpath attaches (and may therefore remove when stale): the
/// ports' (crates/ports/bpf) and the XDP tier's `flow_tier` (crates/xdptier/bpf).
pub const OUR_PROGRAMS: [&str; 6] = [
    "xsk_redirect",
    "xdp_pass",
    "xdp_drop",
    "xdp_fwd_all",
    "gen_tx",
    "flow_tier",
];

/// Where the XDP program is attached.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Driver (native) mode where the interface supports it, generic otherwise.
    #[default]
    Auto,
    Native,
    Generic,
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

/// Attach a loaded XDP program to `ifindex` as `mode` asks (Auto: native, then generic):
/// through a BPF link where the kernel has them, else aya's netlink fallback. Says which
/// mode it got.
pub fn attach_loaded(
    p: &mut Xdp,
    prog: &str,
    ifname: &str,
    ifindex: u32,
    mode: XdpMode,
) -> io::Result<(XdpLinkId, Attached)> {
    let tries: &[(AyaMode, Attached)] = match mode {
        XdpMode::Auto => &[
            (AyaMode::Driver, Attached::Native),
            (AyaMode::Skb, Attached::Generic),
        ],
        XdpMode::Native => &[(AyaMode::Driver, Attached::Native)],
        XdpMode::Generic => &[(AyaMode::Skb, Attached::Generic)],
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

/// Before attaching a program of ours to `ifname`: remove a stale legacy-attached one of
/// ours (a dead flowpath's), refuse anyone else's (see the crate documentation).
pub fn clear_stale_xdp(ifname: &str) -> io::Result<()> {
    let idx = ifindex(ifname)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_no_program_and_unknown_names_are_not_found() {
        assert_eq!(attached_program("lo").unwrap(), None);
        let e = ifindex("no-such-if0").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
