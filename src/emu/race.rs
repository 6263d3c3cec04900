//! Race detection by schedule: run one call under several thread orders and compare device
//! memory after every launch. Correct kernels synchronise every exchange through barriers,
//! wave collectives or atomics whose result does not depend on order, so their memory is
//! the same whatever order the threads between two sync points run in; a missing barrier,
//! a race or a read of unwritten shared memory (poisoned differently per schedule) changes
//! it. The first launch whose memory differs is the kernel named.

use super::api::{EmuApi, LaunchRecord};
use super::Schedule;
use crate::backend::{Backend, BackendError, BackendResult};
use crate::dispatch::{Switches, TargetCaps};
use crate::gpu::backend::GpuBackend;
use crate::problem::{Output, Problem};

/// What one schedule produced.
pub struct ScheduledRun {
    pub schedule: Schedule,
    pub dispatched: String,
    pub output: Output,
    pub records: Vec<LaunchRecord>,
}

/// Run `problem` on the emulated `caps` under `schedule` (blocks on one OS thread, so that
/// the order of blocks is the schedule's too).
pub fn run_scheduled(
    caps: &TargetCaps,
    switches: &Switches,
    problem: &Problem,
    schedule: Schedule,
) -> BackendResult<ScheduledRun> {
    let api = EmuApi::new(caps, schedule)?.with_workers(1);
    let backend = GpuBackend::new(api, caps.clone());
    let (dispatched, output) = {
        let mut prepared = backend.prepare(switches, problem)?;
        prepared.run()?;
        (prepared.dispatched(), prepared.output()?)
    };
    Ok(ScheduledRun {
        schedule,
        dispatched,
        output,
        records: backend.api().records(),
    })
}

/// Kernels that accumulate into global memory with float atomics (the attention backward's
/// dK / dV, and dQ in the fused KV-block-major kernel: kernels/selection_attention.cu). The order of the adds is the order threads and
/// blocks run in, on the card as here, so their sums legitimately differ in the last bits
/// between schedules.
pub const FLOAT_ATOMIC_KERNELS: [&str; 13] = [
    "qsa_attn_gather_bwd_",
    "qsa_attn_staged_bwd_",
    "qsa_attn_kv_dq_bwd_",
    "qsa_attn_kv16_dq_bwd_",
    "qsa_attn_kv16s_dq_bwd_",
    "qsa_attn_kv16sp1_dq_bwd_",
    "qsa_attn_kv16sc_dq_bwd_",
    "qsa_attn_kv16sp2_dq_bwd_",
    "qsa_attn_kvwg_dq_bwd_",
    "qsa_attn_kvwgp_dq_bwd_",
    "qsa_attn_kvwg2_dq_bwd_",
    "qsa_attn_kvwg2a_dq_bwd_",
    "qsa_attn_kvwg2a3_dq_bwd_",
];

/// How far memory written by (or computed after) a float-atomic kernel may differ between
/// schedules, relative to the largest |value| of that allocation. f32 sums of n terms in
/// two orders differ by at most about 2 n eps of the sum of |terms|; the lists here add at
/// most a few dozen terms per element, so 1e-5 (~80 eps) holds that with room, and sits
/// below the attention error gate's f32 floor (2.5e-6 .. 8e-6 of the same scale is what a
/// correct kernel may be off from FP64; a missing barrier or a stale read is off by O(1)).
pub const FLOAT_ATOMIC_TOLERANCE: f32 = 1e-5;

/// Kernels whose work assignment is claimed at run time (the decode forward's dynamic unit
/// order, `qsa_attn_dec_dyn_*`: which warp streams which unit is the order warps reach a shared
/// counter in). Each warp's online softmax then sums a different subset, so o and lse differ in
/// the last bits between schedules, on the card as here; they take the float-atomic allowance.
pub const ORDER_DEPENDENT_KERNELS: [&str; 1] = ["qsa_attn_dec_dyn_"];

fn is_float_atomic(kernel: &str) -> bool {
    FLOAT_ATOMIC_KERNELS
        .iter()
        .chain(&ORDER_DEPENDENT_KERNELS)
        .any(|p| kernel.starts_with(p))
}

