//! The state file's journal: flows added since the state file was last written, appended
//! (and flushed to disk) in one record per OpenFlow barrier, so that a barrier reply can
//! mean "saved" without rewriting the whole state file for every flow_mod (`ovs-ofctl
//! add-flows` sends a barrier after each one).
//!
//! The journal is `<state file>.journal`, mode 0600:
//!
//! ```text
//! # flowpath flow journal v1 after generation 7
//! table=0,priority=100,ip,nw_dst=10.0.0.1 actions=output:1
//! ...
//! # commit 2 9f3c0a1b22d4e5f6
//! ```
//!
//! Each record is its flow lines and a commit line with their count and a hash (FNV-1a,
//! 64 bits) of their text. Only additions go to the journal: adding a flow sets the flow
//! at its (table, priority, match), so replaying a record over a state file that already
//! holds it changes nothing. Every other change rewrites the state file, which removes the
//! journal; the header names the generation of the state file the journal continues, so a
//! journal left behind by a crash just after such a rewrite is recognised as older than
//! the file and ignored. A last record without its commit line (the process died while
//! writing it) was never acknowledged and is ignored; a damaged record before the last one
//! is corruption and refused like a corrupt state file.

use crate::state::{create_private_dir, StateError};
use flowpath_flowsyntax::{parse_flow, FlowCommand};
use flowpath_pipeline::RuleSpec;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const HEADER: &str = "# flowpath flow journal v1 after generation ";
const COMMIT: &str = "# commit ";

/// The adds a journal holds for the state file it continues.
#[derive(Debug, Default)]
pub struct Replay {
    pub specs: Vec<RuleSpec>,
    /// A last record without its commit line was left out (never acknowledged).
    pub torn_tail: bool,
    /// The journal continues an older state file (a crash right after a rewrite) and was
    /// left out.
    pub stale: bool,
}

/// The journal beside one state file.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    dir: PathBuf,
    file: Option<File>,
    lines: usize,
}

impl Journal {
    /// The journal of the state file at `state`.
    pub fn for_state(state: &Path) -> Journal {
        let path = Journal::path_for(state);
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Journal {
            path,
            dir,
            file: None,
            lines: 0,
        }
    }

