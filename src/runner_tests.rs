//! `--dump`: a failing parity check on the CPU target (a planted broken top-k) is dumped as
//! .npy files that numpy opens, and a Python script finds every differing id from them, not
//! only the five the message shows.
//!
//! Needs python3 with numpy: missing, the test prints SKIPPED (not captured); with
//! QSA_REQUIRE_NUMPY=1 (set by CI through .ci/test) it fails instead.

use super::{run_target, RunSpec};
use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, BackendResult, DeviceInfo, Prepared};
use crate::dispatch::Switches;
use crate::dump::{Dumper, Index};
use crate::matrix::{Matrix, Suite};
use crate::problem::{Output, Problem};
use crate::results::Status;
use crate::suites::bench::BenchGolden;
use crate::suites::Filter;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// The planted fault: in query `Q` (300 candidates, k = 64 in topk_edges_small) the 7
/// largest selected ids are swapped for the 7 smallest unselected ones.
const Q: usize = 5;
const SWAPPED: usize = 7;

struct Broken {
    inner: CpuBackend,
    /// (missing, unexpected) ids of query Q, as planted.
    planted: Mutex<Option<(Vec<i32>, Vec<i32>)>>,
}

struct BrokenPrepared<'a> {
    inner: Box<dyn Prepared + 'a>,
    k: usize,
    planted: &'a Mutex<Option<(Vec<i32>, Vec<i32>)>>,
}

impl Prepared for BrokenPrepared<'_> {
    fn dispatched(&self) -> String {
        self.inner.dispatched()
    }
    fn run(&mut self) -> BackendResult<()> {
        self.inner.run()
    }
    fn time(&mut self, reps: usize) -> BackendResult<Vec<f64>> {
        self.inner.time(reps)
    }
    fn output(&mut self) -> BackendResult<Output> {
        let Output::Ids(mut ids) = self.inner.output()? else {
            unreachable!("a top-k case")
        };
        let row = &mut ids[Q * self.k..(Q + 1) * self.k];
        let missing: Vec<i32> = row[self.k - SWAPPED..].to_vec();
        let unexpected: Vec<i32> = (0..).filter(|x| !row.contains(x)).take(SWAPPED).collect();
        row[self.k - SWAPPED..].copy_from_slice(&unexpected);
        row.sort_unstable();
        *self.planted.lock().unwrap() = Some((missing, unexpected));
        Ok(Output::Ids(ids))
    }
}

impl Backend for Broken {
    fn device(&self) -> DeviceInfo {
        self.inner.device()
    }
    fn prepare<'a>(
        &'a self,
        switches: &Switches,
        problem: &'a Problem,
    ) -> BackendResult<Box<dyn Prepared + 'a>> {
        let Problem::Topk(p) = problem else {
            unreachable!("a top-k case")
        };
        Ok(Box::new(BrokenPrepared {
            inner: self.inner.prepare(switches, problem)?,
            k: p.k,
            planted: &self.planted,
        }))
    }
}

const FIND_IDS: &str = r#"
import sys, numpy as np
d = sys.argv[1]
got = np.load(d + "/output_ids.npy")
want = np.load(d + "/reference_ids.npy")
scores = np.load(d + "/input_scores.npy")
assert got.dtype == np.int32 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
assert scores.dtype == np.float32 and scores.shape[0] == got.shape[0], scores.shape
for q in range(got.shape[0]):
    g, w = set(got[q][got[q] >= 0].tolist()), set(want[q][want[q] >= 0].tolist())
    if g != w:
        print(f"q{q} missing {sorted(w - g)} unexpected {sorted(g - w)}")
"#;

fn numpy_here() -> bool {
    Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_failing_parity_check_is_dumped_and_numpy_finds_every_differing_id() {
    if !numpy_here() {
        let why =
            "python3 with numpy is not installed (pip install numpy; .ci/install-test-tools.sh)";
        assert!(
            std::env::var_os("QSA_REQUIRE_NUMPY").is_none(),
            "QSA_REQUIRE_NUMPY is set and {why}"
        );
        eprintln!(
            "SKIPPED a_failing_parity_check_is_dumped_and_numpy_finds_every_differing_id: {why}"
        );
        return;
    }
    let m = Matrix::parse(Path::new("matrix.yaml"), include_str!("../matrix.yaml")).unwrap();
    let backend = Broken {
        inner: CpuBackend::new(),
        planted: Mutex::new(None),
    };
    let dir = tempfile::tempdir().unwrap();
    let dumper = Dumper::new(&dir.path().join("dump"), false).unwrap();
    let filter = Filter {
        cases: vec!["topk_edges_small".into()],
        suites: vec![Suite::Parity],
        variants: vec!["wide".into()],
        dists: vec!["uniform".into()],
        shard: None,
    };
    let spec = RunSpec {
        matrix: &m,
        target: m.target("cpu").unwrap(),
        filter: &filter,
        bench_golden: &BenchGolden::default(),
        repro_extra: String::new(),
        dump: Some(&dumper),
        journal: &dir.path().join("journal.yaml"),
        resume: false,
    };
    let r = run_target(&spec, &backend, &mut |_| {}).unwrap();
    assert_eq!(r.records.len(), 1);
    let rec = &r.records[0];
    assert_eq!(rec.status, Status::Fail, "{rec:?}");
    let (missing, unexpected) = backend.planted.lock().unwrap().clone().unwrap();
    // The message shows 5 of the 7: the dump has them all.
    assert!(
        rec.message
            .contains(&format!("missing ids {:?}", &missing[..5])),
        "{}",
        rec.message
    );

    let index: Index =
        serde_yaml::from_str(&std::fs::read_to_string(dir.path().join("dump/index.yaml")).unwrap())
            .unwrap();
    assert_eq!(index.checks.len(), 1, "only the failing check is dumped");
    let c = &index.checks[0];
    assert_eq!(
        (
            c.suite.as_str(),
            c.case.as_str(),
            c.dist.as_str(),
            c.variant.as_str()
        ),
        ("parity", "topk_edges_small", "uniform", "wide")
    );
    let files: Vec<&str> = c.files.iter().map(|f| f.file.as_str()).collect();
    assert_eq!(
        files,
        [
            "input_scores.npy",
            "input_active.npy",
            "output_ids.npy",
            "reference_ids.npy"
        ]
    );
    let o = Command::new("python3")
        .args(["-c", FIND_IDS])
        .arg(dir.path().join("dump").join(&c.dir))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("q{Q} missing {missing:?} unexpected {unexpected:?}")
    );
}
