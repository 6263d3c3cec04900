//! The launch plan of one selection-attention call: the dispatch's choice of kernel
//! (staged, warp, decode; gather / staged / KV-block-major backward) turned into the
//! buffers, zero-fills and launches that `prepare` runs and `qsa plan` prints, each grid
//! checked against the launch limits. Head-major K / V reach only the decode forward; any
//! other plan is refused here (`hnd_refused`).

use super::{shape, validate_shape, AttnCall, MAX_GRID_X, MAX_GRID_Y};
use crate::backend::{BackendError, BackendResult};
use crate::dispatch::attention::{
    choose, choose_backward, choose_forward, kv_bwd_shared_bytes, kv_products, kv_wg_threads,
    staged_plan_for, wg_geometry, AttnKernel, BwdPath, BwdShape, FwdPath, KvProducts, StagedPlan,
    GATHER_THREADS, KV_BWD_THREADS, STAGED_THREADS,
};
use crate::dispatch::attention_decode::{decode_plan, dispatch_name, DEC_MAX_T};
use crate::dispatch::attention_do::{resolve_do, DoRead};
use crate::dispatch::attention_kv_qchunk::{kv_qchunk, ranges};
use crate::dispatch::attention_warp::{warp_items, WarpPlan};
use crate::dispatch::{Switches, TargetCaps};
use crate::gpu::attention_decode::forward_steps;
use crate::gpu::launch::{launch, LaunchPlan, PlanArg, Role, Step};
use crate::gpu::{Family, GpuProps, LaunchDims};
use crate::problem::{KvLayout, ATTN_BLOCK, HEAD_DIM};

/// Why a head-major (`kv_layout: hnd`) call has no kernel here, and the fix.
fn hnd_refused(caps: &TargetCaps, sw: &Switches, p: &AttnCall, backward: bool) -> BackendError {
    let path = if backward {
        "the backward".to_string()
    } else if !crate::dispatch::attention_decode::built(caps) {
        format!("{} (no decode kernel: it needs NVIDIA sm_80+)", caps.name)
    } else if sw.get("QSA_ATTN_KERNEL").is_some_and(|k| k != "decode") {
        format!(
            "QSA_ATTN_KERNEL={}",
            crate::echo::value(sw.get("QSA_ATTN_KERNEL").unwrap_or(""))
        )
    } else {
        format!(
            "this shape (t = {}, {} query tokens: the dispatch picks the staged forward; \
             QSA_ATTN_KERNEL=decode forces the decode kernel where t <= {DEC_MAX_T})",
            p.t, p.q_len
        )
    };
    BackendError::Unsupported(format!(
        "kv_layout hnd ([batch, hkv, kv_len, D]) is read only by the decode forward, not by {path}: \
         pass K / V in the nhd layout ([batch, kv_len, hkv, D], kv_layout: nhd) for this call"
    ))
}

/// The staged plan of a pass, checked against the launch limits.
fn staged(
    caps: &TargetCaps,
    switches: &Switches,
    p: &AttnCall,
    backward: bool,
) -> BackendResult<StagedPlan> {
    let plan = staged_plan_for(caps, switches, p.batch, p.q_len, p.hq, p.hkv, p.t, backward)?;
    if plan.items > MAX_GRID_X || plan.nsplit > MAX_GRID_Y {
        return Err(shape(format!(
            "staged grid {} x {} exceeds the launch limits",
            plan.items, plan.nsplit
        )));
    }
    Ok(plan)
}

fn staged_args(plan: &StagedPlan) -> [PlanArg; 3] {
    [
        PlanArg::I32(plan.hc as i32),
        PlanArg::I32(plan.qt as i32),
        PlanArg::I32(plan.nbuf as i32),
    ]
}

