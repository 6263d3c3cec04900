//! The warp forward's plan (kernels/common/attention_warp_fwd.h, `qsa_attn_warp_fwd_*`): one
//! warp per (batch, token, kv head, 16-head chunk), its own cp.async ring of K / V pieces, no
//! CTA barrier. Reached by `QSA_ATTN_FWD=warp` (choose_forward in attention_ring.rs); its sweep
//! switches are `QSA_ATTN_WARP_WARPS` (warps per CTA), `QSA_ATTN_WARP_KEYS` (64: a piece is a
//! block's K or V rows, `qsa_attn_warp_fwd_*`; 32: half of them, `qsa_attn_warp_h_fwd_*`),
//! `QSA_ATTN_WARP_STAGES` (slots per warp), `QSA_ATTN_WARP_PARTS` (bf16 P's parts in P.V) and
//! `QSA_ATTN_WARP_RESCALE`. Pure functions, like the rest of the dispatch.

use super::{Feature, Switches, TargetCaps, Vendor};
use crate::backend::BackendError;

/// Ids per list the kernel takes: one list slot per lane (WARP_FWD_MAX_T).
pub const WARP_MAX_T: usize = 32;
/// Query heads of one work item (WARP_FWD_ROWS): the mma's 16 rows.
pub const WARP_ROWS: usize = 16;
/// Warps per CTA the kernel is built for (WARP_FWD_MAX_WARPS, its __launch_bounds__).
pub const WARP_MAX_WARPS: usize = 8;
/// Slots per warp (WARP_FWD_MAX_STAGES; ring_wait waits for at most five later groups).
pub const WARP_MAX_STAGES: usize = 6;
/// Bytes of one key's row in a slot: 128 elements of 2 bytes, no pad.
const ROW_BYTES: usize = crate::problem::HEAD_DIM * 2;
/// Defaults, from the same call A1 (ms at the prefill case; the default 15.72): one warp per CTA
/// and two 64-key slots, fla's geometry (32,768 B: six CTAs, six warps per SM on the H200).
/// More slots per warp were slower (3: 19.25, 4: 25.39: four and three warps per SM), so were
/// several warps per CTA (3: 16.81, 7: 16.85: idle tails) and 32-key pieces (4 slots 19.44, 3
/// slots and nine warps per SM 16.44, 6 slots 24.76, 7 warps x 4 slots 19.00).
pub const WARP_DEFAULT_WARPS: usize = 1;
/// Keys per piece (64: a block's K or V rows, 16 KB), and slots per warp by piece size (the same
/// 32 KB: 64-key pieces one in flight while one is computed, 32-key pieces three).
pub const WARP_DEFAULT_KEYS: usize = 64;
pub const WARP_DEFAULT_STAGES: usize = 2;
pub const WARP_DEFAULT_STAGES_HALF: usize = 4;
/// bf16 P in three 16-bit parts (2^-27 relative) as the ring forward; 2 parts (2^-18) ran 15.64
/// ms (-0.5%) at 1.7e-6 .. 2.8e-6 of o error on the emulated cases, at the f32 class's floor
/// (2.5e-6) that judges this kernel: not taken.
pub const WARP_DEFAULT_PARTS: usize = 3;
/// The ring forward's measured default (lazy rescale: RING_DEFAULT_LAZY); exact ran 16.54 ms.
pub const WARP_DEFAULT_LAZY: bool = true;

/// Whether the warp forward is the prefill forward, without `QSA_ATTN_FWD`, where it runs
/// (NVIDIA tensor cores, t <= 32), the staged plan does not split lists and the target is sm_90
/// (measured there only). On the H200 (bench/attention_vs_torch.py --check --bench
/// --prefill-only --fwd-sweep warp, prefill B=4, T=16K, 64 / 4 heads, 16 blocks, bf16,
/// 2026-12-02 09:23 UTC, call A1 of session 8, /work/wt/results/attnfwd-1.md): 15.72 ms
/// (140 TFLOP/s) against the ring forward's 25.43 and fla parallel_nsa's 20.68 in the same
/// process (0.76x fla); every check row passes, and the runner's error suite (90 checks).
pub const WARP_FWD_DEFAULT: bool = true;

/// The warp forward's launch: `warps` per CTA, `stages` slots per warp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpPlan {
    pub warps: usize,
    /// Keys per piece: 64 (`qsa_attn_warp_fwd_*`) or 32 (`qsa_attn_warp_h_fwd_*`).
    pub keys: usize,
    pub stages: usize,
    /// bf16 P's 16-bit parts in P.V (2 or 3); f16 always runs two parts of P * 2^14.
    pub parts: usize,
    /// The running max moves only past a slack (ring_slack in the kernel).
    pub lazy: bool,
    /// Dynamic shared bytes of a CTA.
    pub shared: u32,
}

