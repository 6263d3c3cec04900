//! `cargo xtask mutants`: plant each curated regression (`mutants/*.yaml`) in a scratch
//! copy of the tree, run the command that must catch it, and fail unless it does.
//!
//! A gate never seen failing is not a gate: this proves that each named check still fails
//! on the regression it guards against, and keeps proving it as the code moves.

mod exec;
mod in_place;
mod scratch;
mod spec;

use anyhow::{bail, Result};
use exec::Finished;
use spec::Mutant;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// `cargo xtask mutants` options.
#[derive(clap::Args, Debug, Clone)]
#[command(
    long_about = "Plant each curated mutant (mutants/*.yaml: a small edit that re-creates a regression, \
and the narrowest command that must catch it) in a scratch copy of the tree and run that command.\n\n\
Verdicts:\n  \
CAUGHT     the command failed and its output contains the mutant's `expect` text\n  \
SURVIVED   the command passed: the check it names does not guard that regression\n  \
MISFIRED   the command failed without printing `expect` (a compile error, a different\n             \
test, the time limit): it failed for another reason, so the check proves nothing\n\n\
Before the mutants, each distinct command must pass on the unmutated tree (its baseline), and \
must not already print `expect`; otherwise its mutants are not run and the harness fails. A \
`find` that does not occur exactly once in its file is a stale mutant (exit 2).\n\n\
The scratch tree is target/mutants/tree: the files git knows about, build/, .venv-cuda and .toolchains. \
It keeps its own target/ (CARGO_TARGET_DIR), so the first run builds everything once and each \
mutant after that is an incremental build. Every command's full output is in \
target/mutants/logs/. The mutated file is restored after each mutant, and every run \
re-syncs the tree first (so even a killed run leaves nothing behind).\n\n\
--in-place plants in the working tree itself, so the commands reuse its own build: for a \
throwaway checkout (CI). It refuses files with changes not in git's index, since a killed run \
leaves its mutant planted (`git checkout -- FILE` undoes it).\n\n\
Writing a mutant: see mutants/README.md; check it with `cargo xtask mutants --only NAME`.",
    after_help = "Exit codes: 0 every mutant caught; 1 a mutant survived or misfired, or a baseline is broken; \
2 bad usage or a stale/invalid mutant file.\n\
Examples:\n  \
cargo xtask mutants --list                      the curated set, with what each plants\n  \
cargo xtask mutants --only cpu-topk-ties-higher-index   check one mutant (repeatable)\n  \
cargo xtask mutants --sample 6                  today's rotating sample of 6\n  \
cargo xtask mutants --sample 6 --in-place       the same in the checkout itself (what CI runs)\n  \
cargo xtask mutants --sample 6 --seed 20423     repeat the sample a run printed\n  \
cargo xtask mutants                             all of them"
)]
pub struct MutantsArgs {
    /// List the mutants (name, what they plant, the command) and exit.
    #[arg(long)]
    pub list: bool,
    /// Only this mutant, by file name without `.yaml` (repeatable).
    #[arg(long = "only", value_name = "NAME")]
    pub only: Vec<String>,
    /// Run N mutants, a window of the sorted set that moves each day, so consecutive days
    /// cover the whole set (the seed is printed; repeat with --seed).
    #[arg(long, value_name = "N")]
    pub sample: Option<usize>,
    /// The sample's seed (default: the day number, UTC days since 1970-01-01).
    #[arg(long, requires = "sample")]
    pub seed: Option<u64>,
    /// Seconds one mutant's command may run before it is killed (a MISFIRE).
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub timeout: u64,
    /// Seconds one baseline may run (the first one may build the whole workspace).
    #[arg(long, value_name = "SECS", default_value_t = 1800)]
    pub baseline_timeout: u64,
    /// The mutant files' directory, relative to the root.
    #[arg(long, default_value = "mutants")]
    pub dir: PathBuf,
    /// The project root (default: this repository).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Plant in the working tree itself, not in target/mutants/tree: the commands reuse the
    /// tree's own build. For a throwaway checkout (CI); refuses files with unstaged changes.
    #[arg(long)]
    pub in_place: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    Caught,
    Survived,
    Misfired(String),
    BrokenBaseline,
    WeakExpect,
}