/// Validate the shape, choose the kernel with `crate::dispatch`, and return every buffer and
/// launch of one call. The runner launches this plan (`prepare`), `qsa plan` prints it. For
/// the backward, `setup` runs the forward once (its o and lse feed the backward) and `call`
/// is the backward alone, the zeroing of dk / dv included.
pub fn launch_plan(
    caps: &TargetCaps,
    props: &GpuProps,
    switches: &Switches,
    p: &AttnCall,
    backward: bool,
) -> BackendResult<LaunchPlan> {
    validate_shape(p)?;
    let kernel = choose(caps, switches);
    let rows = p.batch * p.q_len * p.hq;
    // Decode shapes on sm_80+ NVIDIA take the decode kernel (src/dispatch/attention_decode.rs).
    let mut dec_plan = match kernel {
        AttnKernel::Gather => None,
        AttnKernel::Staged => {
            decode_plan(caps, switches, p.batch, p.q_len, p.hq, p.hkv, p.t, backward)?
        }
    };
    // Head-major K / V: only the decode forward reads them (its strides); every other path
    // is refused here, before any buffer or launch.
    if p.kv_layout == KvLayout::Hnd {
        match dec_plan.as_mut() {
            Some(plan) => plan.hnd = true,
            None => return Err(hnd_refused(caps, switches, p, backward)),
        }
    }
    // The staged plan is made (its switches checked) even where the decode kernel runs: a bad
    // QSA_ATTN_NBUF / QSA_ATTN_SPLITS is an error on every shape, not only on prefill ones.
    let fwd_plan = match kernel {
        AttnKernel::Staged => {
            Some(staged(caps, switches, p, false)?).filter(|_| dec_plan.is_none())
        }
        AttnKernel::Gather => None,
    };
    let fwd_path = match &fwd_plan {
        Some(plan) => choose_forward(caps, switches, plan, p.t)?,
        None => FwdPath::Staged,
    };
    let waves = (GATHER_THREADS / props.warp_size.max(1)).max(1) as usize;
    if rows.div_ceil(waves) > MAX_GRID_X {
        return Err(shape(format!(
            "{rows} query rows exceed the gather kernels' grid"
        )));
    }
    let gather_dims = LaunchDims {
        grid: (rows.div_ceil(waves) as u32, 1, 1),
        block: (GATHER_THREADS, 1, 1),
        shared_bytes: 0,
    };
    let bwd_shape = BwdShape {
        q_len: p.q_len,
        kv_len: p.kv_len,
        t: p.t,
    };
    let bwd_path = match kernel {
        AttnKernel::Staged if backward => {
            Some(choose_backward(caps, switches, p.dtype, bwd_shape)?)
        }
        _ => None,
    };
    // Checked on every staged backward call (a bad value is refused whichever path runs).
    let products = match bwd_path {
        Some(_) => Some(kv_products(caps, switches, p.dtype, bwd_shape)?),
        None => None,
    };
    // Query ranges: the fused pass's (the wgmma forms' kv_qchunk).
    let qchunk = match (bwd_path, products) {
        (Some(path), Some(kv)) => kv_qchunk(switches, path, kv, p.q_len)?,
        _ => None,
    };
    // dO given as bf16: read natively by the fused wg2a forms (kvwg2ab), widened to f32 first
    // for every other backward.
    let (products, do_read) = resolve_do(p.do_dtype, bwd_path, products);
    let do_read = if backward { do_read } else { DoRead::F32 };
    let dispatched: String = match (kernel, &fwd_plan, bwd_path, products) {
        (_, _, Some(path), Some(kv)) => path.dispatch_name(kv, qchunk) + do_read.suffix(),
        (_, _, Some(path), None) => path.name().to_string() + do_read.suffix(),
        _ if dec_plan.is_some() => dec_plan.as_ref().map_or("decode", dispatch_name).into(),
        (AttnKernel::Staged, Some(plan), _, _) => fwd_path.name(plan.nsplit > 1).into(),
        (k, _, _, _) => k.name().to_string() + do_read.suffix(),
    };
    let mut lp = LaunchPlan::new(Family::Attention, dispatched);
    let kv_bytes = p.batch * p.kv_len * p.hkv * HEAD_DIM * 2;
    let q = lp.buffer("q", rows * HEAD_DIM * 2, Role::Input);
    let k = lp.buffer("k", kv_bytes, Role::Input);
    let v = lp.buffer("v", kv_bytes, Role::Input);
    let ids = lp.buffer("ids", p.batch * p.q_len * p.hkv * p.t * 4, Role::Input);
    // The backward reads o and lse from its forward: scratch there, the result here.
    let fwd_role = if backward {
        Role::Workspace
    } else {
        Role::Output
    };
    let o = lp.buffer("o", rows * HEAD_DIM * 4, fwd_role);
    let lse = lp.buffer("lse", rows * 4, fwd_role);
    let dims = [
        PlanArg::I32(p.batch as i32),
        PlanArg::I32(p.q_len as i32),
        PlanArg::I32(p.kv_len as i32),
        PlanArg::I32(p.hq as i32),
        PlanArg::I32(p.hkv as i32),
        PlanArg::I32(p.t as i32),
        PlanArg::F32(p.scale),
    ];
    let sfx = p.dtype.name();
    let mut forward = Vec::new();
    match (&fwd_plan, fwd_path) {
        (None, _) if dec_plan.is_some() => {
            let plan = dec_plan.as_ref().expect("checked");
            forward = forward_steps(&mut lp, plan, [q, k, v, ids], o, lse, rows, dims, sfx)?;
        }
        (None, _) => {
            let mut args = vec![q, k, v, ids, o, lse];
            args.extend(dims);
            forward.push(launch(
                format!("qsa_attn_gather_fwd_{sfx}"),
                gather_dims,
                args,
            ));
        }
        (Some(_), FwdPath::Warp(w)) => {
            forward.push(warp_launch(p, &w, [q, k, v, ids, o, lse], dims, sfx)?);
        }
        (Some(plan), _) => {
            let split = plan.nsplit > 1;
            let (o_dst, lse_dst) = if split {
                (
                    lp.buffer("o_part", plan.nsplit * rows * HEAD_DIM * 4, Role::Workspace),
                    lp.buffer("lse_part", plan.nsplit * rows * 4, Role::Workspace),
                )
            } else {
                (o, lse)
            };
            let mut args = vec![q, k, v, ids, o_dst, lse_dst];
            args.extend(dims);
            // The ring kernel takes its slot count where the staged one takes nbuf.
            let (name, shared, depth) = match fwd_path {
                FwdPath::Staged | FwdPath::Warp(_) => ("staged", plan.shared, plan.nbuf),
                FwdPath::Ring {
                    stages,
                    shared,
                    q_shared,
                    swizzle,
                    ..
                } => (
                    match (q_shared, swizzle) {
                        (true, _) => "ring_qs",
                        (false, true) => "ring_sw",
                        (false, false) => "ring",
                    },
                    shared,
                    stages,
                ),
            };
            args.extend([
                PlanArg::I32(plan.hc as i32),
                PlanArg::I32(plan.qt as i32),
                PlanArg::I32(depth as i32),
            ]);
            if let FwdPath::Ring {
                halves,
                parts,
                order,
                lazy,
                warp_copy,
                ..
            } = fwd_path
            {
                args.push(PlanArg::I32(i32::from(halves)));
                args.push(PlanArg::I32(parts as i32));
                args.push(PlanArg::I32(order.arg()));
                args.push(PlanArg::I32(i32::from(lazy)));
                args.push(PlanArg::I32(i32::from(warp_copy)));
            }
            let staged_dims = LaunchDims {
                grid: (plan.items as u32, plan.nsplit as u32, 1),
                block: (STAGED_THREADS, 1, 1),
                shared_bytes: shared,
            };
            forward.push(launch(
                format!("qsa_attn_{name}_fwd_{sfx}"),
                staged_dims,
                args,
            ));
            if split {
                let combine = LaunchDims {
                    grid: (rows as u32, 1, 1),
                    block: (HEAD_DIM as u32, 1, 1),
                    shared_bytes: 0,
                };
                let args = vec![
                    o_dst,
                    lse_dst,
                    o,
                    lse,
                    PlanArg::I64(rows as i64),
                    PlanArg::I32(plan.nsplit as i32),
                ];
                forward.push(launch("qsa_attn_combine", combine, args));
            }
        }
    }
    if !backward {
        lp.call = forward;
        return Ok(lp);
    }
    lp.setup = forward;
    let d_o_given = lp.buffer("d_o", rows * HEAD_DIM * p.do_dtype.bytes(), Role::Input);
    let dq = lp.buffer("dq", rows * HEAD_DIM * 4, Role::Output);
    let dk = lp.buffer("dk", kv_bytes * 2, Role::Output);
    let dv = lp.buffer("dv", kv_bytes * 2, Role::Output);
    // The f32 rows every kernel but kvwg2ab reads: the input itself, or its widened copy.
    let d_o = match do_read {
        DoRead::Widen => {
            let wide = lp.buffer("d_o_f32", rows * HEAD_DIM * 4, Role::Workspace);
            let n = rows * HEAD_DIM;
            let widen = LaunchDims {
                grid: (n.div_ceil(256).min(MAX_GRID_X) as u32, 1, 1),
                block: (256, 1, 1),
                shared_bytes: 0,
            };
            let args = vec![d_o_given, wide, PlanArg::I64(n as i64)];
            lp.call.push(launch("qsa_attn_do_widen", widen, args));
            wide
        }
        DoRead::F32 | DoRead::Native => d_o_given,
    };
    let zero_dk_dv = [Step::Zero { buffer: "dk" }, Step::Zero { buffer: "dv" }];
    match bwd_path {
        None => {
            let mut args = vec![q, k, v, ids, o, lse, d_o, dq, dk, dv];
            args.extend(dims);
            lp.call.extend(zero_dk_dv);
            lp.call.push(launch(
                format!("qsa_attn_gather_bwd_{sfx}"),
                gather_dims,
                args,
            ));
        }
        Some(BwdPath::KvFused) => {
            // No query-side pass: qsa_attn_bwd_delta writes D per row (the gather kernels'
            // geometry: one wave per row), then the KV-block-major kernel adds dQ into the
            // zero-filled dq besides writing dK / dV. Its tiles are the staged plan's (hc, qt).
            let plan = staged(caps, switches, p, true)?;
            let drow = lp.buffer("drow", rows * 4, Role::Workspace);
            lp.call.push(Step::Zero { buffer: "dq" });
            let delta = match do_read {
                DoRead::Native => "qsa_attn_bwd_delta_do16",
                _ => "qsa_attn_bwd_delta",
            };
            lp.call.push(launch(
                delta,
                gather_dims,
                vec![o, d_o, drow, PlanArg::I64(rows as i64)],
            ));
            let kv = products.expect("a staged backward");
            // Query ranges (QSA_ATTN_KV_QCHUNK): a block's dK / dV summed over its ranges with
            // atomics, so into zero-filled buffers.
            if qchunk.is_some() {
                lp.call.extend(zero_dk_dv);
            }
            lp.call.push(kv_bwd_launch(
                p,
                &plan,
                kv,
                KvPass::Fused { qchunk },
                &format!("qsa_attn_{}_dq_bwd_{sfx}", kv.stem()),
                vec![q, k, v, ids, lse, drow, d_o, dk, dv, dq],
                dims,
            )?);
        }
        Some(path) => {
            // The backward's own plan: no splits. The query-side pass writes D = rowsum(dO O)
            // per row to `drow` (read by the KV-block-major pass).
            let plan = staged(caps, switches, p, true)?;
            let drow = lp.buffer("drow", rows * 4, Role::Workspace);
            let kv_major = path == BwdPath::KvMajor;
            let mut args = vec![q, k, v, ids, o, lse, d_o, dq, dk, dv, drow];
            args.extend(dims);
            args.extend(staged_args(&plan));
            args.push(PlanArg::I32(i32::from(!kv_major)));
            if !kv_major {
                lp.call.extend(zero_dk_dv);
            }
            let staged_dims = LaunchDims {
                grid: (plan.items as u32, 1, 1),
                block: (STAGED_THREADS, 1, 1),
                shared_bytes: plan.shared,
            };
            lp.call.push(launch(
                format!("qsa_attn_staged_bwd_{sfx}"),
                staged_dims,
                args,
            ));
            if kv_major {
                let kv = products.expect("a staged backward");
                lp.call.push(kv_bwd_launch(
                    p,
                    &plan,
                    kv,
                    KvPass::DkDv,
                    &format!("qsa_attn_{}_bwd_{sfx}", kv.stem()),
                    vec![q, k, v, ids, lse, drow, d_o, dk, dv],
                    dims,
                )?);
            }
        }
    }
    Ok(lp)
}

