//! GPU host code for the attention family: validation, dispatch, upload, launches
//! (see gpu/mod.rs). Launch rules mirror kernels/selection_attention.cu and
//! bench/attention_vs_torch.py.

use super::{as_bytes, as_bytes_mut, Arg, DevPtr, Family, GpuApi, LaunchDims};
use crate::backend::{BackendError, BackendResult, Prepared};
use crate::dispatch::attention::{
    choose, staged_plan, AttnKernel, StagedPlan, GATHER_THREADS, STAGED_THREADS,
};
use crate::dispatch::{Switches, TargetCaps};
use crate::problem::{
    AttnBackward, AttnDtype, AttnForward, AttnProblem, Output, ATTN_BLOCK, HEAD_DIM,
};

/// Largest grid.x / grid.y of a launch.
const MAX_GRID_X: usize = i32::MAX as usize;
const MAX_GRID_Y: usize = 65_535;

fn shape(msg: String) -> BackendError {
    BackendError::Shape(msg)
}

/// Check `p` against the kernels' contract and limits; every failure names the field.
pub fn validate(p: &AttnProblem) -> BackendResult<()> {
    let dims = [
        ("batch", p.batch),
        ("q_len", p.q_len),
        ("kv_len", p.kv_len),
        ("hq", p.hq),
        ("hkv", p.hkv),
        ("t", p.t),
    ];
    for (name, v) in dims {
        if v == 0 {
            return Err(shape(format!(
                "selection attention: {name} = 0 (every dimension must be >= 1)"
            )));
        }
        if v > i32::MAX as usize {
            return Err(shape(format!(
                "selection attention: {name} = {v} exceeds the kernels' int32 argument"
            )));
        }
    }
    if !p.hq.is_multiple_of(p.hkv) {
        return Err(shape(format!(
            "hq = {} is not a multiple of hkv = {} (GQA groups)",
            p.hq, p.hkv
        )));
    }
    if p.q_len > p.kv_len {
        return Err(shape(format!(
            "q_len = {} > kv_len = {}: query token i sits at kv_len - q_len + i",
            p.q_len, p.kv_len
        )));
    }
    let n = |a: &[usize]| a.iter().try_fold(1usize, |acc, &x| acc.checked_mul(x));
    let want = |name: &str, got: usize, dims: &[usize]| -> BackendResult<()> {
        match n(dims) {
            Some(w) if w == got => Ok(()),
            Some(w) => Err(BackendError::Input(format!(
                "{name} has {got} elements, the shape needs {w}"
            ))),
            None => Err(shape(format!(
                "{name}: the shape's element count overflows"
            ))),
        }
    };
    want("q", p.q.len(), &[p.batch, p.q_len, p.hq, HEAD_DIM])?;
    want("k", p.k.len(), &[p.batch, p.kv_len, p.hkv, HEAD_DIM])?;
    want("v", p.v.len(), &[p.batch, p.kv_len, p.hkv, HEAD_DIM])?;
    want("ids", p.ids.len(), &[p.batch, p.q_len, p.hkv, p.t])?;
    if !p.scale.is_finite() {
        return Err(BackendError::Input(format!(
            "scale = {} is not finite",
            p.scale
        )));
    }
    Ok(())
}

/// Device allocations freed on drop (also when prepare fails half way).
struct Allocs<'a, A: GpuApi> {
    api: &'a A,
    ptrs: Vec<DevPtr>,
}

impl<'a, A: GpuApi> Allocs<'a, A> {
    fn alloc(&mut self, bytes: usize) -> BackendResult<DevPtr> {
        let p = self.api.alloc(bytes.max(4))?;
        self.ptrs.push(p);
        Ok(p)
    }
    fn upload<T: Copy>(&mut self, data: &[T]) -> BackendResult<DevPtr> {
        let p = self.alloc(std::mem::size_of_val(data))?;
        self.api.upload(p, as_bytes(data))?;
        Ok(p)
    }
}

impl<A: GpuApi> Drop for Allocs<'_, A> {
    fn drop(&mut self) {
        for p in self.ptrs.drain(..) {
            self.api.free(p);
        }
    }
}

