//! Golden snapshots in insta's file format, so `cargo insta review` / `accept` /
//! `pending-snapshots` work on them, written by us so that every write is atomic (write,
//! then rename) and a mismatch is a value, not a panic.
//!
//! `golden/<target>/<name>.snap` is the accepted snapshot; a run that differs writes
//! `<name>.snap.new` beside it (pending review); `--bless` replaces the `.snap` instead.

use anyhow::{Context, Result};
use qsa::results::write_atomic;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a snapshot comparison found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapState {
    Same,
    /// No accepted snapshot yet: `.snap.new` written (or `.snap`, when blessing).
    New,
    /// Differs from the accepted snapshot: the diff, `-` old and `+` new lines.
    Changed(String),
    /// Written because of `--bless`.
    Blessed,
}

#[derive(Clone, Debug)]
pub struct SnapOutcome {
    pub target: String,
    pub name: String,
    pub state: SnapState,
    pub path: PathBuf,
}

/// The snapshots of one run, over every target.
pub struct Golden {
    root: PathBuf,
    bless: bool,
    referenced: BTreeSet<PathBuf>,
    pub outcomes: Vec<SnapOutcome>,
}

impl Golden {
    pub fn new(root: &Path, bless: bool) -> Golden {
        Golden {
            root: root.to_owned(),
            bless,
            referenced: BTreeSet::new(),
            outcomes: Vec::new(),
        }
    }

    pub fn dir(&self, target: &str) -> PathBuf {
        self.root.join(target)
    }

    /// Compare `content` with `golden/<target>/<name>.snap`.
    pub fn check(&mut self, target: &str, name: &str, content: &str) -> Result<SnapState> {
        let path = self.dir(target).join(format!("{name}.snap"));
        let pending = path.with_extension("snap.new");
        self.referenced.insert(path.clone());
        let content = normalize(content);
        let old = read_snapshot(&path)?;
        let state = match old {
            Some(old) if old == content => {
                remove_if_exists(&pending)?;
                SnapState::Same
            }
            _ if self.bless => {
                write_atomic(&path, render(name, &content).as_bytes())?;
                remove_if_exists(&pending)?;
                SnapState::Blessed
            }
            None => {
                write_atomic(&pending, render(name, &content).as_bytes())?;
                SnapState::New
            }
            Some(old) => {
                write_atomic(&pending, render(name, &content).as_bytes())?;
                SnapState::Changed(diff(&old, &content))
            }
        };
        self.outcomes.push(SnapOutcome {
            target: target.into(),
            name: name.into(),
            state: state.clone(),
            path,
        });
        Ok(state)
    }

    /// `.snap` files of `target` that this run did not produce. With `--bless` they are
    /// deleted (the run was complete for that target: the caller checks).
    pub fn unreferenced(&self, target: &str) -> Result<Vec<PathBuf>> {
        let dir = self.dir(target);
        let mut out = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries {
                let p = e?.path();
                if p.extension().is_some_and(|x| x == "snap") && !self.referenced.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.sort();
        if self.bless {
            for p in &out {
                std::fs::remove_file(p)
                    .with_context(|| format!("cannot remove {}", p.display()))?;
            }
        }
        Ok(out)
    }

    pub fn failures(&self) -> impl Iterator<Item = &SnapOutcome> {
        self.outcomes
            .iter()
            .filter(|o| matches!(o.state, SnapState::New | SnapState::Changed(_)))
    }
}

fn normalize(s: &str) -> String {
    s.replace("\r\n", "\n").trim_end().to_string()
}

/// insta's `.snap` layout: a YAML header between `---` lines, then the contents.
fn render(name: &str, content: &str) -> String {
    format!("---\nsource: xtask/src/golden.rs\nexpression: {name}\n---\n{content}\n")
}

/// Read an accepted snapshot with insta's own parser (so what we write is what insta reads).
fn read_snapshot(path: &Path) -> Result<Option<String>> {
    if !path.exists() {
        return Ok(None);
    }
    let snap = insta::Snapshot::from_file(path)
        .map_err(|e| anyhow::anyhow!("{}: not a readable insta snapshot: {e}", path.display()))?;
    let text = snap.as_text().map(|t| t.to_string()).unwrap_or_default();
    Ok(Some(normalize(&text)))
}

fn remove_if_exists(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot remove {}: {e}", p.display())),
    }
}

/// A line diff: lines only in the old snapshot (`-`) and only in the new one (`+`), in
/// order. Snapshot lines are independent records, so this is what a reviewer needs.
pub fn diff(old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let mut out = String::new();
    for l in &old_lines {
        if !new_lines.contains(l) {
            out.push_str(&format!("-{l}\n"));
        }
    }
    for l in &new_lines {
        if !old_lines.contains(l) {
            out.push_str(&format!("+{l}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_then_same_then_changed_then_blessed() {
        let dir = tempfile::tempdir().unwrap();
        let mut g = Golden::new(dir.path(), false);
        assert_eq!(g.check("cpu", "parity__x", "a\nb").unwrap(), SnapState::New);
        assert!(dir.path().join("cpu/parity__x.snap.new").exists());
        let mut g = Golden::new(dir.path(), true);
        assert_eq!(
            g.check("cpu", "parity__x", "a\nb").unwrap(),
            SnapState::Blessed
        );
        assert!(!dir.path().join("cpu/parity__x.snap.new").exists());
        // What we wrote, insta reads back as the same contents.
        let snap = insta::Snapshot::from_file(&dir.path().join("cpu/parity__x.snap")).unwrap();
        assert_eq!(snap.as_text().unwrap().to_string(), "a\nb");
        let mut g = Golden::new(dir.path(), false);
        assert_eq!(
            g.check("cpu", "parity__x", "a\nb\n").unwrap(),
            SnapState::Same
        );
        match g.check("cpu", "parity__x", "a\nc").unwrap() {
            SnapState::Changed(d) => assert_eq!(d, "-b\n+c\n"),
            other => panic!("expected a change, got {other:?}"),
        }
        assert!(dir.path().join("cpu/parity__x.snap.new").exists());
        std::fs::write(dir.path().join("cpu/stale.snap"), render("stale", "z")).unwrap();
        let unref = g.unreferenced("cpu").unwrap();
        assert_eq!(unref, vec![dir.path().join("cpu/stale.snap")]);
    }
}
