//! Incremental builds: a stamp per output holding a digest of everything that determines it
//! (the source, every header it includes through `#include "..."`, the compiler's flags and
//! its version, and any extra inputs such as the HIP shim). Unchanged digest + outputs
//! present = up to date.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The project-local headers `source` includes, transitively (quoted includes, resolved
/// next to the including file first, then in each of `include_dirs`). System headers
/// (`<...>`) are covered by the compiler version in the digest.
pub fn local_includes(source: &Path, include_dirs: &[PathBuf]) -> Result<BTreeSet<PathBuf>> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![source.to_path_buf()];
    while let Some(file) = todo.pop() {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        for line in text.lines() {
            let t = line.trim_start();
            let Some(rest) = t.strip_prefix('#') else {
                continue;
            };
            let Some(rest) = rest.trim_start().strip_prefix("include") else {
                continue;
            };
            let Some(rest) = rest.trim_start().strip_prefix('"') else {
                continue;
            };
            let Some(name) = rest.split('"').next() else {
                continue;
            };
            let here = file.parent().map(|d| d.join(name));
            let found = here
                .into_iter()
                .chain(include_dirs.iter().map(|d| d.join(name)))
                .find(|p| p.is_file());
            // An include we cannot find is the compiler's error to report, with context.
            if let Some(p) = found {
                let p = p.canonicalize().unwrap_or(p);
                if seen.insert(p.clone()) {
                    todo.push(p);
                }
            }
        }
    }
    Ok(seen)
}

/// Digest of the inputs of one output: file contents (with their names, so renames count),
/// the flags and the compiler version.
pub fn digest(files: &[PathBuf], flags: &[String], compiler_version: &str) -> Result<String> {
    let mut h = Sha256::new();
    h.update(b"qsa-build-stamp-v1\0");
    h.update(compiler_version.as_bytes());
    h.update(b"\0");
    for f in flags {
        h.update(f.as_bytes());
        h.update(b"\0");
    }
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
        h.update(
            f.file_name()
                .map(|n| n.as_encoded_bytes())
                .unwrap_or_default(),
        );
        h.update(b"\0");
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// True if `stamp` holds `digest` and every output exists.
pub fn up_to_date(stamp: &Path, digest: &str, outputs: &[PathBuf]) -> bool {
    std::fs::read_to_string(stamp).is_ok_and(|s| s.trim() == digest)
        && outputs.iter().all(|o| o.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_are_transitive_and_digest_follows_them() {
        let dir = std::env::temp_dir().join(format!("qsa-stamp-test-{}", std::process::id()));
        let common = dir.join("common");
        std::fs::create_dir_all(&common).unwrap();
        std::fs::write(
            dir.join("k.cu"),
            "#include \"common/a.h\"\n#include <cuda.h>\n",
        )
        .unwrap();
        std::fs::write(common.join("a.h"), "#pragma once\n#  include \"b.h\"\n").unwrap();
        std::fs::write(common.join("b.h"), "int b;\n").unwrap();
        let inc = local_includes(&dir.join("k.cu"), std::slice::from_ref(&dir)).unwrap();
        let names: Vec<_> = inc
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["a.h", "b.h"]);

        let mut files = vec![dir.join("k.cu")];
        files.extend(inc);
        let flags = vec!["-O3".to_string()];
        let d1 = digest(&files, &flags, "nvcc 13.0.88").unwrap();
        assert_eq!(d1, digest(&files, &flags, "nvcc 13.0.88").unwrap());
        assert_ne!(d1, digest(&files, &flags, "nvcc 13.0.89").unwrap());
        assert_ne!(
            d1,
            digest(&files, &["-O2".to_string()], "nvcc 13.0.88").unwrap()
        );
        std::fs::write(common.join("b.h"), "int b2;\n").unwrap();
        assert_ne!(d1, digest(&files, &flags, "nvcc 13.0.88").unwrap());

        let stamp = dir.join("k.stamp");
        std::fs::write(&stamp, format!("{d1}\n")).unwrap();
        assert!(up_to_date(&stamp, &d1, &[dir.join("k.cu")]));
        assert!(!up_to_date(&stamp, "other", &[dir.join("k.cu")]));
        assert!(!up_to_date(&stamp, &d1, &[dir.join("missing.cubin")]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
