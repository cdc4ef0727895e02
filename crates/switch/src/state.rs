//! The state file: the configured flows, in flow syntax, replaced atomically.
//!
//! A save writes the whole rule set to a temporary file in the same directory, flushes it
//! to disk, renames it over the state file and flushes the directory. A rename within one
//! file system is atomic, so a crash at any point leaves either the old file or the new
//! one, never a mix; the header and trailer lines (with the flow count) also catch a file
//! that was truncated some other way (a copy, a full disk). This is a dozen lines of std,
//! so it is written here rather than pulled in from a crate.

use flowpath_flowsyntax::{format_flow, parse_flow, FlowCommand};
use flowpath_pipeline::RuleSpec;
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
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StateError::Io(self.path.clone(), e)),
        };
        parse_state(&text).map_err(|(line, message)| {
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
        let text = render_state(specs);
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
    let mut out = String::with_capacity(64 + specs.len() * 80);
    let _ = writeln!(out, "{HEADER}: {} flows", specs.len());
    for s in specs {
        out.push_str(&format_flow(s));
        out.push('\n');
    }
    let _ = writeln!(out, "# end: {} flows", specs.len());
    out
}

/// Parse a state file's text; errors are (line, reason), line 0 for the file as a whole.
pub fn parse_state(text: &str) -> Result<Vec<RuleSpec>, (usize, String)> {
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
    let mut trailer = None;
    for (i, line) in lines {
        if trailer.is_some() {
            if line.trim().is_empty() {
                continue;
            }
            return Err((i + 1, "text after the end line".into()));
        }
        if let Some(rest) = line.strip_prefix("# end: ") {
            trailer = Some(
                rest.strip_suffix(" flows")
                    .and_then(|n| n.parse::<usize>().ok()),
            );
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f = parse_flow(line, FlowCommand::Add).map_err(|e| (i + 1, e.to_string()))?;
        specs.push(f.spec);
    }
    match trailer {
        None => Err((0, "no end line: the file is truncated".into())),
        Some(None) => Err((0, "bad end line".into())),
        Some(Some(n)) if n != declared || n != specs.len() => Err((
            0,
            format!(
                "flow count mismatch: header says {declared}, end line {n}, file has {}",
                specs.len()
            ),
        )),
        Some(Some(_)) => Ok(specs),
    }
}
