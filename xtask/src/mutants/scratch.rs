//! The scratch tree the mutants are planted in: `target/mutants/tree`, a copy of the files
//! git knows about (tracked, plus untracked ones not ignored), the untracked-but-needed
//! `build/` (compiled kernels) and the `.venv-cuda` and `.toolchains` symlinks. It keeps its own `target/`
//! between runs so each mutant is an incremental build.
//!
//! Syncing writes only files whose bytes differ (so cargo's mtimes stay put for the rest)
//! and deletes files the source no longer has. A run killed mid-mutant (SIGKILL) leaves a
//! mutated file behind; the next sync restores it, since it differs from the source.

use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Directories of the scratch tree that a sync never touches: its own build outputs.
const KEEP: &[&str] = &["target"];
/// Untracked paths copied as well (ignored by git, needed by the commands).
const EXTRA_DIRS: &[&str] = &["build"];
// `.toolchains` holds what `cargo xtask setup` generated for the AMD builds (device-library
// bitcode): without it the scratch tree cannot build gfx targets.
const EXTRA_LINKS: &[&str] = &[".venv-cuda", ".toolchains"];

pub struct Scratch {
    pub copied: usize,
    pub unchanged: usize,
    pub removed: usize,
}

/// Bring `dest` in line with `src`'s working tree.
pub fn sync(src: &Path, dest: &Path) -> Result<Scratch> {
    let mut files = git_files(src)?;
    for d in EXTRA_DIRS {
        walk(&src.join(d), src, &mut files)?;
    }
    std::fs::create_dir_all(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let mut s = Scratch {
        copied: 0,
        unchanged: 0,
        removed: 0,
    };
    for rel in &files {
        let from = src.join(rel);
        let to = dest.join(rel);
        let meta = match std::fs::symlink_metadata(&from) {
            Ok(m) => m,
            Err(_) => continue, // tracked but deleted in the working tree
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&from)?;
            if std::fs::read_link(&to).ok().as_ref() != Some(&target) {
                let _ = std::fs::remove_file(&to);
                mkparent(&to)?;
                std::os::unix::fs::symlink(&target, &to)
                    .with_context(|| format!("cannot link {}", to.display()))?;
                s.copied += 1;
            } else {
                s.unchanged += 1;
            }
            continue;
        }
        let bytes =
            std::fs::read(&from).with_context(|| format!("cannot read {}", from.display()))?;
        if std::fs::read(&to).ok().as_deref() == Some(bytes.as_slice()) {
            s.unchanged += 1;
            continue;
        }
        mkparent(&to)?;
        let _ = std::fs::remove_file(&to); // a symlink or read-only file in the way
        std::fs::write(&to, &bytes).with_context(|| format!("cannot write {}", to.display()))?;
        std::fs::set_permissions(&to, meta.permissions())?;
        s.copied += 1;
    }
    for l in EXTRA_LINKS {
        let from = src.join(l);
        let to = dest.join(l);
        let _ = std::fs::remove_file(&to);
        if let Ok(real) = std::fs::canonicalize(&from) {
            std::os::unix::fs::symlink(&real, &to)
                .with_context(|| format!("cannot link {}", to.display()))?;
        }
    }
    let mut present = BTreeSet::new();
    walk(dest, dest, &mut present)?;
    for rel in present.difference(&files) {
        if KEEP.iter().any(|k| Path::new(rel).starts_with(k))
            || EXTRA_LINKS.contains(&rel.to_str().unwrap_or(""))
        {
            continue;
        }
        std::fs::remove_file(dest.join(rel))?;
        s.removed += 1;
    }
    Ok(s)
}

