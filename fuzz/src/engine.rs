//! The fuzzing loop: pick a corpus entry, mutate it, run it with panics caught; keep inputs
//! that make a new outcome signature (shrunk first), write every finding to the output
//! folder. Threads share the corpus and the set of signatures.

use crate::{check, mutate, signature, Outcome, Target};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::collections::HashSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// A run slower than this is written to `<out>/slow/` (the readers are linear in the input).
const SLOW: Duration = Duration::from_secs(2);

thread_local! {
    static PANIC: RefCell<String> = const { RefCell::new(String::new()) };
    static CATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Panics inside `run_caught` are expected: keep their message and location for the report
/// instead of printing each to stderr. Any other panic (a failing test) prints as usual.
fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.with(|c| c.get()) {
                PANIC.with(|p| *p.borrow_mut() = info.to_string());
            } else {
                default(info);
            }
        }))
    });
}

/// Run one input: its outcome, or why it is a finding (a panic, with its location).
pub fn run_caught(target: Target, data: &[u8]) -> Result<Outcome, String> {
    run_caught_with(|| check(target, data))
}

/// `f`'s result, or the message and location of its panic.
pub fn run_caught_with(f: impl FnOnce() -> Result<Outcome, String>) -> Result<Outcome, String> {
    quiet_panics();
    CATCHING.with(|c| c.set(true));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(false));
    match r {
        Ok(r) => r,
        Err(_) => Err(format!("panic: {}", PANIC.with(|p| p.borrow().clone()))),
    }
}

pub fn hash(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The files of a corpus folder (not recursive), sorted.
pub fn corpus_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    Ok(v)
}

/// Every finding of a corpus folder, as `file: why`.
pub fn replay(target: Target, dir: &Path) -> std::io::Result<(usize, Vec<String>)> {
    let files = corpus_files(dir)?;
    let mut bad = Vec::new();
    for f in &files {
        let data = std::fs::read(f)?;
        if let Err(why) = run_caught(target, &data) {
            bad.push(format!("{}: {why}", f.display()));
        }
    }
    Ok((files.len(), bad))
}

pub struct Config {
    pub target: Target,
    pub corpus: PathBuf,
    pub out: PathBuf,
    pub seconds: u64,
    pub jobs: usize,
    /// Stop adding corpus entries past this many (the signature is a heuristic: a class
    /// of messages it fails to normalize must not fill the disk).
    pub max_new: usize,
    pub seed: u64,
}

#[derive(Debug, Default)]
pub struct Stats {
    pub execs: u64,
    pub seeds: usize,
    pub new_entries: usize,
    pub findings: usize,
}

struct Shared {
    corpus: Mutex<Vec<Vec<u8>>>,
    seen: Mutex<HashSet<String>>,
    execs: AtomicU64,
    new_entries: AtomicU64,
    findings: Mutex<HashSet<String>>,
}

/// Fuzz `cfg.target` for `cfg.seconds` on `cfg.jobs` threads.
pub fn fuzz(cfg: &Config) -> std::io::Result<Stats> {
    for sub in ["corpus", "crashes", "slow"] {
        std::fs::create_dir_all(cfg.out.join(sub))?;
    }
    let mut seeds = Vec::new();
    for f in corpus_files(&cfg.corpus)? {
        seeds.push(std::fs::read(f)?);
    }
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    let shared = Shared {
        corpus: Mutex::new(Vec::new()),
        seen: Mutex::new(HashSet::new()),
        execs: AtomicU64::new(0),
        new_entries: AtomicU64::new(0),
        findings: Mutex::new(HashSet::new()),
    };
    let n_seeds = seeds.len();
    for s in seeds {
        match run_caught(cfg.target, &s) {
            Ok(out) => {
                shared.seen.lock().unwrap().insert(signature(&out));
            }
            Err(why) => finding(cfg, &shared, &s, &why)?,
        }
        shared.corpus.lock().unwrap().push(s);
    }
    let deadline = Instant::now() + Duration::from_secs(cfg.seconds);
    std::thread::scope(|scope| {
        for j in 0..cfg.jobs.max(1) {
            let shared = &shared;
            scope.spawn(move || worker(cfg, shared, cfg.seed.wrapping_add(j as u64), deadline));
        }
    });
    let findings = shared.findings.lock().unwrap().len();
    Ok(Stats {
        execs: shared.execs.load(Ordering::Relaxed),
        seeds: n_seeds,
        new_entries: shared.new_entries.load(Ordering::Relaxed) as usize,
        findings,
    })
}

fn worker(cfg: &Config, shared: &Shared, seed: u64, deadline: Instant) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let dict = cfg.target.dictionary();
    while Instant::now() < deadline {
        let (mut data, other) = {
            let c = shared.corpus.lock().unwrap();
            (
                c[rng.usize(0..c.len())].clone(),
                c[rng.usize(0..c.len())].clone(),
            )
        };
        mutate::mutate(&mut rng, &mut data, &other, &dict);
        let start = Instant::now();
        let r = run_caught(cfg.target, &data);
        shared.execs.fetch_add(1, Ordering::Relaxed);
        if start.elapsed() > SLOW {
            let _ = std::fs::write(cfg.out.join("slow").join(hash(&data)), &data);
        }
        match r {
            Err(why) => {
                if let Err(e) = finding(cfg, shared, &data, &why) {
                    eprintln!("cannot write a finding: {e}");
                }
            }
            Ok(out) => {
                let sig = signature(&out);
                if shared.seen.lock().unwrap().contains(&sig)
                    || shared.new_entries.load(Ordering::Relaxed) >= cfg.max_new as u64
                {
                    continue;
                }
                let small = shrink(cfg.target, data, &sig);
                if shared.seen.lock().unwrap().insert(sig) {
                    let path = cfg.out.join("corpus").join(hash(&small));
                    if let Err(e) = std::fs::write(path, &small) {
                        eprintln!("cannot write a corpus entry: {e}");
                    }
                    shared.new_entries.fetch_add(1, Ordering::Relaxed);
                    shared.corpus.lock().unwrap().push(small);
                }
            }
        }
    }
}

/// Delete chunks (halves, then smaller) while the signature stays the same: corpus entries
/// a reviewer can read, and a committed corpus of kilobytes.
fn shrink(target: Target, mut data: Vec<u8>, sig: &str) -> Vec<u8> {
    let mut chunk = data.len() / 2;
    let mut budget = 300;
    while chunk > 0 && budget > 0 {
        let mut at = 0;
        while at < data.len() && budget > 0 {
            budget -= 1;
            let end = (at + chunk).min(data.len());
            let mut trial = data.clone();
            trial.drain(at..end);
            match run_caught(target, &trial) {
                Ok(out) if signature(&out) == sig => data = trial,
                _ => at += chunk,
            }
        }
        chunk /= 2;
    }
    data
}

/// Write a finding once per message (the same panic from many inputs is one finding).
fn finding(cfg: &Config, shared: &Shared, data: &[u8], why: &str) -> std::io::Result<()> {
    let key: String = why.lines().next().unwrap_or("").chars().take(300).collect();
    if !shared.findings.lock().unwrap().insert(key) {
        return Ok(());
    }
    let h = hash(data);
    let dir = cfg.out.join("crashes");
    std::fs::write(dir.join(format!("{h}.bin")), data)?;
    std::fs::write(dir.join(format!("{h}.txt")), why)?;
    eprintln!("FINDING {}: {why}", dir.join(format!("{h}.bin")).display());
    Ok(())
}
