//! The runner's launches are the plan: `GpuBackend` over a recording `GpuApi` (no device)
//! prepares and runs each family's call, and what it launched, step by step with every
//! argument, is what `launch_plan` (and so `qsa plan`) says.

use super::*;
use crate::backend::Backend;
use crate::dispatch::{Feature, Switches, Vendor};
use crate::gpu::backend::GpuBackend;
use crate::problem::{AttnProblem, Problem, ScoresProblem, TopkProblem, HEAD_DIM};
use std::cell::RefCell;

/// Records allocations (in order) and every zero-fill and launch; no device.
struct Recorder {
    props: GpuProps,
    allocs: RefCell<Vec<DevPtr>>,
    steps: RefCell<Vec<(String, LaunchDims, Vec<String>)>>,
}

impl GpuApi for Recorder {
    fn props(&self) -> &GpuProps {
        &self.props
    }
    fn alloc(&self, bytes: usize) -> BackendResult<DevPtr> {
        let mut a = self.allocs.borrow_mut();
        let p = DevPtr {
            addr: 0x1000 * (a.len() as u64 + 1),
            bytes,
        };
        a.push(p);
        Ok(p)
    }
    fn free(&self, _: DevPtr) {}
    fn upload(&self, _: DevPtr, _: &[u8]) -> BackendResult<()> {
        Ok(())
    }
    fn download(&self, _: DevPtr, dst: &mut [u8]) -> BackendResult<()> {
        dst.fill(0);
        Ok(())
    }
    fn memset_zero(&self, dst: DevPtr) -> BackendResult<()> {
        let dims = LaunchDims {
            grid: (0, 0, 0),
            block: (0, 0, 0),
            shared_bytes: 0,
        };
        self.steps
            .borrow_mut()
            .push(("zero".into(), dims, vec![format!("@{}", dst.addr)]));
        Ok(())
    }
    fn launch(&self, _: Family, kernel: &str, dims: LaunchDims, args: &[Arg]) -> BackendResult<()> {
        let args = args
            .iter()
            .map(|a| match a {
                Arg::Ptr(p) => format!("@{}", p.addr),
                Arg::Null => "null".into(),
                Arg::I32(v) => format!("i32 {v}"),
                Arg::U32(v) => format!("u32 {v}"),
                Arg::I64(v) => format!("i64 {v}"),
                Arg::F32(v) => format!("f32 {v}"),
            })
            .collect();
        self.steps.borrow_mut().push((kernel.into(), dims, args));
        Ok(())
    }
    fn synchronize(&self) -> BackendResult<()> {
        Ok(())
    }
    fn time(&self, f: &mut dyn FnMut() -> BackendResult<()>) -> BackendResult<f64> {
        f()?;
        Ok(0.0)
    }
}

fn sm90() -> TargetCaps {
    TargetCaps {
        name: "sm_90".into(),
        vendor: Vendor::Nvidia,
        wave: 32,
        shared_per_block: 232_448,
        multiprocessors: 132,
        features: vec![Feature::Tf32Tc, Feature::Bf16Tc],
    }
}

/// The plan's steps in the recorder's form, buffers by their recorded address.
fn plan_steps(plan: &LaunchPlan, rec: &Recorder) -> Vec<(String, LaunchDims, Vec<String>)> {
    let addr = |name: &str| {
        let i = plan.buffers.iter().position(|b| b.name == name).unwrap();
        format!("@{}", rec.allocs.borrow()[i].addr)
    };
    plan.setup
        .iter()
        .chain(&plan.call)
        .map(|s| match s {
            Step::Zero { buffer } => {
                let dims = LaunchDims {
                    grid: (0, 0, 0),
                    block: (0, 0, 0),
                    shared_bytes: 0,
                };
                ("zero".into(), dims, vec![addr(buffer)])
            }
            Step::Launch {
                kernel,
                grid,
                block,
                shared_bytes,
                args,
            } => {
                let dims = LaunchDims {
                    grid: (grid[0], grid[1], grid[2]),
                    block: (block[0], block[1], block[2]),
                    shared_bytes: *shared_bytes,
                };
                let args = args
                    .iter()
                    .map(|a| match a {
                        PlanArg::Buffer(n) => addr(n),
                        PlanArg::Null => "null".into(),
                        PlanArg::I32(v) => format!("i32 {v}"),
                        PlanArg::U32(v) => format!("u32 {v}"),
                        PlanArg::I64(v) => format!("i64 {v}"),
                        PlanArg::F32(v) => format!("f32 {v}"),
                    })
                    .collect();
                (kernel.clone(), dims, args)
            }
        })
        .collect()
}

