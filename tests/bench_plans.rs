//! The side-by-side benches (bench/*.py) launch what the runner launches: each script's
//! `--plan-only` mode records every launch it would make (through bench/qsa_plan.py's `Call`,
//! the code its GPU mode launches with) and this test re-plans each request in-process with
//! `gpu::<family>::launch_plan`, the function the runner's launches come from. A launch rule
//! re-derived or overridden in Python (a grid, a block, shared bytes, a split, an argument)
//! fails here, naming the script, the call and the step.
//!
//! Needs python3 with numpy (no cupy, torch or GPU): missing, the test prints SKIPPED (not
//! captured); with QSA_REQUIRE_NUMPY=1 (set by CI through .ci/test) it fails instead.

use clap::Parser;
use qsa::plan::request::{self, PlanArgs};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    args: PlanArgs,
}

fn numpy_here() -> bool {
    Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// True (after printing why `test` is SKIPPED) when python3 cannot import numpy; with
/// QSA_REQUIRE_NUMPY set (CI) that fails the test instead.
fn skip_without_numpy(test: &str) -> bool {
    if numpy_here() {
        return false;
    }
    let why = "python3 with numpy is not installed (pip install numpy; .ci/install-test-tools.sh)";
    assert!(
        std::env::var_os("QSA_REQUIRE_NUMPY").is_none(),
        "QSA_REQUIRE_NUMPY is set and {why}"
    );
    eprintln!("SKIPPED {test}: {why}");
    true
}

/// f32 arguments travel as the shortest f32 decimal (Rust) or as the f64 of the f32
/// (Python): compare them as f32.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Number(x)) = m.get("f32") {
                let f = x.as_f64().unwrap_or(f64::NAN) as f32;
                m.insert("f32".into(), Value::String(format!("{f:e}")));
            }
            m.values_mut().for_each(normalize);
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// Every call `script` would make, compared with the Rust plan; returns how many calls.
fn compare(script: &str, extra: &[&str]) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("bench").join(script))
        .args(["--plan-only", "--qsa", env!("CARGO_BIN_EXE_qsa")])
        .args(extra)
        .current_dir(root)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "bench/{script} --plan-only failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bench/{script} --plan-only printed no JSON ({e})"));
    let calls = doc["calls"].as_array().expect("a calls list");
    assert!(
        !calls.is_empty(),
        "bench/{script} --plan-only lists no call"
    );
    for call in calls {
        let label = call["label"].as_str().unwrap_or("?");
        let argv: Vec<String> = call["argv"]
            .as_array()
            .expect("argv")
            .iter()
            .map(|a| a.as_str().unwrap_or_default().to_string())
            .collect();
        // argv[0] is the subcommand ("plan"), where clap expects the program's name.
        let mut args = Wrap::try_parse_from(&argv)
            .unwrap_or_else(|e| {
                panic!("bench/{script} call `{label}`: {argv:?} does not parse: {e}")
            })
            .args;
        args.matrix = root.join(&args.matrix);
        let req = request::resolve(&args)
            .unwrap_or_else(|e| panic!("bench/{script} call `{label}`: {e}"));
        let plan = request::launch_plan(&req)
            .unwrap_or_else(|e| panic!("bench/{script} call `{label}`: {e}"));
        let mut want = serde_json::to_value(&plan).expect("plan serializes");
        let mut got = call.clone();
        normalize(&mut want);
        normalize(&mut got);
        for phase in ["setup", "call"] {
            let (w, g) = (
                want[phase].as_array().unwrap(),
                got[phase].as_array().unwrap(),
            );
            for (i, step) in w.iter().enumerate() {
                let made = g.get(i).cloned().unwrap_or(Value::Null);
                assert!(
                    *step == made,
                    "bench/{script} would launch something else than the runner: call `{label}` \
                     (qsa {}), {phase} step {i}:\n  python launches {made}\n  the Rust plan (src/gpu/) says {step}\n\
                     a launch rule is re-derived or overridden in Python: take it from the plan \
                     (bench/qsa_plan.py), never compute it in the script",
                    argv.join(" ")
                );
            }
            assert_eq!(
                g.len(),
                w.len(),
                "bench/{script} call `{label}`: python makes {} {phase} steps, the Rust plan {}",
                g.len(),
                w.len()
            );
        }
    }
    calls.len()
}