/// The warp forward (`qsa_attn_warp_fwd_*`): one warp per (batch, token, kv head, 16-head
/// chunk), `w.warps` per CTA, never split; o and lse written directly.
fn warp_launch(
    p: &AttnCall,
    w: &WarpPlan,
    buffers: [PlanArg; 6],
    dims: [PlanArg; 7],
    sfx: &str,
) -> BackendResult<Step> {
    let items = warp_items(p.batch, p.q_len, p.hq, p.hkv);
    let ctas = items.div_ceil(w.warps);
    if ctas > MAX_GRID_X {
        return Err(shape(format!(
            "{items} warp-forward items exceed the launch's grid"
        )));
    }
    let mut args = buffers.to_vec();
    args.extend(dims);
    args.extend([
        PlanArg::I32(w.stages as i32),
        PlanArg::I32(w.parts as i32),
        PlanArg::I32(i32::from(w.lazy)),
    ]);
    let dims = LaunchDims {
        grid: (ctas as u32, 1, 1),
        block: (32 * w.warps as u32, 1, 1),
        shared_bytes: w.shared,
    };
    Ok(launch(
        format!("qsa_attn_{}_fwd_{sfx}", w.kernel()),
        dims,
        args,
    ))
}

/// Which KV-block-major pass `kv_bwd_launch` plans.
#[derive(Clone, Copy)]
enum KvPass {
    /// `qsa_attn_{stem}_bwd_*`: dK / dV only.
    DkDv,
    /// `qsa_attn_{stem}_dq_bwd_*`: dQ added too (dq last among the buffers); the wgmma forms
    /// take `qchunk` (`kv_qchunk`: None, one CTA per block over every query).
    Fused { qchunk: Option<usize> },
}

