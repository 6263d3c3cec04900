//! What the emulator's family tests share: the repository's matrix.yaml, a target's caps
//! from it, switches from (key, value) pairs, and the relative error the attention tests
//! judge against FP64.
#![allow(dead_code)] // each test binary uses its own subset

use qsa::dispatch::{Switches, TargetCaps};
use qsa::matrix::Matrix;
use std::path::Path;

pub fn matrix() -> Matrix {
    Matrix::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix.yaml")).unwrap()
}

pub fn caps(m: &Matrix, name: &str) -> TargetCaps {
    m.target(name).unwrap().caps()
}

pub fn switches(pairs: &[(&str, &str)]) -> Switches {
    Switches::from_pairs(pairs)
}

/// max |got - want| / max |want| over finite entries; a non-finite reference (a -inf lse:
/// no visible key) must be matched exactly, and a NaN where the reference is finite is an
/// infinite error (f64::max drops a NaN operand, so without that a NaN output read as 0).
pub fn rel_max(name: &str, got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{name}: length");
    let scale = want
        .iter()
        .filter(|x| x.is_finite())
        .fold(0f64, |a, x| a.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if w.is_finite() {
                let e = (g as f64 - w).abs() / scale;
                if e.is_nan() {
                    f64::INFINITY
                } else {
                    e
                }
            } else if (g as f64) == w {
                0.0
            } else {
                f64::INFINITY
            }
        })
        .fold(0f64, f64::max)
}

/// The attention gate's `mma` limit (matrix.yaml gates.error_limits): relative max error.
pub const MMA_LIMIT: f64 = 5e-5;

/// A decode forward's o and lse against FP64, each within MMA_LIMIT. The message reads
/// "<kind> <what> <o|lse>: relative max error E past L<why>" (the curated mutants' expected
/// texts match it).
pub fn assert_o_lse(
    kind: &str,
    what: &str,
    got: &qsa::problem::AttnForward,
    want: &qsa::reference::attention::AttnForwardF64,
    why: &str,
) {
    for (n, g, w) in [("o", &got.o, &want.o), ("lse", &got.lse, &want.lse)] {
        let e = rel_max(n, g, w);
        assert!(
            e <= MMA_LIMIT,
            "{kind} {what} {n}: relative max error {e:e} past {MMA_LIMIT:e}{why}"
        );
    }
}

/// Runs `check` on every item, on as many threads as the machine has (2 in CI). The emulated
/// decode suites are one long test per binary (~50 s each on the 2-core CI machine,
/// 2026-12-03): run item by item they leave a core idle, since cargo runs test binaries one
/// after another. The emulator runs launches of several threads at once (cargo's own test
/// threads do). A failing item's panic message is printed by its thread (captured with the
/// test's output) and fails the test once the other threads are done.
pub fn par_each<T: Sync>(items: &[T], check: impl Fn(&T) + Sync) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    check(item);
                }
            });
        }
    });
}
