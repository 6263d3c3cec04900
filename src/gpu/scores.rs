//! GPU host code for the scores family: input checks, dispatch, the call's launch plan and
//! upload (see gpu/mod.rs). Each kernel's launch for one shape: plan.rs (the decode and
//! A-in-registers wgmma kernels' in decode.rs and wgrs.rs).

use super::launch::{launch, LaunchPlan, PlanArg, PlannedCall, Role, Step};
use super::{as_bytes, Family, GpuApi, GpuProps, LaunchDims};
use crate::backend::{BackendError, BackendResult, Prepared};
use crate::dispatch::scores::{
    amd_matrix, auto_units_per_cta, check_switches, choose_for, simt_chunk_for, simt_d16_built,
    tc_engine, tc_tile_on, wgmma_units_per_cta, ScoresKernel, SimtChunk,
};

use crate::dispatch::{Feature, Switches, TargetCaps};
use crate::problem::{Output, ScoresProblem, HEAD_DIM};

mod decode;
mod plan;
mod wgrs;

pub use plan::{plan, plan_engine, plan_on, with_simt_chunk, with_wgmma_units};

/// Largest grid.y of a launch.
const MAX_GRID_Y: usize = 65_535;

/// The launch of one kernel for one shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoresLaunch {
    /// `extern "C"` name in block_scores.cubin / .co.
    pub kernel: &'static str,
    /// What `Prepared::dispatched` reports: the variant name, plus the tile for TC kernels.
    pub variant: String,
    pub grid: (u32, u32, u32),
    /// Threads per block (x).
    pub block: u32,
    pub shared_bytes: u32,
    /// Arguments after (q, kb, w, s, nq, heads, blocks): the mma.sync decode kernels' ring
    /// depth; empty for the others.
    pub extra_args: Vec<i32>,
}

fn shape_err(msg: String) -> BackendError {
    BackendError::Shape(msg)
}

fn to_u32(x: usize, what: &str) -> BackendResult<u32> {
    u32::try_from(x).map_err(|_| shape_err(format!("{what} = {x} does not fit a launch")))
}

fn check_lengths(p: &ScoresProblem) -> BackendResult<()> {
    let want = |name: &str, got: usize, dims: &[usize]| {
        let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        match n {
            Some(n) if n == got => Ok(()),
            _ => Err(BackendError::Input(format!(
                "scores: {name} has {got} values, expected {dims:?} = {n:?}"
            ))),
        }
    };
    want("q", p.q.len(), &[p.nq, p.heads, HEAD_DIM])?;
    want("kb", p.kb.len(), &[p.blocks, HEAD_DIM])?;
    want("w", p.w.len(), &[p.nq, p.heads])
}

/// The shape of one scores call: all a plan needs (no data).
#[derive(Clone, Copy, Debug)]
pub struct ScoresCall {
    pub nq: usize,
    pub heads: usize,
    pub blocks: usize,
}

/// Choose the kernel with `crate::dispatch` and return every buffer and launch of one call.
/// The runner launches this plan (`prepare`), `qsa plan` prints it.
pub fn launch_plan(
    caps: &TargetCaps,
    props: &GpuProps,
    switches: &Switches,
    p: &ScoresCall,
) -> BackendResult<LaunchPlan> {
    check_switches(switches).map_err(BackendError::Input)?;
    let kernel = choose_for(caps, switches, p.nq);
    // Defence in depth: the TC kernels are absent from code objects below sm_80 and on AMD
    // (the wgmma ones from all but sm_90a: `tc_engine` checks `wgmma_built`).
    let need = match kernel {
        ScoresKernel::Tf32 => Some(Feature::Tf32Tc),
        ScoresKernel::Bf16 => Some(Feature::Bf16Tc),
        _ => None,
    };
    if let Some(f) = need {
        if !caps.has(f) {
            return Err(BackendError::Unsupported(format!(
                "{} scorer needs {f:?}, which target {} lacks",
                kernel.name(),
                caps.name
            )));
        }
    }
    // The matrix-core kernels exist only in the code object of the arch they were built for.
    if let ScoresKernel::AmdMatrixBf16(m) = kernel {
        if amd_matrix(caps) != Some(m) {
            return Err(BackendError::Unsupported(format!(
                "{} scorer is not built for target {}",
                kernel.name(),
                caps.name
            )));
        }
    }
    let chunk = simt_chunk_for(switches);
    if kernel == ScoresKernel::Simt && chunk == SimtChunk::D16 && !simt_d16_built(caps) {
        return Err(BackendError::Unsupported(format!(
            "QSA_SCORES_SIMT_DC=16: {} is built for NVIDIA sm_90+ only, not for target {}; drop the switch",
            chunk.kernel(),
            caps.name
        )));
    }
    let empty = p.nq == 0 || p.blocks == 0 || p.heads == 0;
    let launch_of = if empty {
        None
    } else {
        let limit = caps.shared_per_block.min(props.max_shared_per_block);
        let tile = tc_tile_on(caps, switches, kernel, p.nq, p.heads);
        let engine = tc_engine(caps, switches, tile);
        let (shape, sms) = ((p.nq, p.heads, p.blocks), props.multiprocessors);
        let l = plan_on(kernel, tile, engine, shape, limit, sms, switches)?;
        let upc = wgmma_units_per_cta(switches).unwrap_or_else(|| {
            // The units and CTA columns of the launch planned above.
            let mtq = p.heads.div_ceil(16);
            let units = p.nq.div_ceil(if mtq <= 4 { 4 / mtq } else { 1 });
            let sms = caps.multiprocessors.max(1) as usize;
            auto_units_per_cta(units, l.grid.0 as usize, sms)
        });
        let l = with_wgmma_units(l, upc, (p.nq, p.heads, p.blocks), limit)?;
        Some(with_simt_chunk(l, chunk))
    };
    let variant = launch_of
        .as_ref()
        .map_or_else(|| kernel.name().to_string(), |l| l.variant.clone());
    let mut lp = LaunchPlan::new(Family::Scores, variant);
    let out_len =
        p.nq.checked_mul(p.blocks)
            .ok_or_else(|| shape_err("nq * blocks overflows".into()))?;
    if out_len == 0 {
        return Ok(lp);
    }
    let s = lp.buffer("s", out_len * 4, Role::Output);
    let Some(l) = launch_of else {
        // heads == 0: every score is 0.
        lp.call.push(Step::Zero { buffer: "s" });
        return Ok(lp);
    };
    let q = lp.buffer("q", p.nq * p.heads * HEAD_DIM * 4, Role::Input);
    let kb = lp.buffer("kb", p.blocks * HEAD_DIM * 4, Role::Input);
    let w = lp.buffer("w", p.nq * p.heads * 4, Role::Input);
    let dims = LaunchDims {
        grid: l.grid,
        block: (l.block, 1, 1),
        shared_bytes: l.shared_bytes,
    };
    let mut args = vec![
        q,
        kb,
        w,
        s,
        PlanArg::I32(p.nq as i32),
        PlanArg::I32(p.heads as i32),
        PlanArg::I32(p.blocks as i32),
    ];
    args.extend(l.extra_args.iter().map(|&a| PlanArg::I32(a)));
    lp.call.push(launch(l.kernel, dims, args));
    Ok(lp)
}