    /// `<state>.journal`.
    pub fn path_for(state: &Path) -> PathBuf {
        let mut p = state.as_os_str().to_owned();
        p.push(".journal");
        PathBuf::from(p)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flow lines appended since the journal was last removed.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// The committed adds for the state file of `generation` (none if there is no
    /// journal, or an older one).
    pub fn load(&self, generation: u64) -> Result<Replay, StateError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Replay::default()),
            Err(e) => return Err(StateError::Io(self.path.clone(), e)),
        };
        parse_journal(&bytes, generation).map_err(|(at, message)| StateError::Corrupt {
            path: self.path.clone(),
            at,
            message,
        })
    }

    /// Append one record of `lines` (flows in flow syntax) and flush it to disk; a new
    /// journal starts with the header naming `generation`.
    pub fn append(&mut self, generation: u64, lines: &[String]) -> io::Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let mut text = String::with_capacity(64 + lines.iter().map(|l| l.len() + 1).sum::<usize>());
        let new = self.file.is_none();
        if new {
            create_private_dir(&self.dir)?;
            // Whatever is there belongs to an older state file: start again.
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&self.path)?;
            self.file = Some(f);
            text.push_str(&format!("{HEADER}{generation}\n"));
        }
        let start = text.len();
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        let hash = fnv1a(&text.as_bytes()[start..]);
        text.push_str(&format!("{COMMIT}{} {hash:016x}\n", lines.len()));
        let f = self.file.as_mut().expect("opened above");
        let r = f.write_all(text.as_bytes()).and_then(|()| f.sync_data());
        if r.is_err() {
            // Where the record stopped is unknown: the next append starts a new journal
            // only after a rewrite of the state file (the caller falls back to one).
            self.file = None;
            return r;
        }
        if new {
            File::open(&self.dir)?.sync_all()?;
        }
        self.lines += lines.len();
        Ok(())
    }

    /// Forget the journal: the state file now holds everything in it.
    pub fn remove(&mut self) -> io::Result<()> {
        self.file = None;
        self.lines = 0;
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The records of a journal's bytes; errors are (place, reason).
fn parse_journal(bytes: &[u8], generation: u64) -> Result<Replay, (String, String)> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        (
            format!("byte {}", e.valid_up_to()),
            "not text (invalid UTF-8): not a flowpath journal".to_string(),
        )
    })?;
    let mut replay = Replay::default();
    if text.is_empty() {
        return Ok(replay);
    }
    let mut lines = text.split_inclusive('\n').enumerate();
    let first = lines.next().map(|(_, l)| l).unwrap_or_default();
    if !first.ends_with('\n') && (HEADER.starts_with(first) || first.starts_with(HEADER)) {
        // The header is written with the first record: cut short, nothing was committed.
        replay.torn_tail = true;
        return Ok(replay);
    }
    let of = first
        .strip_prefix(HEADER)
        .and_then(|g| g.trim_end().parse::<u64>().ok())
        .ok_or_else(|| {
            (
                "line 1".to_string(),
                format!("does not start with '{HEADER}N': not a flowpath journal"),
            )
        })?;
    if of != generation {
        replay.stale = true;
        return Ok(replay);
    }
    let mut record: Vec<(usize, &str)> = Vec::new();
    let mut record_start = 0;
    let mut offset = first.len();
    for (i, line) in lines {
        let complete = line.ends_with('\n');
        let body = line.trim_end_matches('\n');
        if record.is_empty() {
            record_start = offset;
        }
        offset += line.len();
        let Some(commit) = body.strip_prefix(COMMIT).filter(|_| complete) else {
            record.push((i + 1, body));
            continue;
        };
        let want = format!(
            "{} {:016x}",
            record.len(),
            fnv1a(&bytes[record_start..offset - line.len()])
        );
        if commit != want {
            if offset == bytes.len() {
                replay.torn_tail = true;
                return Ok(replay);
            }
            return Err((
                format!("line {}", i + 1),
                format!("damaged record (commit line says '{commit}', the record gives '{want}')"),
            ));
        }
        for (n, l) in record.drain(..) {
            let f = parse_flow(l, FlowCommand::Add)
                .map_err(|e| (format!("line {n}"), e.to_string()))?;
            replay.specs.push(f.spec);
        }
    }
    replay.torn_tail = !record.is_empty();
    Ok(replay)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: usize) -> String {
        format!(
            "priority={},ip,nw_dst=10.0.{}.{} actions=output:1",
            100 + i % 3,
            i / 256,
            i % 256
        )
    }

    fn journal_text(records: &[&[usize]], generation: u64) -> Vec<u8> {
        let d = std::env::temp_dir().join(format!(
            "fp-journal-{}-{}",
            std::process::id(),
            records.len()
        ));
        let _ = fs::remove_dir_all(&d);
        let mut j = Journal::for_state(&d.join("flows.state"));
        for r in records {
            let lines: Vec<String> = r.iter().map(|&i| line(i)).collect();
            j.append(generation, &lines).unwrap();
        }
        let b = fs::read(j.path()).unwrap();
        fs::remove_dir_all(&d).unwrap();
        b
    }

    #[test]
    fn records_come_back_in_order_and_every_torn_tail_is_left_out() {
        let bytes = journal_text(&[&[1, 2], &[3], &[4, 5, 6]], 7);
        let r = parse_journal(&bytes, 7).unwrap();
        assert_eq!(r.specs.len(), 6);
        assert!(!r.torn_tail && !r.stale);
        // Every prefix loads the whole records before the cut and nothing of the rest.
        let text = std::str::from_utf8(&bytes).unwrap();
        let commits: Vec<usize> = text.match_indices(COMMIT).map(|(i, _)| i).collect();
        for cut in 0..bytes.len() {
            let r = parse_journal(&bytes[..cut], 7).unwrap();
            let whole = commits
                .iter()
                .zip([2, 3, 6])
                .filter(|(&c, _)| text[c..].find('\n').unwrap() + c < cut)
                .map(|(_, n)| n)
                .next_back()
                .unwrap_or(0);
            assert_eq!(r.specs.len(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn an_older_journal_is_left_out_and_a_damaged_one_refused() {
        let bytes = journal_text(&[&[1, 2], &[3]], 7);
        assert!(parse_journal(&bytes, 8).unwrap().stale);
        // A changed byte inside the first record: refused, naming the commit line.
        let mut bad = bytes.clone();
        let at = std::str::from_utf8(&bytes)
            .unwrap()
            .find("10.0.0.1")
            .unwrap();
        bad[at + 7] = b'9';
        let e = parse_journal(&bad, 7).unwrap_err();
        assert_eq!(e.0, "line 4", "{e:?}");
        assert!(e.1.contains("damaged record"), "{e:?}");
        // Another program's file.
        let e = parse_journal(b"{\"flows\": []}\n", 7).unwrap_err();
        assert!(e.1.contains("not a flowpath journal"), "{e:?}");
        let e = parse_journal(&[0xff, 0xfe, 0], 7).unwrap_err();
        assert_eq!(e.0, "byte 0");
    }
}
