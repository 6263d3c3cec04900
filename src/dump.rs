//! `qsa run --dump DIR`: the inputs, outputs and references of checks as `.npy` files
//! (little-endian, C order), so a failure can be taken apart with numpy instead of the five
//! ids a parity message shows.
//!
//! By default only failing checks (fail, error) are dumped: a full run's inputs are
//! gigabytes, and a failure is what one opens. `--dump-all` dumps every check. Each check
//! gets a folder `<suite>__<case>__<dist>__<variant>__<check>/` with `input_*.npy`,
//! `output_*.npy`, `reference_*.npy`; `DIR/index.yaml` lists every folder with its case,
//! distribution, variant, suite, status and message, and every file with its role, dtype,
//! shape and what it holds. The index is rewritten (atomically) after each dumped check, so
//! a crash keeps what was dumped before it.

use crate::results::{write_atomic, Record, Status};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What an array is to the check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Input,
    Output,
    Reference,
}

/// One array to dump.
pub struct Array {
    pub role: Role,
    pub name: &'static str,
    /// What it holds, for the index (e.g. "top-k ids, -1 past the selected count").
    pub about: String,
    descr: &'static str,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl Array {
    fn new(role: Role, name: &'static str, shape: &[usize], descr: &'static str) -> Array {
        Array {
            role,
            name,
            about: String::new(),
            descr,
            shape: shape.to_vec(),
            bytes: Vec::new(),
        }
    }
    pub fn f32(role: Role, name: &'static str, shape: &[usize], v: &[f32]) -> Array {
        let mut a = Array::new(role, name, shape, "<f4");
        a.bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        a
    }
    pub fn f64(role: Role, name: &'static str, shape: &[usize], v: &[f64]) -> Array {
        let mut a = Array::new(role, name, shape, "<f8");
        a.bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        a
    }
    pub fn i32(role: Role, name: &'static str, shape: &[usize], v: &[i32]) -> Array {
        let mut a = Array::new(role, name, shape, "<i4");
        a.bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        a
    }
    pub fn about(mut self, text: impl Into<String>) -> Array {
        self.about = text.into();
        self
    }
    fn file(&self) -> String {
        let role = match self.role {
            Role::Input => "input",
            Role::Output => "output",
            Role::Reference => "reference",
        };
        format!("{role}_{}.npy", self.name)
    }
    fn dtype(&self) -> &'static str {
        match self.descr {
            "<f4" => "float32",
            "<f8" => "float64",
            _ => "int32",
        }
    }
}

/// One dumped check in `index.yaml`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexEntry {
    pub dir: String,
    pub suite: String,
    pub case: String,
    pub dist: String,
    pub variant: String,
    pub check: String,
    pub status: Status,
    pub message: String,
    pub repro: String,
    pub files: Vec<IndexFile>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexFile {
    pub file: String,
    pub role: Role,
    pub dtype: String,
    pub shape: Vec<usize>,
    pub about: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Index {
    pub checks: Vec<IndexEntry>,
}

/// Writes dumps into one folder.
pub struct Dumper {
    dir: PathBuf,
    all: bool,
    index: Mutex<Index>,
}

impl Dumper {
    /// Create (or, resuming, reopen) the dump folder; fails before any work if it cannot be
    /// written.
    pub fn new(dir: &Path, all: bool) -> anyhow::Result<Dumper> {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!("--dump {}: cannot create the folder: {e}", dir.display())
        })?;
        let index_path = dir.join("index.yaml");
        let index = match std::fs::read_to_string(&index_path) {
            Ok(t) => serde_yaml::from_str(&t).map_err(|e| {
                anyhow::anyhow!("{}: not a qsa dump index: {e}", index_path.display())
            })?,
            Err(_) => Index::default(),
        };
        let d = Dumper {
            dir: dir.to_path_buf(),
            all,
            index: Mutex::new(index),
        };
        d.write_index()
            .map_err(|e| anyhow::anyhow!("--dump: {e:#}"))?;
        Ok(d)
    }

    /// Whether `rec` is dumped: a failing check, or any with `--dump-all`.
    pub fn wants(&self, rec: &Record) -> bool {
        self.all || rec.status.is_failure()
    }

    /// Write the arrays of `rec`'s check and add it to the index. An I/O error is printed
    /// (the check's own result stands) and returned.
    pub fn write(&self, rec: &Record, arrays: Vec<Array>) -> anyhow::Result<()> {
        let r = self.try_write(rec, arrays);
        if let Err(e) = &r {
            eprintln!("qsa: --dump: {e:#}");
        }
        r
    }

    fn try_write(&self, rec: &Record, arrays: Vec<Array>) -> anyhow::Result<()> {
        let name: String = [
            rec.suite.name(),
            &rec.case,
            &rec.dist,
            &rec.variant,
            &rec.check,
        ]
        .join("__")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
        let folder = self.dir.join(&name);
        std::fs::create_dir_all(&folder)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", folder.display()))?;
        let mut files = Vec::new();
        for a in &arrays {
            let path = folder.join(a.file());
            crate::npy::write_le(&path, a.descr, &a.shape, &a.bytes)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            files.push(IndexFile {
                file: a.file(),
                role: a.role,
                dtype: a.dtype().into(),
                shape: a.shape.clone(),
                about: a.about.clone(),
            });
        }
        {
            let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
            index.checks.retain(|c| c.dir != name);
            index.checks.push(IndexEntry {
                dir: name,
                suite: rec.suite.name().into(),
                case: rec.case.clone(),
                dist: rec.dist.clone(),
                variant: rec.variant.clone(),
                check: rec.check.clone(),
                status: rec.status,
                message: rec.message.clone(),
                repro: rec.repro.clone(),
                files,
            });
        }
        self.write_index()
    }

    fn write_index(&self) -> anyhow::Result<()> {
        let index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let text = format!(
            "# qsa dump: one folder per check; .npy files are little-endian, C order \
             (numpy.load reads them).\n{}",
            serde_yaml::to_string(&*index)?
        );
        write_atomic(&self.dir.join("index.yaml"), text.as_bytes())
    }
}
