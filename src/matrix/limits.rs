//! A case's shape against the kernels' limits, at parse time: the same pure dispatch and
//! launch-planning functions the backends call (src/dispatch, src/gpu/scores.rs `plan_on`),
//! for every target the case runs on and every variant it lists, so a shape no kernel takes
//! is an error naming the field before any work, not a failed check for each target.

use super::{Case, Matrix};
use crate::dispatch::topk::{MAX_K, MAX_N};
use crate::dispatch::Vendor;

/// Most bytes of generated inputs one case may take. Not a kernel limit: a guard against a
/// typo in a size that would make the runner allocate (and abort) instead of reporting. The
/// largest case of matrix.yaml, attn_prefill_16k, takes 3.4 GB (`cases::input_bytes`); the
/// H200 has 141 GB.
pub const MAX_INPUT_BYTES: usize = 32 << 30;

/// A limit a case breaks: the field (below `cases[i]`) and the message.
pub struct Broken {
    pub field: &'static str,
    pub message: String,
}

fn broken(field: &'static str, message: String) -> Result<(), Broken> {
    Err(Broken { field, message })
}

/// Check `c` (already checked for one family, sizes >= 1 and known variants and targets).
pub fn check(m: &Matrix, c: &Case) -> Result<(), Broken> {
    if let Some(s) = &c.topk {
        if s.n > MAX_N {
            return broken("topk.n", format!(
                "n = {} exceeds the top-k kernels' limit of {MAX_N} (MAX_N in src/dispatch/topk.rs)",
                s.n
            ));
        }
        if s.capacity > MAX_N {
            return broken("topk.capacity", format!(
                "capacity = {} exceeds the top-k kernels' limit of {MAX_N} (MAX_N in src/dispatch/topk.rs)",
                s.capacity
            ));
        }
        if s.k > MAX_K {
            return broken("topk.k", format!(
                "k = {} exceeds the top-k kernels' limit of {MAX_K} (MAX_K in src/dispatch/topk.rs)",
                s.k
            ));
        }
        if s.queries > i32::MAX as usize {
            return broken(
                "topk.queries",
                format!(
                    "queries = {} exceeds the kernels' int32 argument",
                    s.queries
                ),
            );
        }
    }
    match crate::cases::input_bytes(c) {
        Some(b) if b <= MAX_INPUT_BYTES => {}
        b => {
            let family = c.family().name();
            return broken(
                family,
                format!(
                "the inputs of this shape take {} bytes, over the {MAX_INPUT_BYTES}-byte limit \
                 (MAX_INPUT_BYTES in src/matrix/limits.rs): is a size mistyped?",
                b.map_or("more than 2^64".to_string(), |b| b.to_string())
            ),
            );
        }
    }
    // What each target would dispatch, as the backends will.
    for t in m.targets.iter().filter(|t| c.runs_on(t)) {
        for v in &c.variants {
            let passes: &[bool] = if c.attention.is_some() {
                &[false, true]
            } else {
                &[false]
            };
            for &backward in passes {
                // Head-major K / V have no GPU backward by design: those rows are reported
                // `unsupported` (src/gpu/attention/plan.rs), not a broken case.
                let hnd = c.attention.as_ref().map(|a| a.kv_layout)
                    == Some(crate::problem::KvLayout::Hnd);
                if backward && hnd {
                    continue;
                }
                if let Err(e) = crate::plan::predicted_kernel(m, t, c, v, backward) {
                    return broken(
                        c.family().name(),
                        format!(
                            "variant `{v}` on target `{}`: {e}; or limit the case's `targets`",
                            t.name
                        ),
                    );
                }
            }
            if let (Some(s), true) = (&c.scores, t.vendor != Vendor::Cpu) {
                let sw = m
                    .variant(c.family(), v)
                    .map(|x| x.switches())
                    .unwrap_or_default();
                let caps = t.caps();
                let kernel = crate::dispatch::scores::choose_for(&caps, &sw, s.queries);
                let shared = caps.shared_per_block;
                let tile =
                    crate::dispatch::scores::tc_tile_on(&caps, &sw, kernel, s.queries, s.heads);
                if let Err(e) = crate::gpu::scores::plan_on(
                    kernel,
                    tile,
                    crate::dispatch::scores::tc_engine(&caps, &sw, tile),
                    (s.queries, s.heads, s.blocks),
                    shared,
                    caps.multiprocessors,
                    &sw,
                ) {
                    return broken(
                        "scores",
                        format!(
                            "variant `{v}` on target `{}`: {e}; or limit the case's `targets`",
                            t.name
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}