pub fn run(a: MutantsArgs) -> Result<u8> {
    let root = match &a.root {
        Some(r) => std::fs::canonicalize(r)?,
        None => crate::build::toolchain::project_root(),
    };
    let mut all = spec::load_dir(&root.join(&a.dir))?;
    if all.is_empty() {
        bail!("no mutants in {}", root.join(&a.dir).display());
    }
    if a.list {
        for m in &all {
            println!(
                "{:<40} {}\n{:<40} $ {}",
                m.name,
                m.about.trim(),
                "",
                m.command.trim()
            );
        }
        println!("{} mutants", all.len());
        return Ok(0);
    }
    if !a.only.is_empty() {
        for o in &a.only {
            if !all.iter().any(|m| &m.name == o) {
                let names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
                bail!(
                    "--only {o}: no such mutant in {}; known: {}",
                    a.dir.display(),
                    names.join(", ")
                );
            }
        }
        all.retain(|m| a.only.contains(&m.name));
    }
    if let Some(n) = a.sample {
        let seed = a.seed.unwrap_or_else(day_number);
        let total = all.len();
        all = sample(all, n, seed);
        println!(
            "sample: {} of {total} mutants, seed {seed} (repeat with --sample {n} --seed {seed}): {}",
            all.len(),
            all.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    // A mutant whose command needs what this machine lacks (a GPU) is skipped, saying why.
    let mut skipped = 0;
    all.retain(|m| match m.requires.iter().find_map(|r| r.unmet()) {
        Some(why) => {
            println!("skipped {}: {why}", m.name);
            skipped += 1;
            false
        }
        None => true,
    });
    if all.is_empty() {
        println!("mutants: none to run here ({skipped} skipped: requirements not met)");
        return Ok(0);
    }
    let start = Instant::now();
    exec::install_ctrlc();

    let work = root.join("target/mutants");
    let tree = if a.in_place {
        in_place::check_restorable(&root, &all)?;
        println!(
            "in place: planting in {} itself (each file restored after its mutant)",
            root.display()
        );
        root.clone()
    } else {
        let tree = work.join("tree");
        let s = scratch::sync(&root, &tree)?;
        for profile in scratch::seed_target(&root, &tree)? {
            println!("seeded the scratch tree's target/{profile} with a copy of target/{profile} (saves a cold build)");
        }
        println!(
            "scratch tree {}: {} files copied, {} unchanged, {} removed",
            tree.display(),
            s.copied,
            s.unchanged,
            s.removed
        );
        tree
    };
    // Every mutant's edits must apply before anything runs: a stale one is a config error.
    let mut stale = Vec::new();
    for m in &all {
        for f in m.files() {
            match std::fs::read_to_string(tree.join(f)) {
                Ok(text) => {
                    if let Err(e) = spec::apply(m, f, &text) {
                        stale.push(e.to_string());
                    }
                }
                Err(e) => stale.push(format!(
                    "stale mutant {} ({}): cannot read {f}: {e}",
                    m.name,
                    m.source.display()
                )),
            }
        }
    }
    if !stale.is_empty() {
        bail!("{}", stale.join("\n"));
    }

    let logs = work.join("logs");
    let baselines = run_baselines(&all, &tree, &logs, Duration::from_secs(a.baseline_timeout))?;
    if exec::interrupted() {
        println!("interrupted");
        return Ok(130);
    }

    let mut verdicts: Vec<(String, Verdict)> = Vec::new();
    let width = all.iter().map(|m| m.name.len()).max().unwrap_or(0);
    for (i, m) in all.iter().enumerate() {
        let base = &baselines[m.command.as_str()];
        let (verdict, secs) = if !base.passed() {
            (Verdict::BrokenBaseline, 0.0)
        } else if base.output.contains(m.expect.as_str()) {
            (Verdict::WeakExpect, 0.0)
        } else {
            let f = run_mutant(m, &tree, &logs, Duration::from_secs(a.timeout))?;
            if exec::interrupted() {
                println!("interrupted during {} (its file is restored)", m.name);
                return Ok(130);
            }
            let v = judge(m, &f);
            report_problem(m, &v, &f, base);
            (v, f.secs)
        };
        if matches!(verdict, Verdict::BrokenBaseline | Verdict::WeakExpect) {
            report_problem(m, &verdict, base, base);
        }
        println!(
            "[{:>2}/{}] {:<width$}  {:<15} {:>6.1}s",
            i + 1,
            all.len(),
            m.name,
            label(&verdict),
            secs
        );
        verdicts.push((m.name.clone(), verdict));
    }
    let count = |f: fn(&Verdict) -> bool| verdicts.iter().filter(|(_, v)| f(v)).count();
    let caught = count(|v| *v == Verdict::Caught);
    let survived = count(|v| *v == Verdict::Survived);
    let misfired = count(|v| matches!(v, Verdict::Misfired(_)));
    let broken = count(|v| *v == Verdict::BrokenBaseline);
    let weak = count(|v| *v == Verdict::WeakExpect);
    let mut line = format!("mutants: {caught} caught, {survived} survived, {misfired} misfired");
    if broken > 0 {
        line += &format!(", {broken} not run (broken baseline)");
    }
    if weak > 0 {
        line += &format!(", {weak} not run (weak expect)");
    }
    if skipped > 0 {
        line += &format!(", {skipped} skipped (requirements not met here)");
    }
    println!("{line} in {}", mmss(start.elapsed()));
    Ok(if caught == verdicts.len() { 0 } else { 1 })
}

/// Each distinct command once, on the unmutated tree.
fn run_baselines<'a>(
    all: &'a [Mutant],
    tree: &Path,
    logs: &Path,
    limit: Duration,
) -> Result<BTreeMap<&'a str, Finished>> {
    let mut out = BTreeMap::new();
    let mut commands: Vec<&str> = all.iter().map(|m| m.command.as_str()).collect();
    commands.sort();
    commands.dedup();
    for (i, c) in commands.iter().enumerate() {
        if exec::interrupted() {
            break;
        }
        let log = logs.join(format!("baseline-{i}.log"));
        let f = exec::run(c, tree, &log, limit)?;
        println!(
            "baseline {}/{}: {} {:>6.1}s  $ {}",
            i + 1,
            commands.len(),
            if f.passed() { "passes" } else { "BROKEN" },
            f.secs,
            c.trim()
        );
        out.insert(*c, f);
    }
    Ok(out)
}