struct Bufs {
    q: DevPtr,
    k: DevPtr,
    v: DevPtr,
    ids: DevPtr,
    o: DevPtr,
    lse: DevPtr,
    /// Split partials (o, lse) of the staged forward, when it splits.
    part: Option<(DevPtr, DevPtr)>,
    /// Backward only: d_o, dq, dk, dv.
    grads: Option<[DevPtr; 4]>,
}

struct AttnPrepared<'a, A: GpuApi> {
    api: &'a A,
    p: &'a AttnProblem,
    kernel: AttnKernel,
    plan: Option<StagedPlan>,
    backward: bool,
    bufs: Bufs,
    _allocs: Allocs<'a, A>,
}

fn suffix(d: AttnDtype) -> &'static str {
    d.name()
}

impl<A: GpuApi> AttnPrepared<'_, A> {
    fn common_args(&self) -> Vec<Arg> {
        let b = &self.bufs;
        vec![Arg::Ptr(b.q), Arg::Ptr(b.k), Arg::Ptr(b.v), Arg::Ptr(b.ids)]
    }
    fn dim_args(&self) -> [Arg; 7] {
        let p = self.p;
        [
            Arg::I32(p.batch as i32),
            Arg::I32(p.q_len as i32),
            Arg::I32(p.kv_len as i32),
            Arg::I32(p.hq as i32),
            Arg::I32(p.hkv as i32),
            Arg::I32(p.t as i32),
            Arg::F32(p.scale),
        ]
    }
    fn rows(&self) -> usize {
        self.p.batch * self.p.q_len * self.p.hq
    }
    fn gather_dims(&self) -> LaunchDims {
        let waves = (GATHER_THREADS / self.api.props().warp_size.max(1)) as usize;
        LaunchDims {
            grid: (self.rows().div_ceil(waves) as u32, 1, 1),
            block: (GATHER_THREADS, 1, 1),
            shared_bytes: 0,
        }
    }
    fn plan_args(plan: &StagedPlan) -> [Arg; 3] {
        [
            Arg::I32(plan.hc as i32),
            Arg::I32(plan.qt as i32),
            Arg::I32(plan.nbuf as i32),
        ]
    }

    /// Enqueue the forward (o, lse).
    fn forward(&self) -> BackendResult<()> {
        let sfx = suffix(self.p.dtype);
        let b = &self.bufs;
        match (self.kernel, &self.plan) {
            (AttnKernel::Gather, _) | (_, None) => {
                let mut args = self.common_args();
                args.extend([Arg::Ptr(b.o), Arg::Ptr(b.lse)]);
                args.extend(self.dim_args());
                self.api.launch(
                    Family::Attention,
                    &format!("qsa_attn_gather_fwd_{sfx}"),
                    self.gather_dims(),
                    &args,
                )
            }
            (AttnKernel::Staged, Some(plan)) => {
                let (o, lse) = b.part.unwrap_or((b.o, b.lse));
                let mut args = self.common_args();
                args.extend([Arg::Ptr(o), Arg::Ptr(lse)]);
                args.extend(self.dim_args());
                args.extend(Self::plan_args(plan));
                let dims = LaunchDims {
                    grid: (plan.items as u32, plan.nsplit as u32, 1),
                    block: (STAGED_THREADS, 1, 1),
                    shared_bytes: plan.shared,
                };
                self.api.launch(
                    Family::Attention,
                    &format!("qsa_attn_staged_fwd_{sfx}"),
                    dims,
                    &args,
                )?;
                if let Some((op, lp)) = b.part {
                    let rows = self.rows();
                    let dims = LaunchDims {
                        grid: (rows as u32, 1, 1),
                        block: (HEAD_DIM as u32, 1, 1),
                        shared_bytes: 0,
                    };
                    let args = [
                        Arg::Ptr(op),
                        Arg::Ptr(lp),
                        Arg::Ptr(b.o),
                        Arg::Ptr(b.lse),
                        Arg::I64(rows as i64),
                        Arg::I32(plan.nsplit as i32),
                    ];
                    self.api
                        .launch(Family::Attention, "qsa_attn_combine", dims, &args)?;
                }
                Ok(())
            }
        }
    }

    /// Enqueue the backward (needs o and lse from `forward`): zero dk / dv, then one kernel.
    fn backward_pass(&self) -> BackendResult<()> {
        let sfx = suffix(self.p.dtype);
        let b = &self.bufs;
        let [d_o, dq, dk, dv] = b
            .grads
            .ok_or_else(|| BackendError::Device("backward buffers missing".into()))?;
        self.api.memset_zero(dk)?;
        self.api.memset_zero(dv)?;
        let mut args = self.common_args();
        args.extend([
            Arg::Ptr(b.o),
            Arg::Ptr(b.lse),
            Arg::Ptr(d_o),
            Arg::Ptr(dq),
            Arg::Ptr(dk),
            Arg::Ptr(dv),
        ]);
        args.extend(self.dim_args());
        match (self.kernel, &self.plan) {
            (AttnKernel::Gather, _) | (_, None) => self.api.launch(
                Family::Attention,
                &format!("qsa_attn_gather_bwd_{sfx}"),
                self.gather_dims(),
                &args,
            ),
            (AttnKernel::Staged, Some(plan)) => {
                args.extend(Self::plan_args(plan));
                let dims = LaunchDims {
                    grid: (plan.items as u32, 1, 1),
                    block: (STAGED_THREADS, 1, 1),
                    shared_bytes: plan.shared,
                };
                self.api.launch(
                    Family::Attention,
                    &format!("qsa_attn_staged_bwd_{sfx}"),
                    dims,
                    &args,
                )
            }
        }
    }

    fn enqueue(&self) -> BackendResult<()> {
        if self.backward {
            self.backward_pass()
        } else {
            self.forward()
        }
    }
}