/// The first element of two equally long allocations, read as f32, that differs by more
/// than `FLOAT_ATOMIC_TOLERANCE` x the larger of the two allocations' largest |finite
/// value| (non-finite values must match bit for bit).
fn beyond_tolerance(a: &[u8], b: &[u8]) -> Option<(usize, f32, f32)> {
    let floats = |m: &[u8]| -> Vec<f32> {
        m.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let (fa, fb) = (floats(a), floats(b));
    let scale = fa
        .iter()
        .chain(&fb)
        .filter(|x| x.is_finite())
        .fold(0f32, |m, x| m.max(x.abs()));
    let allowed = FLOAT_ATOMIC_TOLERANCE * scale;
    if !a.len().is_multiple_of(4) && a[a.len() / 4 * 4..] != b[b.len() / 4 * 4..] {
        return Some((a.len() / 4, f32::NAN, f32::NAN));
    }
    fa.iter().zip(&fb).enumerate().find_map(|(i, (&x, &y))| {
        let same = if x.is_finite() && y.is_finite() {
            (x - y).abs() <= allowed
        } else {
            x.to_bits() == y.to_bits()
        };
        (!same).then_some((i, x, y))
    })
}

fn race_message(kernel: &str, target: &str, i: usize, order: &str, detail: &str) -> String {
    format!(
        "race in {kernel} on {target} (launch {i} of the call): device memory after it differs between the {order}{detail}; its result depends on the order threads run between two sync points: a missing __syncthreads / __syncwarp, a race on shared or global memory, or a read of shared memory no thread wrote"
    )
}

/// The first difference between two runs' launch records, as a message naming the kernel.
/// Memory must be identical, except after a float-atomic kernel (`FLOAT_ATOMIC_KERNELS`),
/// from which on each allocation may differ by `FLOAT_ATOMIC_TOLERANCE`.
pub fn compare(
    target: &str,
    (sa, a): (Schedule, &[LaunchRecord]),
    (sb, b): (Schedule, &[LaunchRecord]),
) -> Result<(), String> {
    let order = format!("{} and {} schedules", sa.name(), sb.name());
    let mut loose = false;
    for (i, (ra, rb)) in a.iter().zip(b).enumerate() {
        if ra.kernel != rb.kernel {
            return Err(format!(
                "{target}: launch {i} is {} under one and {} under the other of the {order}: the host code's launches depend on the schedule",
                ra.kernel, rb.kernel
            ));
        }
        loose |= is_float_atomic(&ra.kernel);
        if ra.memory_digest == rb.memory_digest {
            continue;
        }
        if !loose || ra.memory.len() != rb.memory.len() {
            return Err(race_message(&ra.kernel, target, i, &order, ""));
        }
        for (j, (ma, mb)) in ra.memory.iter().zip(&rb.memory).enumerate() {
            if ma == mb {
                continue;
            }
            if ma.len() != mb.len() {
                return Err(race_message(&ra.kernel, target, i, &order, ""));
            }
            if let Some((e, x, y)) = beyond_tolerance(ma, mb) {
                let detail = format!(
                    " beyond the float-atomic allowance (allocation {j}, f32 element {e}: {x:e} against {y:e}; allowed {FLOAT_ATOMIC_TOLERANCE:e} x its largest |value|)"
                );
                return Err(race_message(&ra.kernel, target, i, &order, &detail));
            }
        }
    }
    if a.len() != b.len() {
        return Err(format!(
            "{target}: {} launches under one and {} under the other of the {order}",
            a.len(),
            b.len()
        ));
    }
    Ok(())
}

/// Run `problem` under every schedule of `schedules` (the first is the reference) and
/// return the reference run; a schedule-dependent launch is an error naming the kernel.
pub fn check(
    caps: &TargetCaps,
    switches: &Switches,
    problem: &Problem,
    schedules: &[Schedule],
) -> BackendResult<ScheduledRun> {
    let mut runs = schedules
        .iter()
        .map(|&s| run_scheduled(caps, switches, problem, s));
    let first = runs
        .next()
        .ok_or_else(|| BackendError::Input("race check with no schedule".into()))??;
    for run in runs {
        let run = run?;
        compare(
            &caps.name,
            (first.schedule, &first.records),
            (run.schedule, &run.records),
        )
        .map_err(BackendError::Device)?;
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kernel: &str, values: &[f32]) -> LaunchRecord {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let memory_digest = {
            use sha2::{Digest, Sha256};
            Sha256::digest(&bytes).into()
        };
        LaunchRecord {
            kernel: kernel.into(),
            memory_digest,
            memory: vec![bytes],
        }
    }

    fn cmp(a: &[LaunchRecord], b: &[LaunchRecord]) -> Result<(), String> {
        compare("gfx906", (Schedule::Forward, a), (Schedule::Reverse, b))
    }

    /// Last-bit differences pass after a float-atomic kernel (and after launches that
    /// follow it), never before one; a difference past the allowance fails naming it.
    #[test]
    fn float_atomic_kernels_get_the_allowance_and_nothing_else() {
        let x = [1.0f32, -2.0, 3.0];
        let y = [1.0f32 + 1e-7, -2.0, 3.0];
        let atomic = "qsa_attn_gather_bwd_bf16";
        assert!(cmp(&[rec(atomic, &x)], &[rec(atomic, &y)]).is_ok());
        assert!(cmp(
            &[rec(atomic, &x), rec("qsa_attn_combine", &x)],
            &[rec(atomic, &x), rec("qsa_attn_combine", &y)]
        )
        .is_ok());
        let e = cmp(
            &[rec("qsa_attn_staged_fwd_bf16", &x)],
            &[rec("qsa_attn_staged_fwd_bf16", &y)],
        )
        .unwrap_err();
        assert!(
            e.contains("race in qsa_attn_staged_fwd_bf16 on gfx906"),
            "{e}"
        );
        let far = [1.5f32, -2.0, 3.0];
        let e = cmp(&[rec(atomic, &x)], &[rec(atomic, &far)]).unwrap_err();
        assert!(
            e.contains("race in qsa_attn_gather_bwd_bf16") && e.contains("f32 element 0"),
            "{e}"
        );
        let nan = [f32::NAN, -2.0, 3.0];
        assert!(cmp(&[rec(atomic, &x)], &[rec(atomic, &nan)]).is_err());
    }
}