#[test]
fn the_benches_launch_what_the_runner_launches() {
    if skip_without_numpy("the_benches_launch_what_the_runner_launches") {
        return;
    }
    // The full case lists (not --quick): every call each script can make.
    let n = compare("topk_vs_torch.py", &[]);
    assert!(n >= 10, "topk: {n} calls");
    let n = compare("scores_vs_torch.py", &[]);
    assert!(n >= 20, "scores: {n} calls");
    let n = compare("attention_vs_torch.py", &["--check", "--bench"]);
    assert!(n >= 40, "attention: {n} calls");
    // The H200 call's sweep (H200.md of branch dechead): q staged per CTA and its probes.
    let n = compare(
        "attention_vs_torch.py",
        &["--bench", "--decode-only", "--decode-sweep", "qs"],
    );
    assert!(n >= 40, "attention --decode-sweep qs: {n} calls");
    // Session 13's call A (docs/results/session12-2026-12-03/plans/dec1q.md): the lean merge and the merge probes.
    let n = compare(
        "attention_vs_torch.py",
        &["--bench", "--decode-only", "--decode-sweep", "lean"],
    );
    assert!(n >= 40, "attention --decode-sweep lean: {n} calls");
    // Session 13's call B (docs/results/session12-2026-12-03/plans/dectma.md): K/V rows by cp.async.bulk, its probes.
    let n = compare(
        "attention_vs_torch.py",
        &["--bench", "--decode-only", "--decode-sweep", "bulk"],
    );
    assert!(n >= 40, "attention --decode-sweep bulk: {n} calls");
    // Session 20's call (issue 13): O's dims split over warp pairs, its probes.
    let n = compare(
        "attention_vs_torch.py",
        &["--bench", "--decode-only", "--decode-sweep", "hd"],
    );
    assert!(n >= 40, "attention --decode-sweep hd: {n} calls");
    // The read floor under the decode (issue 13): the dispatched decode and its copies alone.
    let n = compare("hbm_floor.py", &[]);
    assert!(n >= 8, "hbm_floor: {n} calls");
}

