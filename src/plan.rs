//! What runs where: the kernel each (case, variant) dispatches to on each target, computed
//! from the pure dispatch functions, so the dispatch snapshot of every target (AMD
//! included) is known on any machine, and a run can check that what ran is what was said.

use crate::dispatch::{attention, scores, topk, Vendor};
pub mod request;

use crate::matrix::{Case, FamilyName, Matrix, Target};

/// The kernel name `case` with `variant` dispatches to on `target` (the name the backend
/// reports as `dispatched`), or the reason it cannot run there. `backward` selects the
/// selection-attention pass (ignored by the other families).
pub fn predicted_kernel(
    matrix: &Matrix,
    target: &Target,
    case: &Case,
    variant: &str,
    backward: bool,
) -> Result<String, String> {
    let family = case.family();
    let v = matrix
        .variant(family, variant)
        .ok_or_else(|| format!("unknown {} variant `{variant}`", family.name()))?;
    let sw = v.switches();
    let caps = target.caps();
    let cpu = target.vendor == Vendor::Cpu;
    match family {
        FamilyName::Topk => {
            let s = case.topk.as_ref().expect("family");
            let shape = topk::TopkShape {
                nq: s.queries,
                n: s.n,
                k: s.k,
                has_active: s.active != crate::matrix::ActiveMode::None
                    || case.inputs.contains_key("active"),
            };
            let kernel = topk::choose(&caps, &sw, shape).map_err(|e| e.to_string())?;
            Ok(match (cpu, kernel) {
                // The CPU has one single-pass radix select for the register and wide kernels.
                (true, topk::TopkKernel::Split) => "split".into(),
                (true, _) => "radix".into(),
                (false, k) => k.name().into(),
            })
        }
        FamilyName::Scores => {
            let s = case.scores.as_ref().expect("family");
            let k = scores::choose_for(&caps, &sw, s.queries);
            Ok(match (cpu, k) {
                (true, scores::ScoresKernel::Warp) => "warp".into(),
                (true, _) => "simt".into(),
                // One tile per arch: "wmma_bf16" (gfx12) or "mfma_bf16" (gfx950), no suffix.
                (false, k @ scores::ScoresKernel::AmdMatrixBf16(_)) => k.name().into(),
                // The decode tile: "tf32_decode", or on sm_90a's wgmma decode kernels
                // "tf32_decode_wg" (and bf16; "_wgc" / "_wgc2" with a ring switch).
                (false, k)
                    if k.tensor_cores()
                        && scores::tc_tile_on(&caps, &sw, k, s.queries, s.heads)
                            == scores::TcTile::Decode =>
                {
                    let wg = scores::tc_engine(&caps, &sw, scores::TcTile::Decode)
                        == scores::TcEngine::Wgmma;
                    if wg {
                        let bf16 = k == scores::ScoresKernel::Bf16;
                        let c = scores::decode_wg::config_for(&sw, bf16)?;
                        c.kernel(bf16).1.to_string()
                    } else {
                        format!("{}_decode", k.name())
                    }
                }
                // sm_90a's prefill TF32 / BF16: "tf32_wgmma", "bf16_wgmma".
                (false, k)
                    if k.tensor_cores()
                        && scores::tc_engine(
                            &caps,
                            &sw,
                            scores::tc_tile_on(&caps, &sw, k, s.queries, s.heads),
                        ) == scores::TcEngine::Wgmma =>
                {
                    format!("{}_wgmma", k.name())
                }
                (false, k) => k.name().into(),
            })
        }
        FamilyName::Attention => {
            if cpu {
                return Ok("gather".into());
            }
            let s = case.attention.as_ref().expect("family");
            let decode = crate::dispatch::attention_decode::decode_plan(
                &caps, &sw, s.batch, s.q_len, s.hq, s.hkv, s.t, backward,
            )
            .map_err(|e| e.to_string())?;
            // Head-major K / V: the decode forward only (gpu/attention/plan.rs refuses the rest).
            if s.kv_layout == crate::problem::KvLayout::Hnd
                && (decode.is_none()
                    || attention::choose(&caps, &sw) != attention::AttnKernel::Staged)
            {
                return Err("kv_layout hnd is read only by the decode forward".into());
            }
            Ok(match attention::choose(&caps, &sw) {
                attention::AttnKernel::Staged if decode.is_some() => {
                    crate::dispatch::attention_decode::dispatch_name(&decode.expect("checked"))
                        .into()
                }
                attention::AttnKernel::Staged => {
                    let plan = attention::staged_plan_for(
                        &caps, &sw, s.batch, s.q_len, s.hq, s.hkv, s.t, backward,
                    )
                    .map_err(|e| e.to_string())?;
                    if backward {
                        // "staged" (dK / dV by atomics), "staged_kv+STEM" or
                        // "staged_kv_dq+STEM" (KV-block-major, STEM the products' kernel).
                        let shape = attention::BwdShape {
                            q_len: s.q_len,
                            kv_len: s.kv_len,
                            t: s.t,
                        };
                        let path = attention::choose_backward(&caps, &sw, s.dtype, shape)
                            .map_err(|e| e.to_string())?;
                        let products = attention::kv_products(&caps, &sw, s.dtype, shape)
                            .map_err(|e| e.to_string())?;
                        let qchunk = crate::dispatch::attention_kv_qchunk::kv_qchunk(
                            &sw, path, products, s.q_len,
                        )
                        .map_err(|e| e.to_string())?;
                        let (products, read) = crate::dispatch::attention_do::resolve_do(
                            s.do_dtype,
                            Some(path),
                            Some(products),
                        );
                        path.dispatch_name(products.expect("given"), qchunk) + read.suffix()
                    } else {
                        // "staged" / "ring", "_split" where lists are split.
                        attention::choose_forward(&caps, &sw, &plan, s.t)
                            .map_err(|e| e.to_string())?
                            .name(plan.nsplit > 1)
                            .into()
                    }
                }
                k if backward => {
                    let read = crate::dispatch::attention_do::resolve_do(s.do_dtype, None, None).1;
                    k.name().to_string() + read.suffix()
                }
                k => k.name().into(),
            })
        }
    }
}