/// Check `p`'s data against its shape, plan the call, upload the inputs, and return the
/// prepared call. The signature is the contract with `gpu::backend`.
pub fn prepare<'a, A: GpuApi>(
    api: &'a A,
    caps: &TargetCaps,
    switches: &Switches,
    p: &'a ScoresProblem,
) -> BackendResult<Box<dyn Prepared + 'a>> {
    check_lengths(p)?;
    let shape = ScoresCall {
        nq: p.nq,
        heads: p.heads,
        blocks: p.blocks,
    };
    let plan = launch_plan(caps, api.props(), switches, &shape)?;
    let inputs = [
        ("q", as_bytes(&p.q)),
        ("kb", as_bytes(&p.kb)),
        ("w", as_bytes(&p.w)),
    ];
    let output = |c: &PlannedCall<'a, A>| {
        Ok(Output::Scores(if c.plan().find("s").is_some() {
            c.download::<f32>("s")?
        } else {
            Vec::new()
        }))
    };
    Ok(Box::new(PlannedCall::new(api, plan, &inputs, output)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simt_d16_only_where_it_is_built() {
        use crate::dispatch::Vendor;
        let target = |name: &str, vendor, features| TargetCaps {
            name: name.into(),
            vendor,
            wave: 32,
            shared_per_block: 232_448,
            multiprocessors: 1,
            features,
        };
        let props = GpuProps {
            name: "test".into(),
            arch: "test".into(),
            multiprocessors: 1,
            warp_size: 32,
            max_shared_per_block: 232_448,
        };
        let sm90 = target(
            "sm_90",
            Vendor::Nvidia,
            vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Clusters],
        );
        let sm75 = target("sm_75", Vendor::Nvidia, vec![]);
        let shape = ScoresCall {
            nq: 40,
            heads: 10,
            blocks: 130,
        };
        let sw = Switches::from_pairs;
        let kernel_of = |lp: &LaunchPlan| {
            lp.call
                .iter()
                .find_map(|s| match s {
                    Step::Launch { kernel, .. } => Some(kernel.clone()),
                    _ => None,
                })
                .unwrap()
        };
        let d16 = sw(&[("STRATA_QSA_WARP", "1"), ("QSA_SCORES_SIMT_DC", "16")]);
        let lp = launch_plan(&sm90, &props, &d16, &shape).unwrap();
        assert_eq!(kernel_of(&lp), "block_scores_simt_d16");
        assert_eq!(lp.dispatched, "simt");
        let lp = launch_plan(&sm75, &props, &sw(&[]), &shape).unwrap();
        assert_eq!(kernel_of(&lp), "block_scores_simt");
        match launch_plan(&sm75, &props, &d16, &shape) {
            Err(BackendError::Unsupported(m)) => assert!(
                m.contains(
                    "block_scores_simt_d16 is built for NVIDIA sm_90+ only, not for target sm_75"
                ),
                "{m}"
            ),
            other => panic!("sm_75 with QSA_SCORES_SIMT_DC=16: {other:?}"),
        }
        // The tensor-core kernel runs unchanged under the switch.
        let tf32 =
            launch_plan(&sm90, &props, &sw(&[("QSA_SCORES_SIMT_DC", "16")]), &shape).unwrap();
        assert_eq!(kernel_of(&tf32), "block_scores_tf32");
    }
}
