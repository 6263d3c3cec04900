//! The ring forward's dispatch (kernels/common/attention_ring_fwd.h): whether a staged plan's
//! forward runs `qsa_attn_ring_fwd_*` (or its q-in-shared / swizzled twins) or the staged
//! kernel, and the ring's plan from qsa's switches (QSA_ATTN_FWD, QSA_ATTN_STAGES,
//! QSA_ATTN_RING_*). Pure functions, like the rest of the dispatch.

use super::attention::{StagedPlan, BLOCK, KV_STRIDE, STAGED_ROWS};
use super::attention_warp::{warp_plan, WarpPlan, WARP_FWD_DEFAULT};
use super::{Feature, Switches, TargetCaps, Vendor};
use crate::backend::BackendError;

/// How the staged forward runs (the backward keeps the staged kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FwdPath {
    /// `qsa_attn_staged_fwd_*`: one K/V buffer (or two), four barriers per block (every
    /// target).
    Staged,
    /// `qsa_attn_ring_fwd_*` (kernels/common/attention_ring_fwd.h): a ring of `stages` slots
    /// filled by cp.async, each warp's own online softmax in registers, one barrier per slot
    /// (NVIDIA tensor cores only: the kernel's QSA_ATTN_MMA, sm_80+). A slot holds a block's K
    /// and V rows, or with `halves` its K rows or its V rows (twice the slots, and the bytes in
    /// flight, at the same shared memory; two barriers per block).
    /// `parts`: bf16 P's 16-bit parts in P.V (3: 2^-27 relative, the default; 2: 2^-18, one
    /// third fewer P.V mmas); f16 always runs two parts of P * 2^14.
    /// `q_shared` (`QSA_ATTN_RING_Q=shared`): `qsa_attn_ring_qs_fwd_*`, q's A fragments read
    /// from a tile in shared memory each block instead of held in registers (128 registers: four
    /// CTAs per SM where the shared memory allows, e.g. three slots of halves).
    Ring {
        stages: usize,
        halves: bool,
        parts: usize,
        order: RingOrder,
        q_shared: bool,
        /// `QSA_ATTN_RING_RESCALE=lazy`: the running max moves only past a slack (8 in log2
        /// units for bf16, 1 for f16; ring_slack in the kernel), so O is rescaled only in the
        /// blocks where some row of a warp moved (the default); `exact` moves it every time.
        lazy: bool,
        /// `QSA_ATTN_RING_LAYOUT=swizzle`: `qsa_attn_ring_sw_fwd_*`, slot rows of 256 bytes with
        /// 16-byte chunk ch of row r at ch ^ (r & 7) instead of 272-byte padded rows, K's
        /// fragments by ldmatrix (with q in registers only: the q-in-shared build spilled).
        swizzle: bool,
        /// `QSA_ATTN_RING_COPY=warp`: each warp copies the K / V rows of its own 16 keys and
        /// waits for them with a __syncwarp, no CTA barrier per slot (`cta`: the CTA copies
        /// every row, one barrier per slot).
        warp_copy: bool,
        shared: u32,
    },
    /// `qsa_attn_warp_fwd_*` (kernels/common/attention_warp_fwd.h, `QSA_ATTN_FWD=warp`): one
    /// warp per (batch, token, kv head, 16-head chunk), its own cp.async ring, no CTA barrier and
    /// no split (NVIDIA tensor cores, t <= 32; the plan: attention_warp.rs).
    Warp(WarpPlan),
}

/// The order the ring forward's CTAs walk the work items in (`QSA_ATTN_RING_ORDER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingOrder {
    /// `token` (the default, the staged kernel's): the kv heads of one token tile side by
    /// side, so the CTAs resident at once read every kv head of their batch (32 MB of K/V at
    /// prefill B=4, T=16K, 4 kv heads: most of the H200's 50 MB L2).
    Token,
    /// `head`: all token tiles of one (batch, kv head) first, as fla's parallel_nsa grid: the
    /// resident CTAs share one kv head's K/V (8 MB there).
    Head,
}