/// The dispatch snapshot of one target: one line per (case, variant) that runs there.
pub fn dispatch_table(matrix: &Matrix, target: &Target) -> String {
    let mut out = String::new();
    for case in matrix.cases.iter().filter(|c| c.runs_on(target)) {
        let passes: &[(&str, bool)] = if case.attention.is_some() {
            &[("fwd", false), ("bwd", true)]
        } else {
            &[("-", false)]
        };
        for v in &case.variants {
            for (pass, backward) in passes {
                let k = predicted_kernel(matrix, target, case, v, *backward)
                    .unwrap_or_else(|e| format!("error: {e}"));
                out.push_str(&format!("{:<24} {:<8} {pass:<3} -> {k}\n", case.name, v));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn scores_opt_in_names_the_matrix_core_kernel_per_target() {
        let m = Matrix::parse(Path::new("matrix.yaml"), include_str!("../matrix.yaml")).unwrap();
        let case = m.cases.iter().find(|c| c.name == "scores_ragged").unwrap();
        let predict = |target: &str, variant: &str| {
            predicted_kernel(&m, m.target(target).unwrap(), case, variant, false).unwrap()
        };
        assert_eq!(predict("gfx1201", "bf16"), "wmma_bf16");
        assert_eq!(predict("gfx950", "bf16"), "mfma_bf16");
        // Opt-in only: the engine's default on AMD stays SIMT.
        assert_eq!(predict("gfx1201", "auto"), "simt");
        assert_eq!(predict("gfx950", "auto"), "simt");
        // Targets without a matrix-core kernel are unchanged.
        assert_eq!(predict("gfx906", "bf16"), "simt");
        assert_eq!(predict("sm_75", "bf16"), "simt");
        // sm_90 (built as sm_90a) takes wgmma for the prefill tile; the forced mma.sync
        // kernels stay reachable; sm_86 has no wgmma.
        assert_eq!(predict("sm_90", "bf16"), "bf16_wgmma");
        assert_eq!(predict("sm_90", "auto"), "tf32_wgmma");
        assert_eq!(predict("sm_90", "bf16_mma"), "bf16");
        assert_eq!(predict("sm_90", "tf32_mma"), "tf32");
        assert_eq!(predict("sm_86", "bf16"), "bf16");
        assert_eq!(predict("cpu", "bf16"), "simt");
    }
}
