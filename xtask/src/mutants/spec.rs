//! One curated mutant file (`mutants/<name>.yaml`, format in mutants/README.md): parsing,
//! validation, and applying its edits to a file's text.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A planted regression and the command that must catch it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutant {
    /// File stem: `kernel-order-key-nan`.
    #[serde(skip)]
    pub name: String,
    /// Where the YAML file lives (for error messages).
    #[serde(skip)]
    pub source: PathBuf,
    pub about: String,
    pub edits: Vec<Edit>,
    pub command: String,
    pub expect: String,
    /// What the command needs besides the tree (`requires: [cuda]`): without it here the
    /// mutant is skipped, visibly, with the reason.
    #[serde(default)]
    pub requires: Vec<Requirement>,
}

/// A machine property a mutant's command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Requirement {
    /// An NVIDIA GPU with its driver (e.g. a compute-sanitizer command).
    Cuda,
}

impl Requirement {
    /// Why it is not met here, or None when it is.
    pub fn unmet(self) -> Option<String> {
        match self {
            Requirement::Cuda => qsa::backend::cuda::CudaApi::open(0, Path::new("."))
                .err()
                .map(|e| format!("requires cuda: {e}")),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// Path relative to the repository root.
    pub file: String,
    pub find: String,
    pub replace: String,
}

/// Every `*.yaml` in `dir`, sorted by name; any unreadable or invalid file is an error that
/// names it.
pub fn load_dir(dir: &Path) -> Result<Vec<Mutant>> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

pub fn load(path: &Path) -> Result<Mutant> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut m: Mutant = serde_yaml::from_str(&text).with_context(|| {
        format!(
            "{}: not a mutant (fields: about, edits: [{{file, find, replace}}], command, expect, optional requires: [cuda]; see mutants/README.md)",
            path.display()
        )
    })?;
    m.name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    m.source = path.to_path_buf();
    m.validate()?;
    Ok(m)
}

impl Mutant {
    fn validate(&self) -> Result<()> {
        let at = self.source.display();
        for (field, v) in [
            ("about", &self.about),
            ("command", &self.command),
            ("expect", &self.expect),
        ] {
            if v.trim().is_empty() {
                bail!("{at}: `{field}` is empty");
            }
        }
        if self.edits.is_empty() {
            bail!("{at}: `edits` is empty: a mutant plants at least one edit");
        }
        for (i, e) in self.edits.iter().enumerate() {
            if e.find.is_empty() {
                bail!("{at}: edits[{i}] ({}): `find` is empty", e.file);
            }
            if e.find == e.replace {
                bail!(
                    "{at}: edits[{i}] ({}): `replace` equals `find`, so nothing is planted",
                    e.file
                );
            }
            let p = Path::new(&e.file);
            if p.is_absolute() || p.components().any(|c| c.as_os_str() == "..") {
                bail!(
                    "{at}: edits[{i}]: `file: {}` must be a path inside the repository, relative to its root",
                    e.file
                );
            }
        }
        Ok(())
    }

    /// The distinct files this mutant edits, in the order of first appearance.
    pub fn files(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for e in &self.edits {
            if !out.contains(&e.file.as_str()) {
                out.push(&e.file);
            }
        }
        out
    }
}

/// Apply the mutant's edits to `file`'s `text`, in order. A `find` that does not occur
/// exactly once means the code moved on and the mutant is stale: the error says which.
pub fn apply(m: &Mutant, file: &str, text: &str) -> Result<String> {
    let mut out = text.to_string();
    for (i, e) in m.edits.iter().enumerate().filter(|(_, e)| e.file == file) {
        let n = out.matches(e.find.as_str()).count();
        if n != 1 {
            let first = e.find.lines().next().unwrap_or("").trim();
            bail!(
                "stale mutant {} ({}): edits[{i}] `find` occurs {n} times in {file} (must be exactly once); \
                 first line of `find`: {first:?}. Update the mutant to the current code, or delete it if \
                 the code it mutated is gone.",
                m.name,
                m.source.display()
            );
        }
        out = out.replacen(e.find.as_str(), &e.replace, 1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mutant(edits: &[(&str, &str)]) -> Mutant {
        Mutant {
            name: "m".into(),
            source: "mutants/m.yaml".into(),
            about: "a".into(),
            edits: edits
                .iter()
                .map(|(f, r)| Edit {
                    file: "f.rs".into(),
                    find: (*f).into(),
                    replace: (*r).into(),
                })
                .collect(),
            command: "true".into(),
            expect: "x".into(),
            requires: vec![],
        }
    }

    /// Every curated mutant still plants: each `find` occurs exactly once in today's tree. The
    /// harness checks that only for the mutants it runs (CI's daily sample), so a change that
    /// moves the code a mutant names would otherwise first fail on the day the sample reaches
    /// that mutant, in whichever submission that is (session 20: four stale, one since
    /// session 18).
    #[test]
    fn every_curated_mutant_applies_to_the_tree() {
        let root = crate::root::find(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let mutants = load_dir(&root.join("mutants")).unwrap();
        assert!(
            mutants.len() > 100,
            "{} curated mutants found",
            mutants.len()
        );
        let mut stale = Vec::new();
        for m in &mutants {
            for file in m.files() {
                let text = std::fs::read_to_string(root.join(file))
                    .unwrap_or_else(|e| panic!("mutant {}: {file}: {e}", m.name));
                if let Err(e) = apply(m, file, &text) {
                    stale.push(e.to_string());
                }
            }
        }
        assert!(stale.is_empty(), "{}", stale.join("\n"));
    }

    #[test]
    fn edits_apply_in_order() {
        let m = mutant(&[("a + b", "a - b"), ("a - b;", "b - a;")]);
        assert_eq!(apply(&m, "f.rs", "x = a + b;").unwrap(), "x = b - a;");
    }

    #[test]
    fn find_must_occur_exactly_once() {
        let m = mutant(&[("a", "b")]);
        let e = apply(&m, "f.rs", "a a").unwrap_err().to_string();
        assert!(
            e.contains("stale mutant m") && e.contains("occurs 2 times in f.rs"),
            "{e}"
        );
        let e = apply(&m, "f.rs", "zzz").unwrap_err().to_string();
        assert!(e.contains("occurs 0 times"), "{e}");
    }

    #[test]
    fn unknown_fields_and_noop_edits_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.yaml");
        std::fs::write(
            &p,
            "about: a\nedits: []\ncommand: c\nexpect: e\nexpected: e\n",
        )
        .unwrap();
        let e = format!("{:#}", load(&p).unwrap_err());
        assert!(e.contains("unknown field `expected`"), "{e}");
        std::fs::write(
            &p,
            "about: a\nedits: [{file: f, find: x, replace: x}]\ncommand: c\nexpect: e\n",
        )
        .unwrap();
        let e = format!("{:#}", load(&p).unwrap_err());
        assert!(e.contains("nothing is planted"), "{e}");
    }

    #[test]
    fn requires_names_known_needs_only() {
        let dir = tempfile::tempdir().unwrap();
        let write = |body: &str| {
            let p = dir.path().join("m.yaml");
            std::fs::write(&p, format!("about: a\nedits: [{{file: f, find: x, replace: y}}]\ncommand: c\nexpect: e\n{body}")).unwrap();
            p
        };
        let m = load(&write("requires: [cuda]\n")).unwrap();
        assert_eq!(m.requires, vec![Requirement::Cuda]);
        assert!(load(&write("")).unwrap().requires.is_empty());
        let e = format!("{:#}", load(&write("requires: [rocm]\n")).unwrap_err());
        assert!(e.contains("optional requires: [cuda]"), "{e}");
    }
}
