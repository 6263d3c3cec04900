//! Concrete problems: the shapes and input bytes one kernel call works on.
//!
//! A `Problem` is what a case of matrix.yaml becomes once its inputs are generated (or read
//! from .npy files). Every backend (CPU, CUDA, HIP) and every FP64 reference takes these
//! types, so the same bytes reach every implementation.

/// Head dimension of the indexer and of selection attention: fixed by the kernels.
pub const HEAD_DIM: usize = 128;
/// Tokens per KV block in selection attention.
pub const ATTN_BLOCK: usize = 64;

/// Per query, the `k` largest of the first `n` scores of a row (row stride `capacity`).
///
/// Selection order is the contract of `crate::contract`: key = monotone u32 of the score
/// (-0.0 as +0.0, NaN below -inf), larger key first, ties by lower index. Output per query:
/// `k` ids ascending, cells past the selected count hold -1.
#[derive(Clone, Debug)]
pub struct TopkProblem {
    pub nq: usize,
    /// Entries per query that exist (the context length, in blocks).
    pub n: usize,
    /// Row stride of `scores`: the engine's buffer capacity. `n <= capacity` always.
    pub capacity: usize,
    pub k: usize,
    /// `nq * capacity` scores; entries past `n` in a row are padding and never read.
    pub scores: Vec<f32>,
    /// Prefill (causal): only the first `active[q]` entries of row q are candidates
    /// (0 ..= n). `None` is the decode form: every row has `n` candidates.
    pub active: Option<Vec<i32>>,
}

impl TopkProblem {
    /// Candidates of query `q`.
    pub fn candidates(&self, q: usize) -> usize {
        match &self.active {
            Some(a) => (a[q].max(0) as usize).min(self.n),
            None => self.n,
        }
    }
    pub fn row(&self, q: usize) -> &[f32] {
        &self.scores[q * self.capacity..q * self.capacity + self.n]
    }
}

/// Indexer block scores: `S[q,b] = sum_h w[q,h] * relu(Q[q,h,:] . Kb[b,:])`, head dim 128.
#[derive(Clone, Debug)]
pub struct ScoresProblem {
    pub nq: usize,
    pub heads: usize,
    pub blocks: usize,
    /// `[nq, heads, HEAD_DIM]`
    pub q: Vec<f32>,
    /// `[blocks, HEAD_DIM]`
    pub kb: Vec<f32>,
    /// `[nq, heads]`
    pub w: Vec<f32>,
}

/// Element type of selection attention inputs (accumulation is always f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttnDtype {
    Bf16,
    F16,
}

impl AttnDtype {
    pub fn to_f32(self, bits: u16) -> f32 {
        match self {
            AttnDtype::Bf16 => half::bf16::from_bits(bits).to_f32(),
            AttnDtype::F16 => half::f16::from_bits(bits).to_f32(),
        }
    }
    pub fn from_f32(self, x: f32) -> u16 {
        match self {
            AttnDtype::Bf16 => half::bf16::from_f32(x).to_bits(),
            AttnDtype::F16 => half::f16::from_f32(x).to_bits(),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            AttnDtype::Bf16 => "bf16",
            AttnDtype::F16 => "f16",
        }
    }
}

/// Where a K / V element `(b, key j, kv head g, dim d)` lies. `Nhd` is fla's layout,
/// `[batch, kv_len, hkv, D]` (consecutive keys of one head 2 KiB apart at 8 KV heads);
/// `Hnd` is FlashInfer's and vLLM's head-major cache layout, `[batch, hkv, kv_len, D]` (a
/// 64-key block of one head is 16 KiB contiguous). Only the decode forward reads `Hnd` on the
/// GPU; every other path refuses it before any work (src/gpu/attention/plan.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvLayout {
    #[default]
    Nhd,
    Hnd,
}

impl KvLayout {
    pub fn name(self) -> &'static str {
        match self {
            KvLayout::Nhd => "nhd",
            KvLayout::Hnd => "hnd",
        }
    }
    /// The layout's shape of k / v, for error messages.
    pub fn shape(self, batch: usize, kv_len: usize, hkv: usize) -> String {
        match self {
            KvLayout::Nhd => format!("[batch {batch}, kv_len {kv_len}, hkv {hkv}, {HEAD_DIM}]"),
            KvLayout::Hnd => format!("[batch {batch}, hkv {hkv}, kv_len {kv_len}, {HEAD_DIM}]"),
        }
    }
}

