//! `cargo xtask report bless --from DIR`: accept the pending snapshots and bench proposals
//! of a downloaded CI run into golden/, all checked and staged before any is renamed into
//! place. The walk that finds them is `merge`'s (`walk`, `golden_place`).

use super::{snapshot_text, walk, BlessArgs, Found};
use crate::ci::default_matrix_path;
use anyhow::{bail, Context, Result};
use qsa::matrix::Matrix;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `bless --from DIR`: accept, then say what changed.
pub fn run_bless(a: &BlessArgs) -> Result<()> {
    let matrix_path = a.matrix.clone().unwrap_or_else(default_matrix_path);
    let matrix = Matrix::load(&matrix_path)?;
    let golden = a.golden.clone().unwrap_or_else(|| {
        matrix_path
            .parent()
            .unwrap_or(Path::new("."))
            .join("golden")
    });
    let done = bless_from(&a.from, &golden, &matrix)?;
    for b in &done {
        println!(
            "{:8} {}  (from {})",
            b.what,
            b.to.display(),
            b.from.display()
        );
    }
    println!(
        "{} file(s) accepted into {}: review `git diff {}` and commit",
        done.len(),
        golden.display(),
        golden.display()
    );
    Ok(())
}

/// One file `bless --from` accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Blessed {
    pub from: PathBuf,
    pub to: PathBuf,
    /// "new" or "changed" or "same".
    pub what: &'static str,
}

/// Accept every pending `.snap.new` / `bench.yaml.new` under `from` into `golden_root`:
/// all are checked first (each names a declared target, snapshots parse as insta
/// snapshots, bench proposals as bench golden files, no two disagree), all are staged as
/// temporary files beside their destinations, and only then renamed into place; a failure
/// before the renames leaves golden/ untouched.
pub fn bless_from(from: &Path, golden_root: &Path, matrix: &Matrix) -> Result<Vec<Blessed>> {
    if !from.is_dir() {
        bail!(
            "{}: not a folder (download a CI run's artifacts into it: docs/ci.md)",
            from.display()
        );
    }
    let mut found = Found::default();
    walk(from, 0, false, &mut found)?;
    if found.pending.is_empty() {
        bail!("{}: no pending snapshots (golden/<target>/*.snap.new) or bench proposals (golden/<target>/bench.yaml.new) found", from.display());
    }
    // dest -> (source, bytes)
    let mut plan: BTreeMap<PathBuf, (PathBuf, Vec<u8>)> = BTreeMap::new();
    for (target, file, path) in &found.pending {
        if matrix.target(target).is_none() {
            bail!(
                "{}: target `{target}` is not declared in {}",
                path.display(),
                matrix.path.display()
            );
        }
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let dest = golden_root.join(target).join(file.trim_end_matches(".new"));
        if file.ends_with(".snap.new") {
            snapshot_text(path)?;
            crate::golden::refuse_off_card_over_card(path, &dest)?;
        } else {
            let text = String::from_utf8_lossy(&bytes);
            serde_yaml::from_str::<qsa::suites::bench::BenchGolden>(&text)
                .map_err(|e| anyhow::anyhow!("{}: not a bench golden file: {e}", path.display()))?;
        }
        match plan.get(&dest) {
            Some((other, b)) if *b != bytes => bail!(
                "{} and {} propose different contents for {}: download one run only",
                other.display(),
                path.display(),
                dest.display()
            ),
            Some(_) => {}
            None => {
                plan.insert(dest, (path.clone(), bytes));
            }
        }
    }
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let stage = |staged: &mut Vec<(PathBuf, PathBuf)>| -> Result<()> {
        for (dest, (_, bytes)) in &plan {
            let dir = dest.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let name = dest.file_name().and_then(|n| n.to_str()).unwrap_or("snap");
            let tmp = dir.join(format!(".{name}.bless-{}", std::process::id()));
            std::fs::write(&tmp, bytes)
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            staged.push((tmp, dest.clone()));
        }
        Ok(())
    };
    if let Err(e) = stage(&mut staged) {
        for (tmp, _) in &staged {
            let _ = std::fs::remove_file(tmp);
        }
        return Err(e);
    }
    let mut out = Vec::new();
    for (tmp, dest) in staged {
        let (src, bytes) = &plan[&dest];
        let what = match std::fs::read(&dest) {
            Ok(old) if old == *bytes => "same",
            Ok(_) => "changed",
            Err(_) => "new",
        };
        std::fs::rename(&tmp, &dest)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), dest.display()))?;
        out.push(Blessed {
            from: src.clone(),
            to: dest,
            what,
        });
    }
    Ok(out)
}