impl RingOrder {
    /// The kernel's `order` argument.
    pub fn arg(self) -> i32 {
        match self {
            RingOrder::Token => 0,
            RingOrder::Head => 1,
        }
    }
}

impl FwdPath {
    /// The dispatch name of a forward call (`staged_split` where the plan splits lists).
    pub fn name(self, split: bool) -> &'static str {
        match (self, split) {
            (FwdPath::Staged, false) => "staged",
            (FwdPath::Staged, true) => "staged_split",
            (FwdPath::Ring { .. }, false) => "ring",
            (FwdPath::Ring { .. }, true) => "ring_split",
            (FwdPath::Warp(_), _) => "warp",
        }
    }
}

/// Slots of the ring forward unless `QSA_ATTN_STAGES` says otherwise: two whole-block slots
/// (69,904 B at t = 16) keep three CTAs resident on the H200 (168 registers, 227 KiB shared
/// per SM), each with one block in flight while it computes the other. Measured on the H200
/// (bench/attention_vs_torch.py --bench --prefill-only, prefill B=4, T=16K, 64 / 4 heads,
/// 2026-12-02 03:45 UTC, /work/wt/results/attnfwd-2): block 2 slots 27.16 ms, block 3 32.40,
/// half 4 / 5 / 6 29.60 / 36.09 / 36.58; bf16 P in two parts 26.96 (block 2, -0.7%, for up to
/// 3.9x the gather kernel's o error on the check shapes: not taken; 2026-12-02 06:10 UTC with
/// the coalesced o stores: block 2 25.57 ms, block 3 31.74, half 4 28.56, parts 2 25.37,
/// /work/wt/results/attnfwd-1.md). The first version's
/// sweep (03:22 UTC): block 2 / 3 / 4 slots 31.02 / 38.44 / 62.71 ms (3 / 2 / 1 CTAs per SM).
pub const RING_STAGES: usize = 2;
/// The ring's defaults for the switches QSA_ATTN_RING_ORDER / _RESCALE / _LAYOUT / _Q / _COPY.
/// Measured on the H200 (bench/attention_vs_torch.py --check --bench --prefill-only, prefill
/// B=4, T=16K, 64 / 4 heads, 16 blocks, 2026-12-02 06:10 UTC, /work/wt/results/attnfwd-1.md;
/// fla parallel_nsa fwd 20.84 ms in the same run): two block slots, token order, exact 25.57 ms,
/// lazy 25.13 (taken); head order 25.57 / lazy 25.70 (not taken: the profile's 98% L2 hits);
/// q in shared memory, three slots of halves (16 warps / SM) 26.25, lazy 25.71 / 26.00 (head /
/// token): not taken. The swizzled rows and the warp copies were built after that call:
/// unmeasured, off.
pub const RING_DEFAULT_ORDER: RingOrder = RingOrder::Token;
pub const RING_DEFAULT_LAZY: bool = true;
pub const RING_DEFAULT_SWIZZLE: bool = false;
pub const RING_DEFAULT_Q_SHARED: bool = false;
pub const RING_DEFAULT_WARP_COPY: bool = false;
/// Resident ring CTAs per multiprocessor the default dispatch asks for.
const RING_MIN_RESIDENT: usize = 2;
/// The ring forward's end-of-kernel merge of its four warps' (m, l, O) in the drained ring:
/// 4 x 16 x (128 + 4) + 2 x 64 floats.
const RING_MERGE_BYTES: usize = 34_304;
/// The kernel's range of slots (RING_MAX_STAGES; ring_wait waits for at most five later groups).
pub const RING_MAX_STAGES: usize = 7;

/// Dynamic shared bytes of a ring-forward CTA (`ring_smem` in the kernel): the block list, then
/// `stages` slots of K and V rows (K or V rows with `halves`). The end-of-kernel merge of the
/// four warps' (m, l, O), 4 x 16 x (128 + 4) + 2 x 64 floats = 34,304 B, reuses the drained
/// ring (two slots of halves are 34,816 B).
pub fn ring_shared_bytes(
    cap: usize,
    stages: usize,
    halves: bool,
    q_shared: bool,
    swizzle: bool,
) -> usize {
    let row = if swizzle {
        crate::problem::HEAD_DIM
    } else {
        KV_STRIDE
    };
    let slot = if halves { 1 } else { 2 } * BLOCK * row * 2;
    let q_tile = if q_shared {
        STAGED_ROWS * KV_STRIDE * 2
    } else {
        0
    };
    ((4 * cap + 1) * 4).div_ceil(16) * 16 + q_tile + stages * slot
}

