//! GPU host code of the decode forward (`qsa_attn_dec_fwd_*`, kernels/common/attention_decode.h):
//! its buffers and launches inside an attention `LaunchPlan`. The plan itself (warps, ring
//! stages, splits, merge) is `dispatch::attention_decode::decode_plan`.

use super::launch::{launch, LaunchPlan, PlanArg, Role, Step};
use super::LaunchDims;
use crate::backend::{BackendError, BackendResult};
use crate::dispatch::attention_decode::{DecMerge, DecodePlan, DEC_CLUSTER};
use crate::problem::HEAD_DIM;

const MAX_GRID_X: usize = i32::MAX as usize;
const MAX_GRID_Y: usize = 65_535;

/// The decode forward's steps into `o` / `lse` (`rows` query rows): one launch, plus
/// qsa_attn_combine when split items merge by a second launch. Split items write partials to
/// `o_part` / `lse_part` ([split][rows], qsa_attn_combine's layout); the in-kernel merge takes a
/// ticket per item in `done`, zeroed once in `lp.setup` (the last CTA of an item resets it).
#[allow(clippy::too_many_arguments)]
pub fn forward_steps(
    lp: &mut LaunchPlan,
    plan: &DecodePlan,
    inputs: [PlanArg; 4],
    o: PlanArg,
    lse: PlanArg,
    rows: usize,
    dims: [PlanArg; 7],
    sfx: &str,
) -> BackendResult<Vec<Step>> {
    if plan.items > MAX_GRID_X || plan.nsplit > MAX_GRID_Y {
        return Err(BackendError::Shape(format!(
            "decode grid {} x {} exceeds the launch limits",
            plan.items, plan.nsplit
        )));
    }
    if plan.merge.clustered() {
        // One cluster of DEC_CLUSTER CTAs per item along x; no workspace, one launch.
        let ctas = plan.items * DEC_CLUSTER;
        if ctas > MAX_GRID_X {
            return Err(BackendError::Shape(format!(
                "decode cluster grid {ctas} exceeds the launch limit"
            )));
        }
        let mut args = inputs.to_vec();
        args.extend([o, lse]);
        args.extend(dims);
        args.push(PlanArg::I32(plan.stages as i32));
        args.push(PlanArg::I32(plan.opts()));
        return Ok(vec![launch(
            plan.kernel(sfx),
            LaunchDims {
                grid: (ctas as u32, 1, 1),
                block: (32 * plan.warps as u32, 1, 1),
                shared_bytes: plan.shared,
            },
            args,
        )]);
    }
    let split = plan.nsplit > 1;
    let (o_part, lse_part) = if split {
        (
            lp.buffer("o_part", plan.nsplit * rows * HEAD_DIM * 4, Role::Workspace),
            lp.buffer("lse_part", plan.nsplit * rows * 4, Role::Workspace),
        )
    } else {
        (PlanArg::Null, PlanArg::Null)
    };
    let in_kernel = split && plan.merge == DecMerge::Kernel;
    let done = if in_kernel {
        let d = lp.buffer("done", plan.items * 4, Role::Workspace);
        lp.setup.push(Step::Zero { buffer: "done" });
        d
    } else {
        PlanArg::Null
    };
    let mut args = inputs.to_vec();
    args.extend([o, lse, o_part, lse_part, done]);
    args.extend(dims);
    args.push(PlanArg::I32(plan.stages as i32));
    args.push(PlanArg::I32(plan.opts()));
    args.push(PlanArg::I32(i32::from(in_kernel)));
    let mut steps = vec![launch(
        plan.kernel(sfx),
        LaunchDims {
            grid: (plan.items as u32, plan.nsplit as u32, 1),
            block: (32 * plan.warps as u32, 1, 1),
            shared_bytes: plan.shared,
        },
        args,
    )];
    if split && !in_kernel {
        steps.push(launch(
            "qsa_attn_combine",
            LaunchDims {
                grid: (rows as u32, 1, 1),
                block: (HEAD_DIM as u32, 1, 1),
                shared_bytes: 0,
            },
            vec![
                o_part,
                lse_part,
                o,
                lse,
                PlanArg::I64(rows as i64),
                PlanArg::I32(plan.nsplit as i32),
            ],
        ));
    }
    Ok(steps)
}