/// Plant, run, restore (the guard restores on error and on unwinding too).
fn run_mutant(m: &Mutant, tree: &Path, logs: &Path, limit: Duration) -> Result<Finished> {
    let mut guards = Vec::new();
    for f in m.files() {
        let path = tree.join(f);
        let original = std::fs::read_to_string(&path)?;
        let mutated = spec::apply(m, f, &original)?;
        let g = Restore { path, original };
        std::fs::write(&g.path, mutated)?;
        guards.push(g);
    }
    exec::run(
        &m.command,
        tree,
        &logs.join(format!("{}.log", m.name)),
        limit,
    )
}

struct Restore {
    path: PathBuf,
    original: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.original) {
            eprintln!(
                "error: cannot restore {} ({e}); the next `cargo xtask mutants` re-syncs a scratch tree \
                 (in place: `git checkout -- FILE`)",
                self.path.display()
            );
        }
    }
}

fn judge(m: &Mutant, f: &Finished) -> Verdict {
    if f.passed() {
        Verdict::Survived
    } else if f.timed_out {
        Verdict::Misfired(f.status())
    } else if f.output.contains(m.expect.as_str()) {
        Verdict::Caught
    } else {
        Verdict::Misfired(format!("{}, without the expected text", f.status()))
    }
}

fn label(v: &Verdict) -> &'static str {
    match v {
        Verdict::Caught => "caught",
        Verdict::Survived => "SURVIVED",
        Verdict::Misfired(_) => "MISFIRED",
        Verdict::BrokenBaseline => "BROKEN BASELINE",
        Verdict::WeakExpect => "WEAK EXPECT",
    }
}