/// Seed the scratch tree's empty `target/<profile>` with a copy of the working tree's, so
/// the first baseline rebuilds only the workspace crates (their paths changed), not every
/// dependency: measured 16 s instead of a cold build of minutes (2 cores, 2026-12-01).
/// `msrv` is .ci/msrv.sh's folder (`cargo +MSRV check`, which .ci/run makes before the
/// mutants): its mutant's first baseline is then not a cold check of minutes.
/// Cargo's `incremental/` caches are left out: they belong to the workspace crates, which
/// the scratch tree rebuilds anyway at their new paths, and they were 2.5 of the 11 GB of
/// target/debug (2026-12-02), copied on every run by each worktree that runs mutants.
/// Returns the profiles seeded.
pub fn seed_target(src: &Path, dest: &Path) -> Result<Vec<&'static str>> {
    let mut seeded = Vec::new();
    for profile in ["debug", "release", "msrv"] {
        let (from, to) = (
            src.join("target").join(profile),
            dest.join("target").join(profile),
        );
        if !from.is_dir() || to.exists() {
            continue;
        }
        let tmp = dest.join("target").join(format!("{profile}.seeding"));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        for entry in std::fs::read_dir(&from)? {
            let entry = entry?;
            if entry.file_name() == "incremental" {
                continue;
            }
            let ok = Command::new("cp")
                .args(["-a", "--reflink=auto"])
                .arg(entry.path())
                .arg(&tmp)
                .status()
                .with_context(|| format!("cannot run cp to seed {}", to.display()))?
                .success();
            anyhow::ensure!(
                ok,
                "copying {} to {} failed",
                entry.path().display(),
                tmp.display()
            );
        }
        std::fs::rename(&tmp, &to)?;
        seeded.push(profile);
    }
    Ok(seeded)
}

/// Tracked files and untracked files that git does not ignore, relative to `root`.
fn git_files(root: &Path) -> Result<BTreeSet<PathBuf>> {
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .context("cannot run git (the scratch tree is a copy of `git ls-files`)")?;
    anyhow::ensure!(
        out.status.success(),
        "git ls-files failed in {}: {} (the mutants need a git checkout)",
        root.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        // The scratch tree lives under target/: never copy it into itself.
        .filter(|p| !KEEP.iter().any(|k| p.starts_with(k)))
        .collect())
}

/// Every file (and symlink) under `dir`, relative to `base`; skips `base/target`.
fn walk(dir: &Path, base: &Path, out: &mut BTreeSet<PathBuf>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries {
        let e = e?;
        let p = e.path();
        let rel = p.strip_prefix(base).unwrap_or(&p).to_path_buf();
        if KEEP.iter().any(|k| rel == Path::new(k)) {
            continue;
        }
        let ft = e.file_type()?;
        if ft.is_dir() {
            walk(&p, base, out)?;
        } else {
            out.insert(rel);
        }
    }
    Ok(())
}

fn mkparent(p: &Path) -> Result<()> {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeding_copies_the_profile_without_its_incremental_cache() {
        let src = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        let debug = src.path().join("target/debug");
        for d in ["deps", "incremental/qsa-1", "build/x"] {
            std::fs::create_dir_all(debug.join(d)).unwrap();
        }
        std::fs::write(debug.join("deps/libfoo.rlib"), b"rlib").unwrap();
        std::fs::write(debug.join("incremental/qsa-1/dep-graph.bin"), b"graph").unwrap();
        std::fs::write(debug.join(".cargo-lock"), b"").unwrap();

        assert_eq!(seed_target(src.path(), dest.path()).unwrap(), vec!["debug"]);
        let seeded = dest.path().join("target/debug");
        assert_eq!(
            std::fs::read(seeded.join("deps/libfoo.rlib")).unwrap(),
            b"rlib"
        );
        assert!(seeded.join("build/x").is_dir() && seeded.join(".cargo-lock").is_file());
        assert!(
            !seeded.join("incremental").exists(),
            "the incremental cache was copied into the scratch tree"
        );
        assert!(!dest.path().join("target/debug.seeding").exists());
        // A second seeding leaves an existing profile alone.
        assert!(seed_target(src.path(), dest.path()).unwrap().is_empty());
    }
}