fn switches(kv: &[(&str, &str)]) -> Switches {
    Switches::from_pairs(kv)
}

fn check(problem: Problem, sw: Switches, plan: impl Fn(&GpuProps) -> LaunchPlan) {
    let caps = sm90();
    let rec = Recorder {
        props: props_of(&caps),
        allocs: RefCell::new(Vec::new()),
        steps: RefCell::new(Vec::new()),
    };
    let backend = GpuBackend::new(rec, caps);
    let want = plan(backend.api().props());
    let mut prep = backend.prepare(&sw, &problem).unwrap();
    prep.run().unwrap();
    assert_eq!(prep.dispatched(), want.dispatched);
    drop(prep);
    let rec = backend.api();
    let sizes: Vec<usize> = rec.allocs.borrow().iter().map(|p| p.bytes).collect();
    let planned: Vec<usize> = want.buffers.iter().map(|b| b.bytes.max(4)).collect();
    assert_eq!(sizes, planned, "allocations differ from the plan's buffers");
    let got = rec.steps.borrow().clone();
    let expect = plan_steps(&want, rec);
    assert_eq!(got.len(), expect.len(), "{got:?}\nplan: {expect:?}");
    for (i, (g, w)) in got.iter().zip(&expect).enumerate() {
        assert_eq!(
            (&g.0, g.1.grid, g.1.block, g.1.shared_bytes, &g.2),
            (&w.0, w.1.grid, w.1.block, w.1.shared_bytes, &w.2),
            "step {i}: the runner launched something else than the plan of `qsa plan`"
        );
    }
}

#[test]
fn the_runner_launches_exactly_the_plan() {
    let caps = sm90();
    // Top-k: the split (a zeroed workspace, two launches) and the wide kernel.
    for kernel in ["split", "wide"] {
        let (nq, n, k) = (3, 40_000, 64);
        let p = TopkProblem {
            nq,
            n,
            capacity: n,
            k,
            scores: vec![0.0; nq * n],
            active: None,
        };
        let sw = switches(&[("QSA_TOPK_KERNEL", kernel)]);
        let shape = crate::gpu::topk::TopkCall {
            nq,
            n,
            capacity: n,
            k,
            has_active: false,
        };
        check(Problem::Topk(p), sw.clone(), |props| {
            crate::gpu::topk::launch_plan(&caps, props, &sw, &shape).unwrap()
        });
    }
    // Scores: the TF32 decode tile.
    let (nq, heads, blocks) = (1, 64, 1000);
    let p = ScoresProblem {
        nq,
        heads,
        blocks,
        q: vec![0.0; nq * heads * HEAD_DIM],
        kb: vec![0.0; blocks * HEAD_DIM],
        w: vec![0.0; nq * heads],
    };
    let shape = crate::gpu::scores::ScoresCall { nq, heads, blocks };
    check(Problem::Scores(p), switches(&[]), |props| {
        crate::gpu::scores::launch_plan(&caps, props, &switches(&[]), &shape).unwrap()
    });
    // Attention: the split forward (staged + combine), and the backward with its forward
    // as setup, with a swept split count.
    let attn = AttnProblem::zeroed(1, 2, 700, 16, 2, 4);
    let shape = crate::gpu::attention::AttnCall::of(&attn);
    for backward in [false, true] {
        // The staged kernel forced: sm_80+ decode shapes take the decode kernel otherwise.
        let sw = switches(&[("QSA_ATTN_SPLITS", "3"), ("QSA_ATTN_KERNEL", "staged")]);
        let problem = if backward {
            Problem::AttnBackward(attn.clone())
        } else {
            Problem::AttnForward(attn.clone())
        };
        check(problem, sw.clone(), |props| {
            let plan =
                crate::gpu::attention::launch_plan(&caps, props, &sw, &shape, backward).unwrap();
            assert!(plan
                .setup
                .iter()
                .chain(&plan.call)
                .any(|s| matches!(s, Step::Launch { kernel, .. } if kernel == "qsa_attn_combine")));
            plan
        });
    }
    // The decode forward: splits merged in-kernel (a zeroed ticket workspace in the setup) and
    // by qsa_attn_combine.
    for (merge, combine) in [("kernel", false), ("launch", true)] {
        let sw = switches(&[("QSA_ATTN_DEC_SPLITS", "3"), ("QSA_ATTN_DEC_MERGE", merge)]);
        check(Problem::AttnForward(attn.clone()), sw.clone(), |props| {
            let plan =
                crate::gpu::attention::launch_plan(&caps, props, &sw, &shape, false).unwrap();
            let has = |k: &str| {
                plan.call
                    .iter()
                    .any(|s| matches!(s, Step::Launch { kernel, .. } if kernel == k))
            };
            assert!(has("qsa_attn_dec_fwd_bf16"), "{merge}: {:?}", plan.call);
            assert_eq!(has("qsa_attn_combine"), combine, "{merge}: {:?}", plan.call);
            assert_eq!(
                plan.setup
                    .iter()
                    .any(|s| matches!(s, Step::Zero { buffer: "done" })),
                !combine,
                "{merge}: {:?}",
                plan.setup
            );
            plan
        });
    }
}