/// What a reviewer needs to act on a mutant that did not count as caught.
fn report_problem(m: &Mutant, v: &Verdict, f: &Finished, base: &Finished) {
    let (what, fix) = match v {
        Verdict::Caught => return,
        Verdict::Survived => (
            "SURVIVED: the command passed with the regression planted".to_string(),
            "the check it names does not guard this regression: strengthen the check (or fix the \
             mutant's command if it names the wrong check)",
        ),
        Verdict::Misfired(why) => (
            format!("MISFIRED ({why}): the command failed, but not with `{}`", m.expect),
            "it failed for another reason (a compile error? another test? the time limit?): read the \
             output, then make the mutant compile, narrow its command, or correct `expect`",
        ),
        Verdict::BrokenBaseline => (
            format!("BROKEN BASELINE ({}): the command fails on the unmutated tree", base.status()),
            "a mutant proves nothing while its check fails anyway: fix the tree or the command",
        ),
        Verdict::WeakExpect => (
            format!("WEAK EXPECT: the passing baseline already prints `{}`", m.expect),
            "choose text that only the failure prints (an assertion message, not a test name)",
        ),
    };
    // For a weak expect, the lines that print it say more than the tail.
    let shown = if *v == Verdict::WeakExpect {
        let hits: Vec<&str> = f
            .output
            .lines()
            .filter(|l| l.contains(m.expect.as_str()))
            .take(5)
            .collect();
        (
            format!(
                "lines of the passing output that contain it (all of it: {})",
                f.log.display()
            ),
            hits.iter()
                .map(|l| format!("    | {l}\n"))
                .collect::<String>(),
        )
    } else {
        (
            format!("last lines of the output (all of it: {})", f.log.display()),
            f.tail(25),
        )
    };
    println!(
        "\n--- mutant {} ({})\n    plants: {}\n    {what}\n    fix: {fix}\n    $ {}\n    {}:\n{}",
        m.name,
        m.source.display(),
        m.about.trim(),
        m.command.trim(),
        shown.0,
        shown.1
    );
}

/// `n` mutants from the name-sorted set: the window starting at `seed * n`, so seeds
/// d, d+1, ... cover every mutant within ceil(len / n) runs.
fn sample(all: Vec<Mutant>, n: usize, seed: u64) -> Vec<Mutant> {
    let len = all.len();
    if n >= len {
        return all;
    }
    let start = (seed % len as u64) as usize * n % len;
    let mut picked: Vec<usize> = (0..n).map(|i| (start + i) % len).collect();
    picked.sort();
    let mut all: Vec<Option<Mutant>> = all.into_iter().map(Some).collect();
    picked.into_iter().filter_map(|i| all[i].take()).collect()
}

fn day_number() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0)
}

fn mmss(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m {:02}s", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: usize) -> Vec<Mutant> {
        (0..n)
            .map(|i| Mutant {
                name: format!("m{i:02}"),
                source: PathBuf::new(),
                about: String::new(),
                edits: vec![],
                command: String::new(),
                expect: String::new(),
                requires: vec![],
            })
            .collect()
    }

    #[test]
    fn consecutive_seeds_cover_the_set() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 100..104 {
            let s = sample(named(10), 3, seed);
            assert_eq!(s.len(), 3);
            seen.extend(s.into_iter().map(|m| m.name));
        }
        assert_eq!(
            seen.len(),
            10,
            "4 runs of 3 must cover 10 mutants: {seen:?}"
        );
        let a: Vec<String> = sample(named(10), 3, 7)
            .into_iter()
            .map(|m| m.name)
            .collect();
        let b: Vec<String> = sample(named(10), 3, 7)
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(a, b, "a seed repeats its sample");
        assert_eq!(sample(named(2), 5, 1).len(), 2);
    }
}
