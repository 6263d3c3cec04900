//! One `cargo xtask matrix` at a time per output directory: two runs writing the same
//! `junit.xml`, `summary.md` and `<target>/results.yaml` would leave the last one's files
//! mixed with the first one's. An advisory lock (flock, through fs4) on `<out>/.matrix.lock`
//! is released by the kernel when the process ends, however it ends, so a crashed run never
//! leaves a stale lock; the file keeps the holder's pid for the message.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Held for the whole run; dropping it (or the process ending) releases the lock.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

pub fn lock_path(out: &Path) -> PathBuf {
    out.join(".matrix.lock")
}

/// Take the lock of `out`, or say who holds it and what to do.
pub fn acquire(out: &Path) -> Result<RunLock, String> {
    let path = lock_path(out);
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    // Not truncated before the lock is ours: the holder's pid is in it.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("cannot open the run lock {}: {e}", path.display()))?;
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => {}
        Err(fs4::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() {
                "another process".to_string()
            } else {
                format!("another `cargo xtask matrix` ({holder})")
            };
            return Err(format!(
                "{who} is writing to {}: wait for it to finish, or give this run its own \
                 output directory with --out DIR (lock: {})",
                out.display(),
                path.display()
            ));
        }
        Err(fs4::TryLockError::Error(e)) => {
            return Err(format!("cannot lock {}: {e}", path.display()));
        }
    }
    let me = format!(
        "pid {}, started {}",
        std::process::id(),
        qsa::results::utc_now()
    );
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(me.as_bytes()));
    if let Err(e) = written {
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    Ok(RunLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path()).unwrap();
        // flock locks belong to the open file: a second open, even in this process,
        // is refused as another process's would be.
        let err = acquire(dir.path()).unwrap_err();
        assert!(
            err.contains(&format!("(pid {},", std::process::id())) && err.contains("--out DIR"),
            "{err}"
        );
        drop(held);
        acquire(dir.path()).unwrap();
    }
}
