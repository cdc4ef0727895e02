//! Running the tools the lab drives (`ip`, `ovs-vsctl`, ...): errors carry the command
//! line and its stderr, so a failed step says what failed.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A command line for `prog args...`, run inside network namespace `ns` when given.
pub fn cmd_in(ns: Option<&str>, prog: &str, args: &[&str]) -> Command {
    match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, prog]).args(args);
            c
        }
        None => {
            let mut c = Command::new(prog);
            c.args(args);
            c
        }
    }
}

fn describe(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Run to completion; stdout on success, `"cmd: stderr"` on failure.
pub fn output(mut c: Command) -> Result<String, String> {
    let line = describe(&c);
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{line}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        let err = if err.is_empty() {
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        } else {
            err.to_string()
        };
        Err(format!("`{line}` failed ({}): {err}", out.status))
    }
}

/// `output` of `prog args` in namespace `ns` (or here).
pub fn run(ns: Option<&str>, prog: &str, args: &[&str]) -> Result<String, String> {
    output(cmd_in(ns, prog, args))
}

/// `ip args...` (use `-n NS` in args for another namespace).
pub fn ip(args: &[&str]) -> Result<String, String> {
    run(None, "ip", args)
}

/// Is `prog` an executable on PATH (or a path that exists)?
pub fn which(prog: &str) -> Option<std::path::PathBuf> {
    if prog.contains('/') {
        let p = std::path::PathBuf::from(prog);
        return p.exists().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Spawn a long-running process in a process group of its own (so stopping it stops
/// what it forks, e.g. trafgen's workers); it gets SIGKILL if the lab dies without
/// cleaning up (the lab spawns from its main thread only, which the parent-death signal
/// watches).
pub fn spawn(mut c: Command, stdout: Stdio, stderr: Stdio) -> Result<Child, String> {
    let line = describe(&c);
    c.process_group(0);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = c
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("{line}: {e}"))?;
    crate::registry::register_pid(child.id());
    Ok(child)
}

/// Send `sig` to `pid`, ignoring a process that is already gone.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid we started; a stale pid at worst gets ESRCH.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Send `sig` to the process group `pid` leads (and to `pid` itself, in case it left it).
pub fn signal_group(pid: u32, sig: i32) {
    // SAFETY: as `signal`; a negative pid names the process group.
    unsafe {
        libc::kill(-(pid as libc::pid_t), sig);
    }
    signal(pid, sig);
}

/// Stop a child and its process group: `sig`, then SIGKILL after `grace` (and to any
/// straggler of the group at once); reap it.
pub fn stop(child: &mut Child, sig: i32, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        crate::registry::unregister_pid(child.id());
        return;
    }
    signal_group(child.id(), sig);
    let t = Instant::now();
    let mut exited = false;
    while t.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Whatever is left of the group (the leader, or children it did not take along).
    signal_group(child.id(), libc::SIGKILL);
    if !exited {
        let _ = child.wait();
    }
    crate::registry::unregister_pid(child.id());
}

/// Poll `f` every 50 ms until it gives `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if t.elapsed() >= timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sleep `d`, waking early (returning false) when the lab was interrupted.
pub fn sleep(d: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < d {
        if crate::registry::interrupted() {
            return false;
        }
        std::thread::sleep((d - t.elapsed()).min(Duration::from_millis(50)));
    }
    !crate::registry::interrupted()
}
