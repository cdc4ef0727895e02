//! flow_mod rate: N distinct ADDs over one connection with one barrier at the end, and
//! `ovs-ofctl add-flows` (a barrier after every flow_mod), against flowpath in-process and
//! a private ovs-vswitchd.

use super::client::{bench_flow_text, blast, Client};
use super::inprocess::InProcess;
use super::ovs::{flow_count_of, PrivateOvs};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// One timed run.
pub struct Sample {
    pub secs: f64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Rules in the switch afterwards.
    pub rules: u64,
}

/// flowpath in-process, a fresh switch (with a state file in `state_dir` if given).
pub fn flowpath_blast(bytes: &[u8], state_dir: Option<&Path>) -> Result<Sample, String> {
    let fp = InProcess::start(state_dir)?;
    let c = Client::connect(fp.addr)?;
    let b = blast(c, bytes)?;
    Ok(Sample {
        secs: b.elapsed.as_secs_f64(),
        errors: b.errors,
        first_error: b.first_error,
        rules: fp.sw.store().snapshot().rules().count() as u64,
    })
}

/// The private OVS: flows deleted first (not timed).
pub fn ovs_blast(ovs: &PrivateOvs, bytes: &[u8]) -> Result<Sample, String> {
    ovs.del_flows()?;
    let c = Client::connect(ovs.addr)?;
    let b = blast(c, bytes)?;
    Ok(Sample {
        secs: b.elapsed.as_secs_f64(),
        errors: b.errors,
        first_error: b.first_error,
        rules: ovs.flow_count()?,
    })
}

/// Write the `ovs-ofctl` flows file of `n` flows.
pub fn write_flows_file(path: &Path, n: u32) -> Result<(), String> {
    let mut s = String::with_capacity(n as usize * 64);
    for i in 0..n {
        s.push_str(&bench_flow_text(i));
        s.push('\n');
    }
    std::fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))
}

/// Time `ovs-ofctl -O OpenFlow13 add-flows tcp:ADDR FILE` (the whole process: it parses
/// the file, connects, and sends each flow_mod followed by a barrier, waiting for it).
fn time_ofctl(
    addr: std::net::SocketAddr,
    file: &Path,
) -> Result<(f64, u64, Option<String>), String> {
    let t0 = Instant::now();
    let o = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "add-flows", &format!("tcp:{addr}")])
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ovs-ofctl: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    if o.status.success() {
        Ok((secs, 0, None))
    } else {
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        Ok((secs, 1, Some(err)))
    }
}

pub fn flowpath_ofctl(file: &Path, state_dir: Option<&Path>) -> Result<Sample, String> {
    let fp = InProcess::start(state_dir)?;
    let (secs, errors, first_error) = time_ofctl(fp.addr, file)?;
    Ok(Sample {
        secs,
        errors,
        first_error,
        rules: fp.sw.store().snapshot().rules().count() as u64,
    })
}

pub fn ovs_ofctl(ovs: &PrivateOvs, file: &Path) -> Result<Sample, String> {
    ovs.del_flows()?;
    let (secs, errors, first_error) = time_ofctl(ovs.addr, file)?;
    Ok(Sample {
        secs,
        errors,
        first_error,
        rules: flow_count_of(&ovs.ofctl("dump-aggregate", &[])?)?,
    })
}