impl WarpPlan {
    /// The kernel's name without the `qsa_attn_` prefix and the element suffix.
    pub fn kernel(&self) -> &'static str {
        if self.keys == 32 {
            "warp_h"
        } else {
            "warp"
        }
    }
}

/// Dynamic shared bytes of a warp-forward CTA (the kernel's ring: warp w's slots at
/// w * stages slots of `keys` rows).
pub fn warp_shared_bytes(warps: usize, keys: usize, stages: usize) -> usize {
    warps * stages * keys * ROW_BYTES
}

/// Work items (warps) of a call: batch x tokens x kv heads x 16-head chunks of the group.
pub fn warp_items(batch: usize, q_len: usize, hq: usize, hkv: usize) -> usize {
    batch * q_len * hkv * (hq / hkv.max(1)).div_ceil(WARP_ROWS)
}

fn number(sw: &Switches, key: &str, lo: usize, hi: usize) -> Result<Option<usize>, BackendError> {
    let Some(v) = sw.get(key) else {
        return Ok(None);
    };
    match v.parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
        _ => Err(BackendError::Input(format!(
            "{key}={}: expected a whole number from {lo} to {hi}",
            crate::echo::value(v)
        ))),
    }
}

/// The warp forward's plan from the switches (checked on every call, so a bad value is an error
/// on every shape), or None where the kernel cannot run this call: not built (it needs NVIDIA
/// bf16 tensor cores, the kernel's QSA_ATTN_MMA: sm_80+ CUDA) or t > WARP_MAX_T. The caller
/// then falls back to its own choice, as a forced ring falls back to the staged kernel.
pub fn warp_plan(
    caps: &TargetCaps,
    sw: &Switches,
    t: usize,
) -> Result<Option<WarpPlan>, BackendError> {
    let warps = number(sw, "QSA_ATTN_WARP_WARPS", 1, WARP_MAX_WARPS)?;
    let keys = match sw.get("QSA_ATTN_WARP_KEYS") {
        None => WARP_DEFAULT_KEYS,
        Some("64") => 64,
        Some("32") => 32,
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_WARP_KEYS={}: expected 64 or 32",
                crate::echo::value(v)
            )))
        }
    };
    let stages = number(sw, "QSA_ATTN_WARP_STAGES", 2, WARP_MAX_STAGES)?;
    let parts = match sw.get("QSA_ATTN_WARP_PARTS") {
        None => WARP_DEFAULT_PARTS,
        Some("2") => 2,
        Some("3") => 3,
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_WARP_PARTS={}: expected 2 or 3",
                crate::echo::value(v)
            )))
        }
    };
    let lazy = sw.either("QSA_ATTN_WARP_RESCALE", WARP_DEFAULT_LAZY, "exact", "lazy")?;
    let built = caps.vendor == Vendor::Nvidia && caps.has(Feature::Bf16Tc);
    if !built || t > WARP_MAX_T {
        return Ok(None);
    }
    let warps = warps.unwrap_or(WARP_DEFAULT_WARPS);
    let stages = stages.unwrap_or(if keys == 32 {
        WARP_DEFAULT_STAGES_HALF
    } else {
        WARP_DEFAULT_STAGES
    });
    let shared = warp_shared_bytes(warps, keys, stages);
    let limit = caps.shared_per_block as usize;
    if shared > limit {
        return Err(BackendError::Shape(format!(
            "QSA_ATTN_WARP_WARPS={warps} x QSA_ATTN_WARP_STAGES={stages} slots of {keys} keys needs \
             {shared} bytes of shared memory, {} allows {limit}: fewer warps per CTA or fewer slots",
            caps.name
        )));
    }
    Ok(Some(WarpPlan {
        warps,
        keys,
        stages,
        parts,
        lazy,
        shared: shared as u32,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::attention::tests::caps;

    #[test]
    fn warp_plan_defaults_limits_and_fallbacks() {
        let none = Switches::default();
        let mut h200 = caps("sm_90", 227, 132);
        h200.features = vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Clusters];
        assert_eq!(warp_shared_bytes(1, 64, 2), 32_768);
        assert_eq!(warp_shared_bytes(1, 32, 4), 32_768);
        assert_eq!(
            warp_plan(&h200, &none, 16).unwrap(),
            Some(WarpPlan {
                warps: 1,
                keys: 64,
                stages: 2,
                parts: 3,
                lazy: true,
                shared: 32_768
            })
        );
        // Seven warps of two slots: 229,376 B, within the H200's 227 KiB per block.
        let seven = Switches::from_pairs(&[("QSA_ATTN_WARP_WARPS", "7")]);
        assert_eq!(
            warp_plan(&h200, &seven, 16).unwrap().unwrap().shared,
            229_376
        );
        let half = Switches::from_pairs(&[("QSA_ATTN_WARP_KEYS", "32")]);
        let h = warp_plan(&h200, &half, 16).unwrap().unwrap();
        assert_eq!(
            (h.keys, h.stages, h.shared, h.kernel()),
            (32, 4, 32_768, "warp_h")
        );
        let eight = Switches::from_pairs(&[("QSA_ATTN_WARP_WARPS", "8")]);
        let e = warp_plan(&h200, &eight, 16).unwrap_err().to_string();
        assert!(
            e.contains("needs 262144 bytes") && e.contains("fewer warps"),
            "{e}"
        );
        assert_eq!(
            warp_plan(&h200, &none, 33).unwrap(),
            None,
            "t > 32: one list slot per lane; the caller falls back"
        );
        let sm75 = caps("sm_75", 64, 68);
        assert_eq!(warp_plan(&sm75, &none, 16).unwrap(), None, "no bf16 mma");
        let mut gfx950 = caps("gfx950", 160, 256);
        gfx950.vendor = Vendor::Amd;
        gfx950.features = vec![Feature::Bf16Tc];
        assert_eq!(warp_plan(&gfx950, &none, 16).unwrap(), None, "CUDA only");
        assert_eq!(warp_items(4, 16384, 64, 4), 262_144);
        assert_eq!(
            warp_items(1, 5, 8, 2),
            10,
            "group 4: one masked 16-row chunk"
        );
        assert_eq!(warp_items(1, 9, 32, 1), 18, "group 32: two chunks");
        for (k, v, want) in [
            ("QSA_ATTN_WARP_WARPS", "0", "from 1 to 8"),
            ("QSA_ATTN_WARP_WARPS", "9", "from 1 to 8"),
            ("QSA_ATTN_WARP_STAGES", "1", "from 2 to 6"),
            ("QSA_ATTN_WARP_STAGES", "7", "from 2 to 6"),
            ("QSA_ATTN_WARP_KEYS", "16", "expected 64 or 32"),
            ("QSA_ATTN_WARP_PARTS", "1", "expected 2 or 3"),
            ("QSA_ATTN_WARP_RESCALE", "late", "expected exact or lazy"),
        ] {
            let sw = Switches::from_pairs(&[(k, v)]);
            let e = warp_plan(&h200, &sw, 16).unwrap_err().to_string();
            assert!(e.contains(want), "{k}={v}: {e}");
            // Checked where the kernel is not built too: a typo is an error on every target.
            assert!(warp_plan(&sm75, &sw, 16).is_err(), "{k}={v} on sm_75");
        }
    }

    #[test]
    fn choose_forward_takes_the_warp_kernel_only_when_asked_and_where_it_runs() {
        use crate::dispatch::attention::{choose_forward, staged_plan, FwdPath};
        let mut h200 = caps("sm_90", 227, 132);
        h200.features = vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Clusters];
        let prefill = staged_plan(&h200, 4, 16384, 64, 4, 16, false).unwrap();
        let warp = Switches::from_pairs(&[("QSA_ATTN_FWD", "warp")]);
        let w = choose_forward(&h200, &warp, &prefill, 16).unwrap();
        assert!(
            matches!(
                w,
                FwdPath::Warp(WarpPlan {
                    warps: 1,
                    stages: 2,
                    ..
                })
            ),
            "{w:?}"
        );
        assert_eq!(w.name(false), "warp");
        assert_eq!(w.name(true), "warp", "the warp forward never splits");
        // Unforced, the warp forward runs only where WARP_FWD_DEFAULT makes it the default
        // (false until the card measures it: the ring forward).
        let unforced = choose_forward(&h200, &Switches::default(), &prefill, 16).unwrap();
        assert_eq!(
            matches!(unforced, FwdPath::Warp(_)),
            WARP_FWD_DEFAULT,
            "{unforced:?}"
        );
        // A split (decode-sized) plan takes it too when forced: one item per warp, no split.
        let decode = staged_plan(&h200, 1, 1, 128, 8, 16, false).unwrap();
        assert!(decode.nsplit > 1);
        assert!(matches!(
            choose_forward(&h200, &warp, &decode, 16).unwrap(),
            FwdPath::Warp(_)
        ));
        // t > 32: the choice without the switch (the ring here), as a forced ring falls back.
        let long = staged_plan(&h200, 4, 16384, 64, 4, 40, false).unwrap();
        assert!(matches!(
            choose_forward(&h200, &warp, &long, 40).unwrap(),
            FwdPath::Ring { .. }
        ));
        let sm75 = caps("sm_75", 64, 68);
        let p75 = staged_plan(&sm75, 1, 64, 16, 1, 16, false).unwrap();
        assert_eq!(
            choose_forward(&sm75, &warp, &p75, 16).unwrap(),
            FwdPath::Staged,
            "not built without bf16 mma: the staged kernel"
        );
        // A bad warp switch is an error even where the ring is chosen.
        let bad = Switches::from_pairs(&[("QSA_ATTN_WARP_STAGES", "9")]);
        let e = choose_forward(&h200, &bad, &prefill, 16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("QSA_ATTN_WARP_STAGES=9"), "{e}");
    }
}