/// The forward's kernel for a staged plan: the ring where it is built (NVIDIA bf16 tensor
/// cores) and the plan does not split lists (decode splits keep the staged kernel and its
/// measured plan); `QSA_ATTN_FWD=staged|ring` forces one (a forced ring falls back to the
/// staged kernel where it is not built, as a forced top-k kernel does, so a matrix variant
/// forcing it runs on every target), `QSA_ATTN_STAGES=2..7` sets its slots and
/// `QSA_ATTN_RING_SLOT=block|half` what a slot holds (default block), `QSA_ATTN_RING_PARTS=2|3`
/// bf16 P's parts in P.V (default 3), `QSA_ATTN_RING_ORDER=token|head` the CTAs' order
/// (RingOrder; default token), `QSA_ATTN_RING_Q=reg|shared` where q's fragments live (default
/// reg), `QSA_ATTN_RING_RESCALE=exact|lazy` when O is rescaled (default lazy),
/// `QSA_ATTN_RING_LAYOUT=pad|swizzle` the slot rows, `QSA_ATTN_RING_COPY=cta|warp` who copies
/// which rows (the RING_DEFAULT_* constants). The warp forward (attention_warp.rs) comes first:
/// sm_90's default for unsplit plans (WARP_FWD_DEFAULT, 0.62x the ring's time on the H200), and
/// `QSA_ATTN_FWD=warp` takes it wherever it runs (NVIDIA tensor cores, t <= 32), split plans
/// too (it never splits); where it cannot run, the choice is the one without the switch.
pub fn choose_forward(
    caps: &TargetCaps,
    sw: &Switches,
    plan: &StagedPlan,
    t: usize,
) -> Result<FwdPath, BackendError> {
    let built = caps.vendor == Vendor::Nvidia && caps.has(Feature::Bf16Tc);
    let forced = sw.get("QSA_ATTN_FWD") == Some("ring");
    let want_ring = match sw.get("QSA_ATTN_FWD") {
        None | Some("warp") => plan.nsplit == 1,
        Some("staged") => false,
        Some("ring") => true,
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_FWD={}: expected staged, ring or warp",
                crate::echo::value(v)
            )))
        }
    };
    // The warp forward's switches are checked on every call (a typo is an error everywhere).
    // Unforced it runs where WARP_FWD_DEFAULT says so and the staged plan does not split.
    let want_warp = match sw.get("QSA_ATTN_FWD") {
        Some("warp") => true,
        // Measured on the H200 only: sm_90 (Feature::Clusters, as the swizzled ring) alone.
        None => WARP_FWD_DEFAULT && plan.nsplit == 1 && caps.has(Feature::Clusters),
        Some(_) => false,
    };
    if let (Some(w), true) = (warp_plan(caps, sw, t)?, want_warp) {
        return Ok(FwdPath::Warp(w));
    }
    let stages = match sw.get("QSA_ATTN_STAGES") {
        None => None,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (2..=RING_MAX_STAGES).contains(&n) => Some(n),
            _ => {
                return Err(BackendError::Input(format!(
                    "QSA_ATTN_STAGES={}: expected a whole number from 2 to {RING_MAX_STAGES}",
                    crate::echo::value(v)
                )))
            }
        },
    };
    let parts = match sw.get("QSA_ATTN_RING_PARTS") {
        None | Some("3") => 3,
        Some("2") => 2,
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_RING_PARTS={}: expected 2 or 3",
                crate::echo::value(v)
            )))
        }
    };
    let halves = sw.either("QSA_ATTN_RING_SLOT", false, "block", "half")?;
    let q_shared = sw.either("QSA_ATTN_RING_Q", RING_DEFAULT_Q_SHARED, "reg", "shared")?;
    let lazy = sw.either("QSA_ATTN_RING_RESCALE", RING_DEFAULT_LAZY, "exact", "lazy")?;
    let swizzle = sw.either(
        "QSA_ATTN_RING_LAYOUT",
        RING_DEFAULT_SWIZZLE,
        "pad",
        "swizzle",
    )?;
    // qsa_attn_ring_sw_fwd_* is built for sm_90+ only (sm_86's build spilled): elsewhere a
    // forced swizzle falls back to the padded rows, as a forced ring falls back to staged.
    let swizzle = swizzle && caps.has(Feature::Clusters);
    if swizzle && q_shared {
        return Err(BackendError::Input(
            "QSA_ATTN_RING_LAYOUT=swizzle with QSA_ATTN_RING_Q=shared: that kernel is not built \
             (it spilled at 128 registers); drop one of the two"
                .to_string(),
        ));
    }
    let warp_copy = sw.either("QSA_ATTN_RING_COPY", RING_DEFAULT_WARP_COPY, "cta", "warp")?;
    if swizzle && warp_copy {
        return Err(BackendError::Input(
            "QSA_ATTN_RING_LAYOUT=swizzle with QSA_ATTN_RING_COPY=warp: that kernel is not built \
             (it spilled); drop one of the two"
                .to_string(),
        ));
    }
    let by_head = RING_DEFAULT_ORDER == RingOrder::Head;
    let order = match sw.either("QSA_ATTN_RING_ORDER", by_head, "token", "head")? {
        false => RingOrder::Token,
        true => RingOrder::Head,
    };
    if !(built && want_ring) {
        return Ok(FwdPath::Staged);
    }
    let cap = plan.qt * t;
    let limit = caps.shared_per_block as usize;
    // Halves: twice the slots at the same shared memory by default.
    let default_stages = if halves { 2 * RING_STAGES } else { RING_STAGES };
    let stages = match stages {
        Some(n) => {
            let shared = ring_shared_bytes(cap, n, halves, q_shared, swizzle);
            let ring = shared - ring_shared_bytes(cap, 0, halves, q_shared, swizzle);
            if ring < RING_MERGE_BYTES {
                return Err(BackendError::Input(format!(
                    "QSA_ATTN_STAGES={n}: {ring} bytes of ring, the end-of-kernel merge of the \
                     four warps needs {RING_MERGE_BYTES}: use more slots"
                )));
            }
            if shared > limit {
                return Err(BackendError::Shape(format!(
                    "QSA_ATTN_STAGES={n} needs {shared} bytes of shared memory for t = {t}, {} allows {limit}",
                    caps.name
                )));
            }
            n
        }
        // By default where two CTAs fit (shared memory per multiprocessor approximated by the
        // per-block limit, as staged_plan does): one CTA per SM would idle at each block's
        // barrier, so sm_86 (99 KiB) keeps the staged kernel's two CTAs (a guess, not
        // measured); forced, wherever one fits.
        None if (if forced { 1 } else { RING_MIN_RESIDENT })
            * ring_shared_bytes(cap, default_stages, halves, q_shared, swizzle)
            <= limit =>
        {
            default_stages
        }
        None => return Ok(FwdPath::Staged),
    };
    Ok(FwdPath::Ring {
        stages,
        halves,
        parts,
        order,
        q_shared,
        lazy,
        swizzle,
        warp_copy,
        shared: ring_shared_bytes(cap, stages, halves, q_shared, swizzle) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::attention::staged_plan;
    use crate::dispatch::attention::tests::caps;

    #[test]
    fn ring_forward_for_unsplit_plans_on_nvidia_tensor_cores() {
        // The ring's switches with QSA_ATTN_FWD=ring unless the pairs name the forward: these
        // checks hold whichever forward is the default (WARP_FWD_DEFAULT); `none` is unforced.
        let sw = |pairs: &[(&str, &str)]| {
            let mut pairs = pairs.to_vec();
            if !pairs.iter().any(|(k, _)| *k == "QSA_ATTN_FWD") {
                pairs.push(("QSA_ATTN_FWD", "ring"));
            }
            Switches::from_pairs(&pairs)
        };
        let none = Switches::default();
        let mut h200 = caps("sm_90", 227, 132);
        h200.features = vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Clusters];
        let prefill = staged_plan(&h200, 4, 16384, 64, 4, 16, false).unwrap();
        // list 16 ids: 4 x 16 x 4 + 4 = 260 -> 272 B, then 2 x 34,816.
        assert_eq!(ring_shared_bytes(16, 2, false, false, false), 69_904);
        assert_eq!(ring_shared_bytes(16, 4, true, false, false), 69_904);
        // q tile 16 x 272 B, then three slots of halves: four CTAs in the H200's 228 KiB.
        assert_eq!(ring_shared_bytes(16, 3, true, true, false), 56_848);
        // Swizzled rows of 256 B: 272 + 2 x 32,768.
        assert_eq!(ring_shared_bytes(16, 2, false, false, true), 65_808);
        let unforced = choose_forward(&h200, &none, &prefill, 16).unwrap();
        assert_eq!(
            matches!(unforced, FwdPath::Warp(_)),
            WARP_FWD_DEFAULT,
            "the prefill default is the warp forward iff WARP_FWD_DEFAULT: {unforced:?}"
        );
        assert_eq!(
            choose_forward(&h200, &sw(&[]), &prefill, 16).unwrap(),
            FwdPath::Ring {
                stages: 2,
                halves: false,
                parts: 3,
                order: RingOrder::Token,
                q_shared: false,
                lazy: true,
                swizzle: false,
                warp_copy: false,
                shared: 69_904
            }
        );
        let half = sw(&[("QSA_ATTN_RING_SLOT", "half")]);
        assert_eq!(
            choose_forward(&h200, &half, &prefill, 16).unwrap(),
            FwdPath::Ring {
                stages: 4,
                halves: true,
                parts: 3,
                order: RingOrder::Token,
                q_shared: false,
                lazy: true,
                swizzle: false,
                warp_copy: false,
                shared: 69_904
            }
        );
        let head = sw(&[("QSA_ATTN_RING_ORDER", "head")]);
        assert!(matches!(
            choose_forward(&h200, &head, &prefill, 16).unwrap(),
            FwdPath::Ring {
                stages: 2,
                order: RingOrder::Head,
                ..
            }
        ));
        assert_eq!(
            RingOrder::Head.arg(),
            1,
            "the kernel's ring_cta: 1 = kv head major"
        );
        let qs = sw(&[
            ("QSA_ATTN_RING_Q", "shared"),
            ("QSA_ATTN_RING_SLOT", "half"),
            ("QSA_ATTN_STAGES", "3"),
        ]);
        assert!(matches!(
            choose_forward(&h200, &qs, &prefill, 16).unwrap(),
            FwdPath::Ring {
                stages: 3,
                halves: true,
                q_shared: true,
                shared: 56_848,
                ..
            }
        ));
        assert!(matches!(
            choose_forward(
                &h200,
                &sw(&[("QSA_ATTN_RING_RESCALE", "exact")]),
                &prefill,
                16
            )
            .unwrap(),
            FwdPath::Ring { lazy: false, .. }
        ));
        assert!(matches!(
            choose_forward(
                &h200,
                &sw(&[("QSA_ATTN_RING_LAYOUT", "swizzle")]),
                &prefill,
                16
            )
            .unwrap(),
            FwdPath::Ring {
                swizzle: true,
                shared: 65_808,
                ..
            }
        ));
        for (bad, want) in [
            (
                vec![
                    ("QSA_ATTN_RING_LAYOUT", "swizzle"),
                    ("QSA_ATTN_RING_Q", "shared"),
                ],
                "that kernel is not built",
            ),
            (
                vec![
                    ("QSA_ATTN_RING_LAYOUT", "swizzle"),
                    ("QSA_ATTN_RING_SLOT", "half"),
                    ("QSA_ATTN_STAGES", "2"),
                ],
                "merge of the four warps needs 34304",
            ),
        ] {
            let e = choose_forward(&h200, &sw(&bad), &prefill, 16)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
        let decode = staged_plan(&h200, 1, 1, 128, 8, 16, false).unwrap();
        assert!(decode.nsplit > 1);
        assert_eq!(
            choose_forward(&h200, &none, &decode, 16).unwrap(),
            FwdPath::Staged,
            "split plans keep the staged kernel unless the ring is forced"
        );
        let ring = sw(&[("QSA_ATTN_FWD", "ring")]);
        assert!(matches!(
            choose_forward(&h200, &ring, &decode, 16).unwrap(),
            FwdPath::Ring { stages: 2, .. }
        ));
        let staged = sw(&[("QSA_ATTN_FWD", "staged")]);
        assert_eq!(
            choose_forward(&h200, &staged, &prefill, 16).unwrap(),
            FwdPath::Staged
        );
        let four = sw(&[("QSA_ATTN_STAGES", "4")]);
        assert_eq!(
            choose_forward(&h200, &four, &prefill, 16).unwrap(),
            FwdPath::Ring {
                stages: 4,
                halves: false,
                parts: 3,
                order: RingOrder::Token,
                q_shared: false,
                lazy: true,
                swizzle: false,
                warp_copy: false,
                shared: 139_536
            }
        );
        // sm_86: two ring CTAs do not fit 99 KiB, so the default keeps the staged kernel; forced,
        // one CTA fits; four slots do not.
        let mut sm86 = caps("sm_86", 99, 82);
        sm86.features = vec![Feature::Tf32Tc, Feature::Bf16Tc];
        assert_eq!(
            choose_forward(&sm86, &none, &prefill, 16).unwrap(),
            FwdPath::Staged
        );
        assert!(matches!(
            choose_forward(&sm86, &ring, &prefill, 16).unwrap(),
            FwdPath::Ring { stages: 2, .. }
        ));
        assert!(
            matches!(
                choose_forward(
                    &sm86,
                    &sw(&[
                        ("QSA_ATTN_FWD", "ring"),
                        ("QSA_ATTN_RING_LAYOUT", "swizzle")
                    ]),
                    &prefill,
                    16
                )
                .unwrap(),
                FwdPath::Ring { swizzle: false, .. }
            ),
            "the swizzled ring is built for sm_90+ only: sm_86 keeps the padded rows"
        );
        let e = choose_forward(&sm86, &four, &prefill, 16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("QSA_ATTN_STAGES=4 needs 139536 bytes"), "{e}");
        // Not built without NVIDIA bf16 tensor cores: a forced ring falls back.
        let sm75 = caps("sm_75", 64, 68);
        assert_eq!(
            choose_forward(&sm75, &ring, &prefill, 16).unwrap(),
            FwdPath::Staged
        );
        let mut gfx950 = caps("gfx950", 160, 256);
        gfx950.vendor = Vendor::Amd;
        gfx950.features = vec![Feature::Bf16Tc];
        assert_eq!(
            choose_forward(&gfx950, &ring, &prefill, 16).unwrap(),
            FwdPath::Staged,
            "gfx950 has bf16 matrix cores but no ring kernel (sm_80+ CUDA only): staged"
        );
        for (k, v, want) in [
            ("QSA_ATTN_FWD", "fast", "expected staged, ring or warp"),
            ("QSA_ATTN_STAGES", "1", "from 2 to 7"),
            ("QSA_ATTN_STAGES", "8", "from 2 to 7"),
            ("QSA_ATTN_RING_SLOT", "quarter", "expected block or half"),
            ("QSA_ATTN_RING_PARTS", "1", "expected 2 or 3"),
            ("QSA_ATTN_RING_ORDER", "batch", "expected token or head"),
            ("QSA_ATTN_RING_Q", "smem", "expected reg or shared"),
            ("QSA_ATTN_RING_RESCALE", "late", "expected exact or lazy"),
            ("QSA_ATTN_RING_LAYOUT", "xor", "expected pad or swizzle"),
            ("QSA_ATTN_RING_COPY", "lane", "expected cta or warp"),
        ] {
            let e = choose_forward(&h200, &sw(&[(k, v)]), &prefill, 16)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{k}={v}: {e}");
        }
    }
}
