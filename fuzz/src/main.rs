//! `qsa-fuzz`: fuzz one reader for a time, or replay a corpus.
//!
//!   cargo run --profile fuzz -p qsa-fuzz -- --target npy --seconds 600 \
//!       --corpus fuzz/corpus/npy --out target/fuzz-out/npy --jobs 16
//!
//! New corpus entries go to <out>/corpus, findings (panics, over-long messages) to
//! <out>/crashes as <hash>.bin with <hash>.txt saying why. Exit 1 when anything was found.

use clap::Parser;
use qsa_fuzz::{engine, Target};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "qsa-fuzz", about = "Mutational fuzzing of qsa's input readers")]
struct Args {
    /// npy, matrix or cases.
    #[arg(long, value_parser = Target::parse)]
    target: Target,
    /// Seed inputs (a folder of files; only read).
    #[arg(long)]
    corpus: PathBuf,
    /// Where new corpus entries and findings go.
    #[arg(long, default_value = "target/fuzz-out")]
    out: PathBuf,
    /// How long to fuzz.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Threads (default: every core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Most new corpus entries to keep.
    #[arg(long, default_value_t = 2000)]
    max_new: usize,
    /// Random seed of the first thread (the others count up from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run each corpus file once and report findings, instead of fuzzing.
    #[arg(long)]
    replay: bool,
    /// With --replay: print each file's outcome signature (what made it join the corpus).
    #[arg(long)]
    show: bool,
}

fn main() -> ExitCode {
    let a = Args::parse();
    if a.replay && a.show {
        for f in engine::corpus_files(&a.corpus).unwrap_or_default() {
            let data = std::fs::read(&f).unwrap_or_default();
            let sig = match engine::run_caught(a.target, &data) {
                Ok(out) => qsa_fuzz::signature(&out),
                Err(why) => format!("FINDING {why}"),
            };
            println!("{}\t{sig}", f.display());
        }
        return ExitCode::SUCCESS;
    }
    if a.replay {
        return match engine::replay(a.target, &a.corpus) {
            Ok((n, bad)) => {
                for b in &bad {
                    println!("FINDING {b}");
                }
                println!("replayed {n} inputs: {} findings", bad.len());
                ExitCode::from(u8::from(!bad.is_empty()))
            }
            Err(e) => {
                eprintln!("error: {}: {e}", a.corpus.display());
                ExitCode::from(2)
            }
        };
    }
    let cfg = engine::Config {
        target: a.target,
        corpus: a.corpus,
        out: a.out,
        seconds: a.seconds,
        jobs: a
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        seed: a.seed,
        max_new: a.max_new,
    };
    let start = std::time::Instant::now();
    match engine::fuzz(&cfg) {
        Ok(s) => {
            println!(
                "{}: {} s, {} execs, {} seeds, {} new corpus entries in {}, {} findings in {}",
                cfg.target.name(),
                start.elapsed().as_secs(),
                s.execs,
                s.seeds,
                s.new_entries,
                cfg.out.join("corpus").display(),
                s.findings,
                cfg.out.join("crashes").display()
            );
            ExitCode::from(u8::from(s.findings > 0))
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
