//! The state file: the configured flows, in flow syntax, replaced atomically.
//!
//! A save writes the whole rule set to a temporary file in the same directory, flushes it
//! to disk, renames it over the state file and flushes the directory. A rename within one
//! file system is atomic, so a crash at any point leaves either the old file or the new
//! one, never a mix; the header and trailer lines (with the flow count) also catch a file
//! that was truncated some other way (a copy, a full disk). This is a dozen lines of std,
//! so it is written here rather than pulled in from a crate.

use flowpath_flowsyntax::{format_actions, format_flow, parse_flow, FlowCommand};
use flowpath_pipeline::{Bucket, GroupSpec, GroupType, Match, RuleSpec};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const HEADER: &str = "# flowpath flow state v1";

/// Why a state file could not be loaded.
#[derive(Debug)]
pub enum StateError {
    Io(PathBuf, io::Error),
    /// The file is not a complete state file (wrong header, missing trailer, count off).
    Corrupt(PathBuf, String),
    /// A flow line does not parse (the file was edited by hand, or by a newer flowpath).
    BadFlow {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Io(p, e) => write!(f, "state file {}: {e}", p.display()),
            StateError::Corrupt(p, why) => write!(f, "state file {}: {why}", p.display()),
            StateError::BadFlow {
                path,
                line,
                message,
            } => write!(f, "state file {} line {line}: {message}", path.display()),
        }
    }
}

impl std::error::Error for StateError {}

/// Where the configured flows live between runs.
#[derive(Clone, Debug)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    pub fn new(path: impl Into<PathBuf>) -> StateFile {
        StateFile { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved flows; no file yet means no flows.
    pub fn load(&self) -> Result<Vec<RuleSpec>, StateError> {
        Ok(self.load_all()?.0)
    }

    /// The saved groups and flows (groups first: flows may name them).
    pub fn load_all(&self) -> Result<(Vec<RuleSpec>, Vec<GroupSpec>), StateError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
            Err(e) => return Err(StateError::Io(self.path.clone(), e)),
        };
        parse_state_all(&text).map_err(|(line, message)| {
            if line == 0 {
                StateError::Corrupt(self.path.clone(), message)
            } else {
                StateError::BadFlow {
                    path: self.path.clone(),
                    line,
                    message,
                }
            }
        })
    }

    /// Replace the saved flows with `specs`, atomically (see the module documentation).
    pub fn save(&self, specs: &[&RuleSpec]) -> io::Result<()> {
        self.save_all(specs, &[])
    }

    /// Replace the saved flows and groups, atomically.
    pub fn save_all(&self, specs: &[&RuleSpec], groups: &[&GroupSpec]) -> io::Result<()> {
        let text = render_state_all(specs, groups);
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&dir)?;
        let name = self.path.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "state path has no file name")
        })?;
        let tmp = dir.join(format!(
            ".{}.tmp.{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let result = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            drop(f);
            fs::rename(&tmp, &self.path)?;
            // Make the rename itself durable.
            File::open(&dir)?.sync_all()
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
}

/// The state file's text for `specs`.
pub fn render_state(specs: &[&RuleSpec]) -> String {
    render_state_all(specs, &[])
}

/// The state file's text for `specs` and `groups`. Groups come first, one per line
/// (`group group_id=1,type=select bucket=weight:100,actions=output:1 bucket=...`), so that
/// the flows naming them load after them; the end line counts both.
pub fn render_state_all(specs: &[&RuleSpec], groups: &[&GroupSpec]) -> String {
    let mut out = String::with_capacity(64 + specs.len() * 80);
    let _ = writeln!(out, "{HEADER}: {} flows", specs.len());
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

/// Parse a state file's text; errors are (line, reason), line 0 for the file as a whole.
pub fn parse_state(text: &str) -> Result<Vec<RuleSpec>, (usize, String)> {
    Ok(parse_state_all(text)?.0)
}

/// Parse a state file's text: its flows and groups.
#[allow(clippy::type_complexity)]
pub fn parse_state_all(text: &str) -> Result<(Vec<RuleSpec>, Vec<GroupSpec>), (usize, String)> {
    let mut lines = text.lines().enumerate();
    let declared = match lines.next() {
        Some((_, l)) if l.starts_with(HEADER) => l[HEADER.len()..]
            .strip_prefix(": ")
            .and_then(|r| r.strip_suffix(" flows"))
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or((0, format!("bad header line '{l}'")))?,
        _ => return Err((0, format!("does not start with '{HEADER}'"))),
    };
    let mut specs = Vec::with_capacity(declared);
    let mut groups = Vec::new();
    let mut trailer = None;
    for (i, line) in lines {
        if trailer.is_some() {
            if line.trim().is_empty() {
                continue;
            }
            return Err((i + 1, "text after the end line".into()));
        }
        if let Some(rest) = line.strip_prefix("# end: ") {
            // `N flows` or `N flows, M groups`.
            let (flows, ngroups) = match rest.split_once(", ") {
                Some((f, g)) => (
                    f,
                    g.strip_suffix(" groups")
                        .and_then(|n| n.parse::<usize>().ok()),
                ),
                None => (rest, Some(0)),
            };
            trailer = Some(
                flows
                    .strip_suffix(" flows")
                    .and_then(|n| n.parse::<usize>().ok())
                    .zip(ngroups),
            );
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
        None => Err((0, "no end line: the file is truncated".into())),
        Some(None) => Err((0, "bad end line".into())),
        Some(Some((n, _))) if n != declared || n != specs.len() => Err((
            0,
            format!(
                "flow count mismatch: header says {declared}, end line {n}, file has {}",
                specs.len()
            ),
        )),
        Some(Some((_, g))) if g != groups.len() => Err((
            0,
            format!(
                "group count mismatch: end line says {g}, file has {}",
                groups.len()
            ),
        )),
        Some(Some(_)) => Ok((specs, groups)),
    }
}