impl<A: GpuApi> Prepared for AttnPrepared<'_, A> {
    fn dispatched(&self) -> String {
        match (self.kernel, &self.plan) {
            (AttnKernel::Staged, Some(plan)) if plan.nsplit > 1 => "staged_split".into(),
            (k, _) => k.name().into(),
        }
    }

    fn run(&mut self) -> BackendResult<()> {
        self.enqueue()?;
        self.api.synchronize()
    }

    fn time(&mut self, reps: usize) -> BackendResult<Vec<f64>> {
        let mut out = Vec::with_capacity(reps);
        for _ in 0..reps {
            let this = &*self;
            out.push(self.api.time(&mut || this.enqueue())?);
        }
        Ok(out)
    }

    fn output(&mut self) -> BackendResult<Output> {
        let rows = self.rows();
        let b = &self.bufs;
        if let Some([_, dq, dk, dv]) = b.grads {
            let mut g = AttnBackward {
                dq: vec![0f32; rows * HEAD_DIM],
                dk: vec![0f32; self.p.k.len()],
                dv: vec![0f32; self.p.v.len()],
            };
            self.api.download(dq, as_bytes_mut(&mut g.dq))?;
            self.api.download(dk, as_bytes_mut(&mut g.dk))?;
            self.api.download(dv, as_bytes_mut(&mut g.dv))?;
            return Ok(Output::AttnBackward(g));
        }
        let mut f = AttnForward {
            o: vec![0f32; rows * HEAD_DIM],
            lse: vec![0f32; rows],
        };
        self.api.download(b.o, as_bytes_mut(&mut f.o))?;
        self.api.download(b.lse, as_bytes_mut(&mut f.lse))?;
        Ok(Output::AttnForward(f))
    }
}

