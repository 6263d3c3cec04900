//! `--in-place`: the mutants planted in the working tree itself, so that their commands reuse
//! the tree's own build instead of building a scratch copy at another path (cargo rebuilds a
//! workspace crate whose path changed). In CI, after the README's test command had built
//! everything, the scratch tree's two baselines took 89 + 79 s of the mutant step's 5 min 33 s
//! (fresh clone, 2-core machine, 2026-12-03).
//!
//! A mutant's file is restored after its command, and on Ctrl-C; only a killed run (SIGKILL)
//! leaves it planted. So every file a mutant edits must match git's index before anything
//! is planted: then `git checkout -- FILE` always restores it.

use super::spec::Mutant;
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Fail, naming the files and the fix, when a file the mutants edit has changes that git's
/// index does not hold.
pub fn check_restorable(root: &Path, mutants: &[Mutant]) -> Result<()> {
    let files: BTreeSet<&str> = mutants.iter().flat_map(|m| m.files()).collect();
    let out = Command::new("git")
        .args(["diff", "--name-only", "-z", "--"])
        .args(&files)
        .current_dir(root)
        .output()
        .context("cannot run git (--in-place restores a killed run's files from git)")?;
    if !out.status.success() {
        bail!(
            "git diff failed in {}: {} (--in-place needs a git checkout)",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let dirty: Vec<String> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    if !dirty.is_empty() {
        bail!(
            "--in-place: {} changed since `git add` ({}): a run killed mid-mutant could not be undone \
             with `git checkout`; commit or stage them first, or run without --in-place (the scratch tree)",
            if dirty.len() == 1 { "this file has" } else { "these files have" },
            dirty.join(", ")
        );
    }
    Ok(())
}