#[test]
fn the_kv_major_backwards_launch_their_plans() {
    // QSA_ATTN_BWD=kv: the query-side pass (dQ, D) then the KV-block-major pass, no zero-fill;
    // kvdq: dq zero-filled, D by the delta kernel, then the fused kernel (dQ by atomics).
    let caps = sm90();
    let (batch, q_len, hkv, t) = (1, 3, 1, 4);
    let attn = AttnProblem {
        ids: vec![0; batch * q_len * hkv * t],
        ..AttnProblem::zeroed(batch, q_len, 200, 16, hkv, t)
    };
    let shape = crate::gpu::attention::AttnCall::of(&attn);
    let cases: [(&str, &[&str], &[&str]); 2] = [
        (
            "kv",
            &[],
            &["qsa_attn_staged_bwd_bf16", "qsa_attn_kv_bwd_bf16"],
        ),
        (
            "kvdq",
            &["dq"],
            &["qsa_attn_bwd_delta", "qsa_attn_kv_dq_bwd_bf16"],
        ),
    ];
    for (bwd, zeroed, kernels) in cases {
        let sw = switches(&[("QSA_ATTN_BWD", bwd)]);
        check(Problem::AttnBackward(attn.clone()), sw.clone(), |props| {
            let plan = crate::gpu::attention::launch_plan(&caps, props, &sw, &shape, true).unwrap();
            let zeros = zero_fills(&plan);
            let launched: Vec<&str> = plan
                .call
                .iter()
                .filter_map(|s| match s {
                    Step::Launch { kernel, .. } => Some(kernel.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(zeros, zeroed, "QSA_ATTN_BWD={bwd}: the call's zero-fills");
            assert_eq!(launched, kernels, "QSA_ATTN_BWD={bwd}: the call's launches");
            plan
        });
    }
}

/// The buffers a plan's call zero-fills, in order.
fn zero_fills(plan: &LaunchPlan) -> Vec<&'static str> {
    plan.call
        .iter()
        .filter_map(|s| match s {
            Step::Zero { buffer } => Some(*buffer),
            _ => None,
        })
        .collect()
}

/// The wgmma backward's query ranges (`QSA_ATTN_KV_QCHUNK`): with ranges, dk / dv are
/// zero-filled (the kernel adds each range's sums), the grid is one CTA per (batch, KV head,
/// range, block) and the range's tokens are the kernel's last argument; without (`off`, or the
/// default's 2,048 tokens over 300 queries) neither fill nor more CTAs, and 0 passed.
#[test]
fn query_ranges_zero_fill_dk_dv_and_multiply_the_grid() {
    let caps = TargetCaps {
        features: vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Wgmma],
        ..sm90()
    };
    let (batch, q_len, kv_len, hkv, t) = (2, 300, 330, 2, 4);
    let attn = AttnProblem {
        ids: vec![0; batch * q_len * hkv * t],
        ..AttnProblem::zeroed(batch, q_len, kv_len, 16, hkv, t)
    };
    let shape = crate::gpu::attention::AttnCall::of(&attn);
    let blocks = kv_len.div_ceil(64) as u32;
    let wg2a3 = [
        ("QSA_ATTN_BWD", "kvdq"),
        ("QSA_ATTN_KV_MMA", "wg2a"),
        ("QSA_ATTN_KV_DP_PARTS", "3"),
    ];
    let cases: [(Option<&str>, &[&str], u32, i32); 3] = [
        (Some("64"), &["dq", "dk", "dv"], 5, 64),
        (Some("off"), &["dq"], 1, 0),
        (None, &["dq"], 1, 0),
    ];
    for (qchunk, zeroed, ranges, arg) in cases {
        let mut pairs = wg2a3.to_vec();
        pairs.extend(qchunk.map(|v| ("QSA_ATTN_KV_QCHUNK", v)));
        let sw = switches(&pairs);
        let plan =
            crate::gpu::attention::launch_plan(&caps, &props_of(&caps), &sw, &shape, true).unwrap();
        let zeros = zero_fills(&plan);
        assert_eq!(
            zeros, zeroed,
            "QSA_ATTN_KV_QCHUNK={qchunk:?}: the zero-fills"
        );
        let Some(Step::Launch {
            kernel, grid, args, ..
        }) = plan.call.last()
        else {
            panic!("QSA_ATTN_KV_QCHUNK={qchunk:?}: no launch last")
        };
        assert_eq!(kernel, "qsa_attn_kvwg2a3_dq_bwd_bf16");
        let ctas = batch as u32 * hkv as u32 * blocks * ranges;
        assert_eq!(grid[0], ctas, "QSA_ATTN_KV_QCHUNK={qchunk:?}: the grid");
        assert!(
            matches!(args.last(), Some(PlanArg::I32(v)) if *v == arg),
            "QSA_ATTN_KV_QCHUNK={qchunk:?}: the kernel's last argument {:?}, expected {arg}",
            args.last()
        );
    }
}

/// Head-major K / V (`kv_layout: hnd`): the decode forward takes them with its layout bit
/// (DEC_OPT_HND in `opts`), launched as planned; every other path (the backward, the gather
/// and staged forwards) is refused before any allocation, with the fix named.
#[test]
fn head_major_kv_reaches_only_the_decode_forward() {
    use crate::dispatch::attention_decode::OPT_HND;
    use crate::problem::KvLayout;
    let attn = AttnProblem {
        kv_layout: KvLayout::Hnd,
        ..AttnProblem::zeroed(2, 3, 300, 16, 2, 4)
    };
    let shape = crate::gpu::attention::AttnCall::of(&attn);
    let caps = sm90();
    let opts_of = |plan: &LaunchPlan| -> Vec<i32> {
        plan.call
            .iter()
            .filter_map(|s| match s {
                Step::Launch { kernel, args, .. } if kernel.starts_with("qsa_attn_dec_") => {
                    // (..., stages, opts[, in_kernel]): opts is the last I32 for the cluster
                    // kernel, the one before for the split one.
                    let ints: Vec<i32> = args
                        .iter()
                        .filter_map(|a| match a {
                            PlanArg::I32(x) => Some(*x),
                            _ => None,
                        })
                        .collect();
                    let back = if kernel.contains("_cl_") { 1 } else { 2 };
                    Some(ints[ints.len() - back])
                }
                _ => None,
            })
            .collect()
    };
    for sw in [
        switches(&[]),
        switches(&[("QSA_ATTN_DEC_MERGE", "push")]),
        switches(&[
            ("QSA_ATTN_DEC_SPLITS", "3"),
            ("QSA_ATTN_DEC_MERGE", "launch"),
        ]),
    ] {
        check(Problem::AttnForward(attn.clone()), sw.clone(), |props| {
            let plan =
                crate::gpu::attention::launch_plan(&caps, props, &sw, &shape, false).unwrap();
            let opts = opts_of(&plan);
            assert!(
                !opts.is_empty() && opts.iter().all(|o| o & OPT_HND != 0),
                "{:?}",
                plan.call
            );
            plan
        });
    }
    // The same call in fla's layout carries no layout bit.
    let nhd = crate::gpu::attention::AttnCall {
        kv_layout: KvLayout::Nhd,
        ..shape
    };
    let props = props_of(&caps);
    let plan =
        crate::gpu::attention::launch_plan(&caps, &props, &switches(&[]), &nhd, false).unwrap();
    assert!(opts_of(&plan).iter().all(|o| o & OPT_HND == 0));
    for (sw, backward, why) in [
        (switches(&[]), true, "not by the backward"),
        (
            switches(&[("QSA_ATTN_KERNEL", "gather")]),
            false,
            "QSA_ATTN_KERNEL=gather",
        ),
        (
            switches(&[("QSA_ATTN_KERNEL", "staged")]),
            false,
            "QSA_ATTN_KERNEL=staged",
        ),
    ] {
        let e = match crate::gpu::attention::launch_plan(&caps, &props, &sw, &shape, backward) {
            Ok(p) => panic!(
                "{why}: head-major K / V planned onto {} (it reads fla's layout): refuse it",
                p.dispatched
            ),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(why) && e.contains("kv_layout: nhd"),
            "{why}: {e}"
        );
        let rec = Recorder {
            props: props_of(&caps),
            allocs: RefCell::new(Vec::new()),
            steps: RefCell::new(Vec::new()),
        };
        let backend = GpuBackend::new(rec, caps.clone());
        let problem = if backward {
            Problem::AttnBackward(attn.clone())
        } else {
            Problem::AttnForward(attn.clone())
        };
        assert!(backend.prepare(&sw, &problem).is_err());
        assert!(
            backend.api().allocs.borrow().is_empty(),
            "{why}: refused after allocating"
        );
    }
}
