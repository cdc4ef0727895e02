//! What this run created and must undo (processes, namespaces, mounts, directories, global
//! settings it changed), and whether it was interrupted. Plain bookkeeping, below the shell
//! helpers that register what they start; the teardown that empties it is in
//! [`crate::teardown`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) namespaces: Vec<String>,
    pub(crate) pids: Vec<u32>,
    pub(crate) mounts: Vec<PathBuf>,
    pub(crate) dirs: Vec<PathBuf>,
    pub(crate) hugepages_restore: Option<u64>,
    /// Global settings (e.g. sysctls) to write back: (path, original content).
    pub(crate) restore_files: Vec<(PathBuf, String)>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub(crate) fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Registry::default))
}

/// Everything registered so far, leaving the registry empty (None: nothing was).
pub(crate) fn take() -> Option<Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// Remember a process to kill at cleanup.
pub fn register_pid(pid: u32) {
    with_registry(|r| r.pids.push(pid));
}

/// Forget a process that was stopped and reaped.
pub fn unregister_pid(pid: u32) {
    with_registry(|r| r.pids.retain(|&p| p != pid));
}

/// Remember a namespace to delete at cleanup.
pub(crate) fn register_namespace(ns: &str) {
    with_registry(|r| r.namespaces.push(ns.to_string()));
}

/// Remember a mount point to unmount (and remove) at cleanup.
pub fn register_mount(p: &Path) {
    with_registry(|r| r.mounts.push(p.to_path_buf()));
}

/// Forget a mount point that was unmounted.
pub fn unregister_mount(p: &Path) {
    with_registry(|r| r.mounts.retain(|m| m != p));
}

/// Forget the huge-page count to restore (it was restored).
pub fn take_hugepages_restore() -> Option<u64> {
    with_registry(|r| r.hugepages_restore.take())
}

/// Write `value` into a global setting file (a sysctl), remembering the original to put
/// back at cleanup or by `restore_file`.
pub fn set_file(path: &Path, value: &str) -> Result<(), String> {
    let orig = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    with_registry(|r| {
        if !r.restore_files.iter().any(|(p, _)| p == path) {
            r.restore_files
                .push((path.to_path_buf(), orig.trim().to_string()));
        }
    });
    std::fs::write(path, value).map_err(|e| format!("{}: {e}", path.display()))
}

/// Put back what `set_file` changed at `path`.
pub fn restore_file(path: &Path) {
    let orig = with_registry(|r| {
        let i = r.restore_files.iter().position(|(p, _)| p == path)?;
        Some(r.restore_files.remove(i).1)
    });
    if let Some(v) = orig {
        let _ = std::fs::write(path, v);
    }
}

/// Remember a directory to remove at cleanup.
pub fn register_dir(p: &Path) {
    with_registry(|r| r.dirs.push(p.to_path_buf()));
}

/// Remember the huge-page count to put back at cleanup (the first one registered wins).
pub fn register_hugepages_restore(n: u64) {
    with_registry(|r| {
        r.hugepages_restore.get_or_insert(n);
    });
}

/// Was the lab interrupted (SIGINT/SIGTERM)?
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Mark the lab interrupted (the signal thread, before it tears down).
pub(crate) fn set_interrupted() {
    INTERRUPTED.store(true, Ordering::Relaxed);
}