/// The KV-block-major pass (`kernel`: qsa_attn_kv_bwd_*, or qsa_attn_kv_dq_bwd_* with dq last
/// among `buffers`): one CTA per (batch, KV head, KV block), every element of dk / dv written
/// once (so no zero-fill), after the pass that writes drow; with query ranges (the wgmma forms'
/// `qchunk`) one CTA per (batch, KV head, range, block), dk / dv zero-filled by the caller.
/// `kernel`'s stem is `kv`'s (`kv`, `kv16`, `kv16s`): `kv` gives dO's parts in dP and, with
/// the fused pass (the `_dq_` kernel), the shared bytes.
#[allow(clippy::too_many_arguments)]
fn kv_bwd_launch(
    p: &AttnCall,
    plan: &StagedPlan,
    kv: KvProducts,
    pass: KvPass,
    kernel: &str,
    buffers: Vec<PlanArg>,
    dims: [PlanArg; 7],
) -> BackendResult<Step> {
    let (fused, qchunk) = match pass {
        KvPass::DkDv => (false, None),
        KvPass::Fused { qchunk } => (true, qchunk),
    };
    let ctas = p.batch * p.hkv * p.kv_len.div_ceil(ATTN_BLOCK) * ranges(p.q_len, qchunk);
    if ctas > MAX_GRID_X {
        return Err(shape(format!(
            "{ctas} KV blocks x heads x batch (x query ranges) exceed the KV-block-major \
             backward's grid"
        )));
    }
    let mut args = buffers;
    args.extend(dims);
    // The wgmma form's tiles are 64 rows (wg_geometry), the others' the staged plan's 16.
    let (hc, qt) = if kv.wg > 0 {
        wg_geometry(plan.hc)
    } else {
        (plan.hc, plan.qt)
    };
    args.push(PlanArg::I32(hc as i32));
    args.push(PlanArg::I32(qt as i32));
    args.push(PlanArg::I32(kv.dp_parts as i32));
    let threads = if kv.wg > 0 {
        // kwg_bwd's qchunk: 0 for one range (kv_qchunk checked it fits an i32).
        args.push(PlanArg::I32(qchunk.unwrap_or(0) as i32));
        kv_wg_threads(kv.wg)
    } else {
        KV_BWD_THREADS
    };
    let kv_dims = LaunchDims {
        grid: (ctas as u32, 1, 1),
        block: (threads, 1, 1),
        shared_bytes: kv_bwd_shared_bytes(kv, fused) as u32,
    };
    Ok(launch(kernel, kv_dims, args))
}