/// What the benches rely on from the binary: JSON on stdout and exit 0; a mistake is exit 2
/// with the reason on stderr and nothing on stdout (a bench reports it as a PlanError).
#[test]
fn qsa_plan_prints_json_or_refuses_with_exit_2() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_qsa"))
            .args(["plan", "--json", "--target", "sm_90"])
            .args(extra)
            .current_dir(root)
            .output()
            .unwrap()
    };
    let plan = |extra: &[&str]| -> Value {
        let ok = run(extra);
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        serde_json::from_slice(&ok.stdout).unwrap()
    };
    // sm_90's cluster variant: one launch, each part's keys in shared memory.
    let v = plan(&["--topk", "nq=3,n=262144,k=2048", "--variant", "cluster"]);
    assert_eq!(v["dispatched"], "cluster");
    assert_eq!(v["call"][0]["kernel"], "qsa_topk_cluster");
    assert_eq!(v["call"][0]["grid"], serde_json::json!([8, 3, 1]));
    assert_eq!(v["call"][0]["shared_bytes"], 131072);
    // sm_90's decode kernel: the speculative one, one launch over the split's chunks (3
    // queries: the float step over chunks of 8,192, one CTA per SM).
    let v = plan(&["--topk", "nq=3,n=262144,k=2048"]);
    assert_eq!(v["dispatched"], "spec");
    assert_eq!(v["module"], "topk");
    assert_eq!(v["call"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["call"][0]["kernel"], "qsa_topk_spec_8k_float");
    assert_eq!(v["call"][0]["grid"], serde_json::json!([32, 3, 1]));
    assert_eq!(
        v["setup"][0],
        serde_json::json!({"op": "zero", "buffer": "ws"})
    );
    // The split, forced: two launches on the same grid and workspace.
    let v = plan(&["--topk", "nq=3,n=262144,k=2048", "--variant", "split"]);
    assert_eq!(v["dispatched"], "split");
    assert_eq!(v["call"][0]["kernel"], "qsa_topk_split_bound");
    assert_eq!(v["call"][1]["kernel"], "qsa_topk_split_select");
    assert_eq!(v["call"][0]["grid"], serde_json::json!([64, 3, 1]));
    let bad = run(&["--topk", "nq=3,n=262144,k=5000"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(bad.stdout.is_empty());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("k = 5000 exceeds the kernels' limit of 4096"),
        "{err}"
    );
}

/// tools/h200-decode-trace/trace.py on synthetic stamps (`dec_trace[CTA][warp][step]`, zeros
/// where nothing stamped) at the H200's scale, nanoseconds since the Unix epoch: its times must
/// keep the clock's 32 ns (session 21's call G found every time rounded to 256 ns, float64's
/// spacing at 1.8e18, because the stamps were converted before the first was subtracted), it
/// must read the clock's step and name a coarse one, and a run without stamps has no step.
#[test]
fn the_decode_trace_tool_keeps_the_clock_resolution() {
    if skip_without_numpy("the_decode_trace_tool_keeps_the_clock_resolution") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let check = r#"
import importlib.util
import numpy as np
spec = importlib.util.spec_from_file_location("dec_trace_tool", "tools/h200-decode-trace/trace.py")
t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
rng = np.random.default_rng(7)
base = 1_764_866_000_123_456_032  # 2026-12-04 in ns since the epoch, on a 32 ns step
def runs(step):
    """Three runs of 4 CTAs x 8 warps: entry, then steps 1-3 at random multiples of `step`."""
    out = []
    for _ in range(3):
        st = np.zeros((4, 8, len(t.STEPS)), dtype=np.uint64)
        st[:, :, 0] = base
        st[:, :, 1:4] = base + step * np.cumsum(rng.integers(1, 80, size=(4, 8, 3)), axis=2)
        out.append(st)
    return out
# Every warp reaches step 1 ("list ready") 1,376 ns after entry: 43 steps of 32 ns, 5.375 of 256.
exact = np.zeros((4, 8, len(t.STEPS)), dtype=np.uint64)
exact[:, :, 0] = base
exact[:, :, 1] = base + 1376
rows, _ = t.summarize([exact], 4, 8)
ready = next(r for r in rows if r[0] == "list ready")
print("list ready (min, median, max us):", ready[1:4])
assert all(abs(v - 1.376) < 1e-9 for v in ready[1:4]),     f"a step 1.376 us after entry reads {ready[1:4]} us: stamps rounded before the subtraction"
coarse, fine = t.clock_step_ns(runs(256), 4, 8), t.clock_step_ns(runs(32), 4, 8)
empty = t.clock_step_ns([np.zeros((4, 8, len(t.STEPS)), dtype=np.uint64)], 4, 8)
print(f"coarse={coarse} fine={fine} empty={empty}")
assert coarse == 256, f"a 256 ns clock read as {coarse} ns"
assert fine == 32, f"a 32 ns clock read as {fine} ns"
assert empty is None, f"no stamps read as a {empty} ns step"
assert "good to 0.26 us only" in t.clock_note(coarse), "a coarse clock is not named in the table header"
assert "good to" not in t.clock_note(fine), "a fine clock is called coarse"
"#;
    let out = Command::new("python3")
        .args(["-c", check])
        .current_dir(root)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "tools/h200-decode-trace/trace.py misreads its stamps:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The H200's own stamps (session 21, call G; one query, g16): its 32 ns step, and the list
    // ready 0.80 / 0.83 / 0.90 us after entry (rounded before the subtraction: 0.77 / 0.77 / 1.02).
    let saved = "docs/results/session21-2026-12-04/g/stamps.npz";
    let out = Command::new("python3")
        .args(["tools/h200-decode-trace/trace.py", "--from", saved])
        .current_dir(root)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "trace.py --from {saved} failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.matches("clock step 32 ns").count(),
        4,
        "the H200's 32 ns clock misread in {saved}:\n{text}"
    );
    assert!(
        text.contains("| list ready | 0.80 | 0.83 | 0.90 |"),
        "the H200's stamps in {saved} no longer read as in session 21's call G (one query's list ready \
         0.80 / 0.83 / 0.90 us):\n{text}"
    );
}
