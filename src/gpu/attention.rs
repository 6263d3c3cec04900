//! GPU host code for the attention family: validation, dispatch, upload, launches
//! (see gpu/mod.rs and gpu/launch.rs). Launch rules mirror kernels/selection_attention.cu;
//! bench/attention_vs_torch.py takes them from here through `qsa plan`.
//!
//! This file holds the call's shape (`AttnCall`), its validation and `prepare` (upload and
//! run); `plan` turns a validated shape into buffers and launches (`launch_plan`).

use super::launch::PlannedCall;
use super::{as_bytes, GpuApi};
use crate::backend::{BackendError, BackendResult, Prepared};
use crate::dispatch::{Switches, TargetCaps};
use crate::problem::{
    AttnBackward, AttnDtype, AttnForward, AttnProblem, GradDtype, KvLayout, Output, ATTN_BLOCK,
    HEAD_DIM,
};

/// Largest grid.x / grid.y of a launch.
const MAX_GRID_X: usize = i32::MAX as usize;
const MAX_GRID_Y: usize = 65_535;

mod plan;

pub use plan::launch_plan;

fn shape(msg: String) -> BackendError {
    BackendError::Shape(msg)
}

/// The shape of one selection-attention call: all a plan needs (no data).
#[derive(Clone, Copy, Debug)]
pub struct AttnCall {
    pub batch: usize,
    pub q_len: usize,
    pub kv_len: usize,
    pub hq: usize,
    pub hkv: usize,
    pub t: usize,
    pub dtype: AttnDtype,
    pub scale: f32,
    pub kv_layout: KvLayout,
    pub do_dtype: GradDtype,
}

impl AttnCall {
    pub fn of(p: &AttnProblem) -> Self {
        AttnCall {
            batch: p.batch,
            q_len: p.q_len,
            kv_len: p.kv_len,
            hq: p.hq,
            hkv: p.hkv,
            t: p.t,
            dtype: p.dtype,
            scale: p.scale,
            kv_layout: p.kv_layout,
            do_dtype: p.do_dtype,
        }
    }
}

/// Check a shape against the kernels' contract and limits; every failure names the field.
pub fn validate_shape(p: &AttnCall) -> BackendResult<()> {
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
    if !p.scale.is_finite() {
        return Err(BackendError::Input(format!(
            "scale = {} is not finite",
            p.scale
        )));
    }
    for (name, dims) in [
        ("q", [p.batch, p.q_len, p.hq, HEAD_DIM * 4]),
        ("k", [p.batch, p.kv_len, p.hkv, HEAD_DIM * 4]),
        ("ids", [p.batch, p.q_len, p.hkv, p.t * 4]),
    ] {
        if count(&dims).is_none() {
            return Err(shape(format!("{name}: the shape's byte count overflows")));
        }
    }
    Ok(())
}

fn count(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &x| acc.checked_mul(x))
}

/// Check `p` (shape and data lengths) against the kernels' contract; every failure names
/// the field.
pub fn validate(p: &AttnProblem) -> BackendResult<()> {
    validate_shape(&AttnCall::of(p))?;
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
    // Either layout holds batch x kv_len x hkv x D elements.
    want("k", p.k.len(), &[p.batch, p.kv_len, p.hkv, HEAD_DIM])?;
    want("v", p.v.len(), &[p.batch, p.kv_len, p.hkv, HEAD_DIM])?;
    want("ids", p.ids.len(), &[p.batch, p.q_len, p.hkv, p.t])
}

/// Check `p`, plan the call, upload the inputs (and run the backward's forward once), and
/// return the prepared call. The signature is the contract with `gpu::backend`.
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
    let plan = launch_plan(caps, api.props(), switches, &AttnCall::of(p), backward)?;
    // dO as the kernels read it: bf16 bits where do_dtype says so (exact: validate_attn
    // refused any value that is not a bf16).
    let d_o16: Vec<u16> = match p.do_dtype {
        GradDtype::Bf16 => p
            .d_o
            .iter()
            .map(|&x| half::bf16::from_f32(x).to_bits())
            .collect(),
        GradDtype::F32 => Vec::new(),
    };
    let d_o = match p.do_dtype {
        GradDtype::Bf16 => as_bytes(&d_o16),
        GradDtype::F32 => as_bytes(&p.d_o),
    };
    let inputs = [
        ("q", as_bytes(&p.q)),
        ("k", as_bytes(&p.k)),
        ("v", as_bytes(&p.v)),
        ("ids", as_bytes(&p.ids)),
        ("d_o", d_o),
    ];
    let output = if backward {
        |c: &PlannedCall<'a, A>| {
            Ok(Output::AttnBackward(AttnBackward {
                dq: c.download::<f32>("dq")?,
                dk: c.download::<f32>("dk")?,
                dv: c.download::<f32>("dv")?,
            }))
        }
    } else {
        |c: &PlannedCall<'a, A>| {
            Ok(Output::AttnForward(AttnForward {
                o: c.download::<f32>("o")?,
                lse: c.download::<f32>("lse")?,
            }))
        }
    };
    debug_assert_eq!(ATTN_BLOCK, 64);
    Ok(Box::new(PlannedCall::new(api, plan, &inputs, output)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem() -> AttnProblem {
        // The forward's problem: no upstream gradient.
        AttnProblem {
            d_o: vec![],
            ..AttnProblem::zeroed(1, 2, 70, 4, 2, 3)
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
