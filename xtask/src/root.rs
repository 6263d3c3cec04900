//! The project root, found at run time: the nearest directory at or above the current one
//! that holds `matrix.yaml` and a `Cargo.toml` with a `[workspace]`. Not the compile-time
//! `CARGO_MANIFEST_DIR`: a copied checkout (`cp -a`) whose xtask binary was not rebuilt
//! would otherwise build and run the original tree's runner against the original golden/.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static ROOT: OnceLock<PathBuf> = OnceLock::new();

/// Find the root above `start`.
pub fn find(start: &Path) -> Result<PathBuf, String> {
    for dir in start.ancestors() {
        let is_workspace = std::fs::read_to_string(dir.join("Cargo.toml"))
            .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"));
        if is_workspace && dir.join("matrix.yaml").is_file() {
            return Ok(dir.to_path_buf());
        }
    }
    Err(format!(
        "no qsa project above {}: cargo xtask looks for the directory holding matrix.yaml and \
         a Cargo.toml with [workspace]; run it inside a qsa checkout",
        start.display()
    ))
}

/// Find the root above the current directory once, for the whole process (main calls this
/// before any command runs, so a wrong directory is an error before any work starts).
pub fn init() -> Result<(), String> {
    let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    let root = find(&cwd)?;
    let _ = ROOT.set(root);
    Ok(())
}

/// The root `init` found. Unit tests, which do not run main, search from their own
/// directory (cargo runs them in xtask/).
pub fn get() -> PathBuf {
    ROOT.get_or_init(|| {
        let cwd = std::env::current_dir().unwrap_or_default();
        find(&cwd).unwrap_or_else(|_| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .map_or(cwd, Path::to_path_buf)
        })
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_nearest_workspace_with_a_matrix() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("copy");
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("matrix.yaml"), "").unwrap();
        // A member crate's Cargo.toml (no [workspace]) is passed over.
        std::fs::write(root.join("src/Cargo.toml"), "[package]\n").unwrap();
        std::fs::write(root.join("src/matrix.yaml"), "").unwrap();
        std::fs::write(root.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        assert_eq!(find(&root.join("src/deep")).unwrap(), root);
        let err = find(dir.path()).unwrap_err();
        assert!(
            err.contains("no qsa project above") && err.contains("matrix.yaml"),
            "{err}"
        );
    }
}