/// The dtype the upstream gradient dO arrives in: `f32` (the default) or `bf16`, what a bf16
/// model's autograd hands the backward (fla's `parallel_nsa` takes it so). With `bf16`,
/// `AttnProblem::d_o` holds bf16 values (as f32, exactly) and the GPU reads bf16 bits: the
/// fused wgmma backward natively (`kvwg2ab`: dO exact in one bf16 part, where f32 dO needs
/// three), every other path through a widening step (src/dispatch/attention_do.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GradDtype {
    #[default]
    F32,
    Bf16,
}

impl GradDtype {
    pub fn name(self) -> &'static str {
        match self {
            GradDtype::F32 => "f32",
            GradDtype::Bf16 => "bf16",
        }
    }
    /// Bytes of one element.
    pub fn bytes(self) -> usize {
        match self {
            GradDtype::F32 => 4,
            GradDtype::Bf16 => 2,
        }
    }
}

/// NSA selection attention. Query token i of batch b sits at position
/// `kv_len - q_len + i` (causal: keys past that position are masked). Each (token, KV head)
/// selects `t` blocks of `ATTN_BLOCK` tokens by id (ids may repeat; -1 means "no block");
/// the `hq / hkv` query heads of a GQA group share the selection.
#[derive(Clone, Debug)]
pub struct AttnProblem {
    pub batch: usize,
    pub q_len: usize,
    pub kv_len: usize,
    pub hq: usize,
    pub hkv: usize,
    pub t: usize,
    pub dtype: AttnDtype,
    /// Softmax scale (1/sqrt(128) unless a case says otherwise).
    pub scale: f32,
    /// `[batch, q_len, hq, HEAD_DIM]` element bits
    pub q: Vec<u16>,
    /// `[batch, kv_len, hkv, HEAD_DIM]` (`Nhd`) or `[batch, hkv, kv_len, HEAD_DIM]` (`Hnd`)
    pub k: Vec<u16>,
    /// Same layout as `k`.
    pub v: Vec<u16>,
    pub kv_layout: KvLayout,
    /// `[batch, q_len, hkv, t]`
    pub ids: Vec<i32>,
    /// Upstream gradient `[batch, q_len, hq, HEAD_DIM]`, for the backward pass: f32 values,
    /// each a bf16 where `do_dtype` is `Bf16` (checked before any work).
    pub d_o: Vec<f32>,
    pub do_dtype: GradDtype,
}

impl AttnProblem {
    pub fn group(&self) -> usize {
        self.hq / self.hkv
    }
    /// Position of query token `i` in its sequence.
    pub fn q_pos(&self, i: usize) -> usize {
        self.kv_len - self.q_len + i
    }
    /// A test's problem of this shape: zero tensors (bf16 bits), no block selected (ids
    /// -1), a zero upstream gradient, scale 0.088, token-major K / V. Launch-plan and
    /// validation tests need the shape only; a test changes the field it is about
    /// (`AttnProblem { ids: ..., ..AttnProblem::zeroed(...) }`).
    #[cfg(test)]
    pub(crate) fn zeroed(
        batch: usize,
        q_len: usize,
        kv_len: usize,
        hq: usize,
        hkv: usize,
        t: usize,
    ) -> Self {
        use crate::problem::HEAD_DIM;
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
            kv_layout: KvLayout::Nhd,
            ids: vec![-1; batch * q_len * hkv * t],
            d_o: vec![0.0; batch * q_len * hq * HEAD_DIM],
            do_dtype: GradDtype::F32,
        }
    }
}

/// Selection attention forward result: `o [batch, q_len, hq, D]`, `lse [batch, q_len, hq]`
/// (natural log; -inf where a query saw no key).
#[derive(Clone, Debug, Default)]
pub struct AttnForward {
    pub o: Vec<f32>,
    pub lse: Vec<f32>,
}

/// Selection attention gradients (f32, shapes of q, k, v).
#[derive(Clone, Debug, Default)]
pub struct AttnBackward {
    pub dq: Vec<f32>,
    pub dk: Vec<f32>,
    pub dv: Vec<f32>,
}

/// One kernel call's problem.
#[derive(Clone, Debug)]
pub enum Problem {
    Topk(TopkProblem),
    Scores(ScoresProblem),
    AttnForward(AttnProblem),
    AttnBackward(AttnProblem),
}

/// What a backend returns for a `Problem`.
#[derive(Clone, Debug)]
pub enum Output {
    /// `nq * k` ids, per query ascending, -1 past the count.
    Ids(Vec<i32>),
    /// `nq * blocks` scores.
    Scores(Vec<f32>),
    AttnForward(AttnForward),
    AttnBackward(AttnBackward),
}
