//! The state file: the configured flows, in flow syntax, replaced atomically.
//!
//! A save writes the whole rule set to a temporary file (mode 0600) in the same directory
//! (created mode 0700), flushes it to disk, renames it over the state file and flushes the
//! directory. A rename within one file system is atomic, so a crash at any point leaves
//! either the old file or the new one, never a mix; the header and trailer lines (with the
//! flow count) also catch a file that was truncated some other way (a copy, a full disk).
//! A file that does not load stops the switch with its name, the place and the way out;
//! it is never taken for an empty rule set. This is a few dozen lines of std, so it is
//! written here rather than pulled in from a crate.

use flowpath_flowsyntax::{format_actions, format_flow, parse_flow, FlowCommand};
use flowpath_pipeline::{Bucket, GroupSpec, GroupType, Match, RuleSpec};
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const HEADER: &str = "# flowpath flow state v1";
const HEADER_ANY: &str = "# flowpath flow state v";
const GENERATION: &str = "# generation: ";

/// Why a state file could not be loaded.
#[derive(Debug)]
pub enum StateError {
    Io(PathBuf, io::Error),
    /// Not a state file this flowpath loads (garbage, another program's file, a truncated
    /// or torn file, a newer format, a flow line that does not parse). `at` names the
    /// place: `line 3` (the message then names the column), `byte 17`.
    Corrupt {
        path: PathBuf,
        at: String,
        message: String,
    },
    /// The file or its directory is open to other users in a way the switch does not
    /// repair by itself (a directory others may write to).
    Unsafe(PathBuf, String),
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Io(p, e) => write!(f, "state file {}: {e}", p.display()),
            StateError::Corrupt { path, at, message } => {
                let p = path.display();
                let (what, lost) = match path.extension() {
                    Some(e) if e == "journal" => ("journal", "the flows it added"),
                    _ => ("state file", "its flows"),
                };
                write!(
                    f,
                    "{what} {p} {at}: {message}; the switch did not start (the file is left \
                     as it is): move it aside (`mv {p} {p}.bad`) to start without {lost}, \
                     or start with --no-state to keep flows in memory only"
                )
            }
            StateError::Unsafe(p, why) => write!(
                f,
                "state file {}: {why}; the switch did not start (choose a directory only \
                 its user can write, or start with --no-state)",
                p.display()
            ),
        }
    }
}

impl std::error::Error for StateError {}

/// Where the configured flows live between runs.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    /// The generation of the file as last loaded or saved (each save writes one more);
    /// the journal names the generation it continues, so a journal older than the file is
    /// known as such.
    generation: AtomicU64,
}

impl Clone for StateFile {
    fn clone(&self) -> Self {
        StateFile {
            path: self.path.clone(),
            generation: AtomicU64::new(self.generation()),
        }
    }
}

impl StateFile {
    pub fn new(path: impl Into<PathBuf>) -> StateFile {
        StateFile {
            path: path.into(),
            generation: AtomicU64::new(0),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory holding the file (`.` for a bare name).
    pub fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The saved flows; no file yet means no flows.
    pub fn load(&self) -> Result<Vec<RuleSpec>, StateError> {
        Ok(self.load_all()?.0)
    }

    /// The saved groups and flows (groups first: flows may name them). Checks the file's
    /// and its directory's modes first (see [`StateFile::check_access`]).
    pub fn load_all(&self) -> Result<(Vec<RuleSpec>, Vec<GroupSpec>), StateError> {
        if let Some(note) = self.check_access()? {
            eprintln!("flowpath: {note}");
        }
        self.remove_stale_temporaries();
        let bytes = match fs::read(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
            Err(e) => return Err(StateError::Io(self.path.clone(), e)),
        };
        let corrupt = |at: String, message: String| StateError::Corrupt {
            path: self.path.clone(),
            at,
            message,
        };
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            corrupt(
                format!("byte {}", e.valid_up_to()),
                "not text (invalid UTF-8): not a flowpath state file".into(),
            )
        })?;
        let parsed = parse_state_all(text)
            .map_err(|(line, message)| corrupt(format!("line {line}"), message))?;
        self.generation
            .store(generation_of(text), Ordering::Release);
        Ok(parsed)
    }

