//! The decode split forward (kernels/selection_attention.cu: qsa_attn_staged_fwd_split_*,
//! whose last-arriving CTA per work item merges the partials and resets the item's arrival
//! counter) emulated through `EmuApi` and the plan of src/gpu/attention.rs, on the FP32
//! path (sm_75, gfx906: wave 64) and the mma.sync path (sm_90), under the forward and the
//! reverse block order (the last CTA to arrive is the highest split in one, split 0 in the
//! other). The same plan is called twice on the same buffers with o and lse cleared in
//! between: a counter the kernel leaves non-zero makes the second call merge nothing, which
//! only a second call can show. Each call must match FP64 (src/reference/attention.rs).

mod emu_matrix;

use emu_matrix::{caps, matrix, switches};
use qsa::emu::api::EmuApi;
use qsa::emu::Schedule;
use qsa::gpu::attention::{launch_plan, AttnCall};
use qsa::gpu::launch::{PlannedCall, Step};
use qsa::gpu::{as_bytes, GpuApi};
use qsa::problem::{AttnForward, AttnProblem, Output};
use qsa::reference::attention::attn_forward_f64;

/// The matrix's attention limit for mma kernels and f32 alike is far above this: what a
/// merge that drops or double-counts a split's partial costs is O(1e-2) of o's scale here
/// (one block of 16-32 carries that share of the weight), so 1e-4 separates them.
const LIMIT: f64 = 1e-4;

fn rel_max(got: &[f32], want: &[f64]) -> (f64, usize) {
    let scale = want
        .iter()
        .filter(|x| x.is_finite())
        .fold(0f64, |a, x| a.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    got.iter()
        .zip(want)
        .enumerate()
        .map(|(i, (&g, &w))| {
            let e = if w.is_finite() {
                (g as f64 - w).abs() / scale
            } else if g as f64 == w {
                0.0
            } else {
                f64::INFINITY
            };
            (e, i)
        })
        .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a })
}

fn forward_of<'a, A: GpuApi>(c: &PlannedCall<'a, A>) -> qsa::backend::BackendResult<Output> {
    Ok(Output::AttnForward(AttnForward {
        o: c.download::<f32>("o")?,
        lse: c.download::<f32>("lse")?,
    }))
}

fn check_twice(target: &str, schedule: Schedule, sweep: &[(&str, &str)], p: &AttnProblem) {
    let m = matrix();
    let caps = caps(&m, target);
    let sw = switches(sweep);
    let api = EmuApi::new(&caps, schedule).unwrap().with_workers(1);
    let plan = launch_plan(&caps, api.props(), &sw, &AttnCall::of(p), false).unwrap();
    let what = format!(
        "{target} attn_emu_decode ({} schedule, switches {sweep:?})",
        schedule.name()
    );
    let launches: Vec<&str> = plan
        .call
        .iter()
        .filter_map(|s| match s {
            Step::Launch { kernel, grid, .. } if grid[1] > 1 => Some(kernel.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        launches,
        ["qsa_attn_staged_fwd_split_bf16"],
        "{what}: the plan must be one split launch"
    );
    let inputs = [
        ("q", as_bytes(&p.q)),
        ("k", as_bytes(&p.k)),
        ("v", as_bytes(&p.v)),
        ("ids", as_bytes(&p.ids)),
    ];
    let call = PlannedCall::new(&api, plan, &inputs, forward_of).unwrap();
    let want = attn_forward_f64(p, None).unwrap();
    let mut first = None;
    for n in 1..=2 {
        call.zero("o").unwrap();
        call.zero("lse").unwrap();
        call.enqueue().unwrap();
        api.synchronize().unwrap();
        let (o, lse): (Vec<f32>, Vec<f32>) =
            (call.download("o").unwrap(), call.download("lse").unwrap());
        for (name, got, want) in [("o", &o, &want.o), ("lse", &lse, &want.lse)] {
            let (e, at) = rel_max(got, want);
            assert!(
                e <= LIMIT,
                "{what}: call {n} of the same plan: {name}[{at}] = {} where FP64 gives {} \
                 (relative error {e:.1e} > {LIMIT:e}): the split forward {}",
                got[at],
                want[at],
                if n == 1 {
                    "is wrong on the first call (a partial missed or counted twice, or a block read from the wrong buffer of the ring or before it was staged)"
                } else {
                    "merged nothing on the second call (an arrival counter left non-zero by the first?)"
                }
            );
        }
        match &first {
            None => first = Some((o, lse)),
            Some((o1, l1)) => assert!(
                o1.iter().zip(&o).all(|(a, b)| a.to_bits() == b.to_bits())
                    && l1.iter().zip(&lse).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{what}: the second call's (o, lse) differ from the first's"
            ),
        }
    }
    // Checked after the second call, so that a counter left non-zero is seen failing the
    // second call's merge first (what the engine would get), then named here.
    let arrivals: Vec<u32> = call.download("arrivals").unwrap();
    assert!(
        arrivals.iter().all(|&a| a == 0),
        "{what}: arrival counters {arrivals:?} after two calls, not 0: the last CTA of a \
         work item must reset its counter, or the next call never merges"
    );
}

#[test]
fn the_split_forward_merges_in_one_launch_and_is_ready_for_the_next_call() {
    let m = matrix();
    let c = m
        .cases
        .iter()
        .find(|c| c.name == "attn_emu_decode")
        .unwrap();
    let p = qsa::cases::attn_problem(m.seed, c, "random_ids").unwrap();
    for target in ["sm_90", "sm_75", "gfx906"] {
        // Reverse first: there split 0, which holds blocks, arrives last, so a merge that
        // does not wait for the last split is wrong on the first call (in forward order the
        // last split's share is empty here, and only the counters show it).
        for schedule in [Schedule::Reverse, Schedule::Forward] {
            check_twice(target, schedule, &[], &p);
        }
    }
    // Several blocks per CTA on the FP32 path (wave 64): the barrier between staging a block
    // and reading it matters from the second block on (the first is covered by the q rows').
    check_twice("gfx906", Schedule::Reverse, &[("QSA_ATTN_SPLITS", "3")], &p);
    // Uneven shares (ceil(blocks / 3) per split, the last one short) through a ring of 4
    // buffers; two heads per CTA (four work items of 2 heads x 2 tokens) through a ring of 3
    // (sm_90's shared memory; gfx906's 64 KiB takes one buffer).
    let sweep = [("QSA_ATTN_SPLITS", "3"), ("QSA_ATTN_NBUF", "4")];
    check_twice("sm_90", Schedule::Reverse, &sweep, &p);
    let sweep = [("QSA_ATTN_HEADS", "2"), ("QSA_ATTN_NBUF", "3")];
    check_twice("sm_90", Schedule::Reverse, &sweep, &p);
    check_twice("gfx906", Schedule::Reverse, &[("QSA_ATTN_HEADS", "2")], &p);
}