/// Upload `p`'s inputs, choose the kernel with `crate::dispatch`, and return the prepared
/// call. The signature is the contract with `gpu::backend`. For the backward the forward
/// runs once here (its lse and o feed the backward), and `run` / `time` cover the backward
/// alone (the zeroing of dk / dv included).
pub fn prepare<'a, A: GpuApi>(
    api: &'a A,
    caps: &TargetCaps,
    switches: &Switches,
    p: &'a AttnProblem,
    backward: bool,
) -> BackendResult<Box<dyn Prepared + 'a>> {
    validate(p)?;
    // The contract every implementation shares (src/reference/attention.rs): ids outside
    // [-1, blocks) are bad input, named with their position, not silently "no block".
    crate::reference::attention::validate_attn(p, backward)?;
    if backward && p.d_o.len() != p.q.len() {
        return Err(BackendError::Input(format!(
            "d_o has {} elements, the backward needs {} (q's shape)",
            p.d_o.len(),
            p.q.len()
        )));
    }
    let kernel = choose(caps, switches);
    let rows = p.batch * p.q_len * p.hq;
    let plan = match kernel {
        AttnKernel::Gather => None,
        AttnKernel::Staged => {
            let plan = staged_plan(caps, p.batch, p.q_len, p.hq, p.hkv, p.t, false)?;
            if plan.items > MAX_GRID_X || plan.nsplit > MAX_GRID_Y {
                return Err(shape(format!(
                    "staged grid {} x {} exceeds the launch limits",
                    plan.items, plan.nsplit
                )));
            }
            Some(plan)
        }
    };
    let gather_waves = (GATHER_THREADS / api.props().warp_size.max(1)) as usize;
    if rows.div_ceil(gather_waves.max(1)) > MAX_GRID_X {
        return Err(shape(format!(
            "{rows} query rows exceed the gather kernels' grid"
        )));
    }
    let mut allocs = Allocs {
        api,
        ptrs: Vec::new(),
    };
    let q = allocs.upload(&p.q)?;
    let k = allocs.upload(&p.k)?;
    let v = allocs.upload(&p.v)?;
    let ids = allocs.upload(&p.ids)?;
    let o = allocs.alloc(rows * HEAD_DIM * 4)?;
    let lse = allocs.alloc(rows * 4)?;
    let part = match plan {
        Some(pl) if pl.nsplit > 1 => Some((
            allocs.alloc(pl.nsplit * rows * HEAD_DIM * 4)?,
            allocs.alloc(pl.nsplit * rows * 4)?,
        )),
        _ => None,
    };
    let mut prep = AttnPrepared {
        api,
        p,
        kernel,
        plan,
        backward: false,
        bufs: Bufs {
            q,
            k,
            v,
            ids,
            o,
            lse,
            part,
            grads: None,
        },
        _allocs: allocs,
    };
    if backward {
        // The forward runs once for (o, lse); the backward plan (no splits) replaces it.
        prep.forward()?;
        api.synchronize()?;
        if kernel == AttnKernel::Staged {
            prep.plan = Some(staged_plan(caps, p.batch, p.q_len, p.hq, p.hkv, p.t, true)?);
        }
        let allocs = &mut prep._allocs;
        let d_o = allocs.upload(&p.d_o)?;
        let dq = allocs.alloc(rows * HEAD_DIM * 4)?;
        let dk = allocs.alloc(p.k.len() * 4)?;
        let dv = allocs.alloc(p.v.len() * 4)?;
        prep.bufs.grads = Some([d_o, dq, dk, dv]);
        prep.backward = true;
    }
    debug_assert_eq!(ATTN_BLOCK, 64);
    Ok(Box::new(prep))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem() -> AttnProblem {
        let (batch, q_len, kv_len, hq, hkv, t) = (1, 2, 70, 4, 2, 3);
        AttnProblem {
            batch,
            q_len,
            kv_len,
            hq,
            hkv,
            t,
            dtype: AttnDtype::Bf16,
            scale: 0.088,
            q: vec![0; batch * q_len * hq * HEAD_DIM],
            k: vec![0; batch * kv_len * hkv * HEAD_DIM],
            v: vec![0; batch * kv_len * hkv * HEAD_DIM],
            ids: vec![-1; batch * q_len * hkv * t],
            d_o: vec![],
        }
    }

    #[test]
    fn a_valid_problem_passes() {
        validate(&problem()).unwrap();
    }

    #[test]
    fn bad_shapes_and_lengths_are_named() {
        let mut p = problem();
        p.hkv = 3;
        assert!(validate(&p)
            .unwrap_err()
            .to_string()
            .contains("multiple of hkv"));
        let mut p = problem();
        p.q_len = 71;
        assert!(validate(&p)
            .unwrap_err()
            .to_string()
            .contains("q_len = 71 > kv_len"));
        let mut p = problem();
        p.ids.pop();
        assert!(validate(&p).unwrap_err().to_string().contains("ids has"));
        let mut p = problem();
        p.t = 0;
        assert!(validate(&p).unwrap_err().to_string().contains("t = 0"));
        let mut p = problem();
        p.scale = f32::NAN;
        assert!(validate(&p).unwrap_err().to_string().contains("scale"));
    }
}