    /// The file and its directory must not be open to other users: a state file readable
    /// or writable by group or others is set to 0600 (the returned note says so); a
    /// directory that group or others may write to (without the sticky bit) is refused,
    /// since anyone could replace the file in it. A directory others may only read is
    /// left alone: the file's own mode keeps its contents private.
    pub fn check_access(&self) -> Result<Option<String>, StateError> {
        let dir = self.dir();
        match fs::metadata(&dir) {
            Ok(m) => {
                let mode = m.permissions().mode();
                if mode & 0o022 != 0 && mode & 0o1000 == 0 {
                    return Err(StateError::Unsafe(
                        self.path.clone(),
                        format!(
                            "its directory {} is writable by other users (mode {:04o})",
                            dir.display(),
                            mode & 0o7777
                        ),
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::Io(dir, e)),
        }
        let mode = match fs::symlink_metadata(&self.path) {
            Ok(m) if m.is_file() => m.permissions().mode(),
            Ok(_) => {
                return Err(StateError::Unsafe(
                    self.path.clone(),
                    "not a regular file".into(),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::Io(self.path.clone(), e)),
        };
        if mode & 0o077 == 0 {
            return Ok(None);
        }
        fs::set_permissions(&self.path, fs::Permissions::from_mode(0o600))
            .map_err(|e| StateError::Io(self.path.clone(), e))?;
        Ok(Some(format!(
            "state file {} was open to other users (mode {:04o}); set to 0600",
            self.path.display(),
            mode & 0o7777
        )))
    }

    /// Remove the temporary files of saves that a crash interrupted (`.NAME.tmp.PID`
    /// beside the file): one switch owns a state file, so at its start none is in use.
    fn remove_stale_temporaries(&self) {
        let Some(name) = self.path.file_name() else {
            return;
        };
        let prefix = format!(".{}.tmp.", name.to_string_lossy());
        let Ok(entries) = fs::read_dir(self.dir()) else {
            return;
        };
        for e in entries.flatten() {
            let n = e.file_name();
            let stale = n
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
            if stale {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    /// Replace the saved flows with `specs`, atomically (see the module documentation).
    pub fn save(&self, specs: &[&RuleSpec]) -> io::Result<()> {
        self.save_all(specs, &[])
    }

    /// Replace the saved flows and groups, atomically, as the next generation.
    pub fn save_all(&self, specs: &[&RuleSpec], groups: &[&GroupSpec]) -> io::Result<()> {
        let generation = self.generation() + 1;
        let text = render_generation(specs, groups, generation);
        let dir = self.dir();
        create_private_dir(&dir)?;
        let name = self.path.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "state path has no file name")
        })?;
        let tmp = dir.join(format!(
            ".{}.tmp.{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        // A temporary file left by an earlier process with this id (a crash) goes first:
        // it is created anew, never opened through whatever is at its name.
        let _ = fs::remove_file(&tmp);
        let result = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            drop(f);
            fs::rename(&tmp, &self.path)?;
            // Make the rename itself durable.
            File::open(&dir)?.sync_all()
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        } else {
            self.generation.store(generation, Ordering::Release);
        }
        result
    }
}

/// Create `dir` (and its missing parents) mode 0700; an existing one is left as it is.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The generation a state file's text names (0 for a file without one).
fn generation_of(text: &str) -> u64 {
    text.lines()
        .nth(1)
        .and_then(|l| l.strip_prefix(GENERATION))
        .and_then(|g| g.trim().parse().ok())
        .unwrap_or(0)
}

/// The state file's text for `specs`.
pub fn render_state(specs: &[&RuleSpec]) -> String {
    render_state_all(specs, &[])
}

/// The state file's text for `specs` and `groups`. Groups come first, one per line
/// (`group group_id=1,type=select bucket=weight:100,actions=output:1 bucket=...`), so that
/// the flows naming them load after them; the end line counts both.
pub fn render_state_all(specs: &[&RuleSpec], groups: &[&GroupSpec]) -> String {
    render_generation(specs, groups, 0)
}

/// [`render_state_all`] with a generation line (none for generation 0).
fn render_generation(specs: &[&RuleSpec], groups: &[&GroupSpec], generation: u64) -> String {
    let mut out = String::with_capacity(64 + specs.len() * 80);
    let _ = writeln!(out, "{HEADER}: {} flows", specs.len());
    if generation != 0 {
        let _ = writeln!(out, "{GENERATION}{generation}");
    }
    for g in groups {
        out.push_str(&format_group(g));
        out.push('\n');
    }
    for s in specs {
        out.push_str(&format_flow(s));
        out.push('\n');
    }
    if groups.is_empty() {
        let _ = writeln!(out, "# end: {} flows", specs.len());
    } else {
        let _ = writeln!(out, "# end: {} flows, {} groups", specs.len(), groups.len());
    }
    out
}

const GROUP_PREFIX: &str = "group group_id=";

/// One group as a state-file line.
fn format_group(g: &GroupSpec) -> String {
    let kind = match g.kind {
        GroupType::All => "all",
        GroupType::Select => "select",
        GroupType::Indirect => "indirect",
        GroupType::FastFailover => "fast_failover",
    };
    let mut s = format!("{GROUP_PREFIX}{},type={kind}", g.id);
    for b in &g.buckets {
        let spec = RuleSpec::new(0, 0, Match::any()).actions(b.actions.iter().copied());
        let _ = write!(
            s,
            " bucket=weight:{},watch_port:{},watch_group:{},actions={}",
            b.weight,
            b.watch_port,
            b.watch_group,
            format_actions(&spec)
        );
    }
    s
}

/// Parse a [`format_group`] line.
fn parse_group(line: &str) -> Result<GroupSpec, String> {
    let rest = line
        .strip_prefix(GROUP_PREFIX)
        .ok_or_else(|| "not a group line".to_string())?;
    let mut parts = rest.split(" bucket=");
    let head = parts.next().unwrap_or_default();
    let (id, kind) = head
        .split_once(",type=")
        .ok_or_else(|| format!("group '{head}': expected group_id=N,type=T"))?;
    let id: u32 = id
        .parse()
        .map_err(|_| format!("group_id '{id}' is not a number"))?;
    let kind = match kind {
        "all" => GroupType::All,
        "select" => GroupType::Select,
        "indirect" => GroupType::Indirect,
        "fast_failover" => GroupType::FastFailover,
        k => return Err(format!("group {id}: unknown type '{k}'")),
    };
    let mut buckets = Vec::new();
    for b in parts {
        let (params, actions) = b
            .split_once(",actions=")
            .ok_or_else(|| format!("group {id}: bucket '{b}' has no actions="))?;
        let mut bucket = Bucket::new(Vec::new());
        for kv in params.split(',') {
            let (k, v) = kv
                .split_once(':')
                .ok_or_else(|| format!("group {id}: bucket field '{kv}'"))?;
            let v: u32 = v
                .parse()
                .map_err(|_| format!("group {id}: bucket {k} '{v}' is not a number"))?;
            match k {
                "weight" => bucket.weight = v.min(u16::MAX as u32) as u16,
                "watch_port" => bucket.watch_port = v,
                "watch_group" => bucket.watch_group = v,
                _ => return Err(format!("group {id}: unknown bucket field '{k}'")),
            }
        }
        let f = parse_flow(&format!("actions={actions}"), FlowCommand::Add)
            .map_err(|e| format!("group {id}: bucket actions: {e}"))?;
        bucket.actions = f.spec.actions;
        buckets.push(bucket);
    }
    Ok(GroupSpec::new(id, kind, buckets))
}

/// Parse a state file's text; errors are (line, reason), the line 1-based.
pub fn parse_state(text: &str) -> Result<Vec<RuleSpec>, (usize, String)> {
    Ok(parse_state_all(text)?.0)
}

/// The header's flow count, or why the first line is not a header this flowpath reads.
fn parse_header(text: &str) -> Result<usize, (usize, String)> {
    let first = text.lines().next().unwrap_or_default();
    if text.is_empty() {
        return Err((1, "the file is empty (truncated?)".into()));
    }
    if let Some(rest) = first.strip_prefix(HEADER) {
        return rest
            .strip_prefix(": ")
            .and_then(|r| r.strip_suffix(" flows"))
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or((1, format!("bad header line '{}'", clip(first))));
    }
    if let Some(rest) = first.strip_prefix(HEADER_ANY) {
        let version: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        return Err((
            1,
            format!("state format v{version}; this flowpath reads v1 (a newer flowpath wrote it?)"),
        ));
    }
    Err((
        1,
        format!(
            "does not start with '{HEADER}' (it starts '{}'): not a flowpath state file",
            clip(first)
        ),
    ))
}

/// At most 40 characters of `s`, for quoting a line in an error.
fn clip(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

/// Parse a state file's text: its flows and groups.
#[allow(clippy::type_complexity)]
pub fn parse_state_all(text: &str) -> Result<(Vec<RuleSpec>, Vec<GroupSpec>), (usize, String)> {
    let declared = parse_header(text)?;
    let mut lines = text.lines().enumerate();
    lines.next();
    let mut specs = Vec::with_capacity(declared.min(1 << 20));
    let mut groups = Vec::new();
    let mut trailer = None;
    let mut last = 1;
    for (i, line) in lines {
        last = i + 1;
        if trailer.is_some() {
            if line.trim().is_empty() {
                continue;
            }
            return Err((i + 1, "text after the end line".into()));
        }
        if let Some(rest) = line.strip_prefix("# end: ") {
            trailer = Some((i + 1, parse_trailer(rest)));
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with(GROUP_PREFIX) {
            groups.push(parse_group(line).map_err(|e| (i + 1, e))?);
            continue;
        }
        let f = parse_flow(line, FlowCommand::Add).map_err(|e| (i + 1, e.to_string()))?;
        specs.push(f.spec);
    }
    match trailer {
        None => Err((
            last,
            "no end line after the last line: the file is truncated".into(),
        )),
        Some((at, None)) => Err((at, "bad end line".into())),
        Some((at, Some((n, _)))) if n != declared || n != specs.len() => Err((
            at,
            format!(
                "flow count mismatch: header says {declared}, end line {n}, file has {}",
                specs.len()
            ),
        )),
        Some((at, Some((_, g)))) if g != groups.len() => Err((
            at,
            format!(
                "group count mismatch: end line says {g}, file has {}",
                groups.len()
            ),
        )),
        Some(_) => Ok((specs, groups)),
    }
}

/// The end line's counts: `N flows` or `N flows, M groups`.
fn parse_trailer(rest: &str) -> Option<(usize, usize)> {
    let (flows, groups) = match rest.split_once(", ") {
        Some((f, g)) => (
            f,
            g.strip_suffix(" groups")
                .and_then(|n| n.parse::<usize>().ok()),
        ),
        None => (rest, Some(0)),
    };
    flows
        .strip_suffix(" flows")
        .and_then(|n| n.parse::<usize>().ok())
        .zip(groups)
}
