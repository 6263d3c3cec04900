//! Dispatch: which kernel variant runs for a problem on a target.
//!
//! A pure function of the target's capabilities (from matrix.yaml), the switches in force
//! (the engine's STRATA_* environment variables, set per variant in matrix.yaml) and the
//! shape. Because it is pure, the dispatch snapshot of every target, AMD included, is
//! computed on any machine, and the GPU host code calls the very same functions.

pub mod attention;
pub mod attention_decode;
pub mod attention_decode_copy;
pub mod attention_decode_dims;
pub mod attention_do;
pub mod attention_kv;
pub mod attention_kv_qchunk;
pub mod attention_ring;
pub mod attention_warp;
pub mod scores;
pub mod topk;

use std::collections::BTreeMap;

/// Vendor of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Amd,
    Cpu,
}

/// Hardware features that change dispatch.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// TF32 tensor cores (NVIDIA sm_80+).
    Tf32Tc,
    /// BF16 tensor cores (NVIDIA sm_80+).
    Bf16Tc,
    /// AMD RDNA WMMA (gfx11 / gfx12).
    Wmma,
    /// AMD CDNA matrix cores (gfx908+).
    Mfma,
    /// Thread-block clusters with distributed shared memory (NVIDIA sm_90+).
    Clusters,
    /// Hopper warpgroup MMA (`wgmma`, sm_90a): the target's code object is built for the
    /// arch-specific sm_90a (xtask's nvidia_flags) and holds the wgmma scorers.
    Wgmma,
}

/// What dispatch needs to know about a target.
#[derive(Clone, Debug)]
pub struct TargetCaps {
    pub name: String,
    pub vendor: Vendor,
    /// Wave / warp width (32 or 64); 1 on the CPU.
    pub wave: u32,
    /// Shared memory / LDS one block may use, bytes.
    pub shared_per_block: u32,
    /// SMs / CUs.
    pub multiprocessors: u32,
    pub features: Vec<Feature>,
}

impl TargetCaps {
    pub fn has(&self, f: Feature) -> bool {
        self.features.contains(&f)
    }
    /// gfx906 gets the engine's gfx906-only switches (STRATA_GFX906_TOPK_SPLIT).
    pub fn is_gfx906(&self) -> bool {
        self.name == "gfx906"
    }
}

/// The engine's environment switches (and qsa's own forcing switches), as one variant sets
/// them. Unset switches take the engine's defaults.
#[derive(Clone, Debug, Default)]
pub struct Switches {
    vars: BTreeMap<String, String>,
}

/// Every switch dispatch reads, with what it does: matrix.yaml's variants may set only these.
pub const KNOWN_SWITCHES: &[(&str, &str)] = &[
    (
        "STRATA_QSA_WARP",
        "1: no tensor-core scorer (the SIMT or warp kernel runs)",
    ),
    (
        "STRATA_SELECT_SIMT",
        "0: no FP32 tiled SIMT scorer (the warp kernel runs where tensor cores are off)",
    ),
    (
        "STRATA_SELECT_OLD",
        "1: the old scorer (warp kernel), as STRATA_SELECT_SIMT=0",
    ),
    ("STRATA_BF16_TC", "1: BF16 tensor-core scorer (opt-in)"),
    (
        "STRATA_GFX906_TOPK_SPLIT",
        "1: two-stage split top-k for decode on gfx906",
    ),
    (
        "QSA_BENCH_TOPK_DECODE",
        "1: call the top-k without active counts, as a decode window does",
    ),
    (
        "QSA_TOPK_KERNEL",
        "register | wide | split | cluster: force one top-k kernel (qsa's switch, for tests)",
    ),
    (
        "QSA_TOPK_REGISTER_FEW",
        "0 | 1 (default): the register top-k tries the small-k bound (k <= 32: the k-th largest of 32 units' maxima, direct ranking) before its radix select (qsa's sweep switch)",
    ),
    (
        "QSA_TOPK_SPEC_CHUNK",
        "2048 | 4096 | 8192 | 16384: entries per chunk CTA of the speculative top-k (unset: 4096 while its CTAs take at most one per SM, else 8192) (qsa's sweep switch)",
    ),
    (
        "QSA_TOPK_SPEC_FINAL",
        "byte | window (default) | window_lean: the speculative top-k's final radix in byte digits or in windows from the candidates' first differing bit (window_lean: their histograms by plain atomic adds; chunks of 4096 / 8192, not lean; not measured yet) (qsa's sweep switch)",
    ),
    (
        "QSA_TOPK_SPEC_BOUND",
        "radix | window (default) | tmax: the speculative top-k's chunk bound by two radix digits, one pass over the octave of the chunk's largest key, or from the threads' maxima (tmax: chunks of 4096 / 8192, not lean; not measured yet) (qsa's sweep switch)",
    ),
    (
        "QSA_TOPK_SPEC_KEEP",
        "general | lean (default where it exists) | float: the speculative top-k's chunk step in its general form, the lean entry point (one compare per key to keep the entries >= bound), or the lean step on the scores themselves (float: the threads' maxima bound, float compares; chunks of 4096 / 8192; not measured yet) (lean: chunks of 2048 / 4096 / 8192; with QSA_TOPK_SPEC_FENCE=one, QSA_TOPK_SPEC_FINAL=window_lean or QSA_TOPK_SPEC_THREADS=1024 it needs QSA_TOPK_SPEC_BOUND=tmax) (qsa's sweep switch)",
    ),
    (
        "QSA_TOPK_SPEC_FENCE",
        "all (default) | one: every thread of the speculative top-k's chunk CTA fences around the query's ticket, or thread 0 alone between block barriers (chunks of 4096 / 8192, not lean; not measured yet) (qsa's sweep switch)",
    ),
    (
        "QSA_TOPK_SPEC_THREADS",
        "512 (default) | 1024: threads per CTA of the speculative top-k (1024: chunks of 8192, qsa_topk_spec_t1024; not measured yet) (qsa's sweep switch)",
    ),
    (
        "QSA_TOPK_SPEC_LOAD",
        "scalar | vec4 (default): the speculative top-k's chunk loads (qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_KERNEL",
        "warp | simt | tf32 | bf16 | tf32_mma | bf16_mma: force one scorer where the target has it, SIMT even below 8 queries; *_mma: mma.sync where sm_90a's wgmma kernel would run (qsa's switch, for benches)",
    ),
    (
        "QSA_SCORES_TILE",
        "wide | decode: force the tensor-core scorers' CTA tile (qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_WG_UPC",
        "1 | 2 | 4 | 8 | 16: the sm_90a wgmma scorers' work per CTA (qsa's sweep switch): groups of 4 queries per warpgroup of the rs* kernels (default: one wave), 64-row units per CTA of the ss kernel (default: the measured rule)",
    ),
    (
        "QSA_SCORES_WG",
        "ss | rs128 | rs128p | rs256 | rs256p | rs128s | rs128ps | rs256s | rs256ps | rs256o | rs256po: sm_90a's prefill wgmma scorer: A through shared memory (ss, session 6's) or A in registers (rs*, BN blocks per CTA; p: next A prefetched, s: swizzled B, o: ping-pong); default rs256o (TF32), rs256ps (BF16) (qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_SIMT_DC",
        "8 | 16: the SIMT scorer's d per shared-memory stage (qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_DECODE_STAGES",
        "2 ..= 6: cp.async ring depth of the mma.sync decode scorers (qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_DECODE_WARPS",
        "4 | 8: warps per CTA of the mma.sync decode scorers, 32 blocks each (qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_DECODE_CTAS_PER_SM",
        "1 ..= 4: persistent decode-scorer CTAs per multiprocessor (qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_DECODE_ENGINE",
        "mma | wgmma: the decode scorers' engine; wgmma (sm_90a only, else mma) streams Kb tiles as register A operands (qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_DECODE_WG_RING",
        "regs | 2 ..= 6: the wgmma decode scorer's A staging; N tiles per warpgroup in a cp.async ring in shared memory (_decode_wgc; qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_DECODE_WG_TMA",
        "off | 2 ..= 6: the wgmma decode scorer fed by a TMA producer warp through an N-slot mbarrier ring (_decode_tma, _decode_tma2 with 2 warpgroups; qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_DECODE_WG_GROUPS",
        "1 | 2: warpgroups per CTA of the wgmma decode scorer; 2 share Q and need a ring or TMA (_decode_wgc2, _decode_tma2; qsa's sweep switch)",
    ),
    (
        "QSA_SCORES_DECODE_GRID",
        "full | even: the decode scorers' persistent grid; even takes the fewest CTAs that keep the most tiles per CTA (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_KERNEL",
        "gather | staged | decode: force one selection-attention kernel (qsa's switch; decode where built, sm_80+ NVIDIA, else staged)",
    ),
    (
        "QSA_ATTN_DEC_WARPS",
        "1-8: warps per CTA of the decode attention kernel (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_STAGES",
        "1-4: cp.async ring stages per warp of the decode attention kernel (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_PAIR",
        "0 | 1: the decode attention kernel takes two 16-key units per softmax step (bf16; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_SPLITS",
        "N >= 1: CTAs per work item of the decode attention kernel (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_MERGE",
        "kernel | launch | cluster | push: the decode attention splits merged by the last CTA, by qsa_attn_combine, or through an sm_90 cluster's shared memory (pulled by remote loads, or pushed by remote stores before one barrier) (qsa's switch)",
    ),
    (
        "QSA_ATTN_DEC_PROBE",
        "launch | no_kv | no_math | list | loop: a timing ablation of the decode attention kernel (the launch alone, no K/V copies, no math, stop once the unit list is built, stop before the merges); its output is NOT the attention (qsa's bench switch)",
    ),
    (
        "QSA_ATTN_DEC_PREFETCH",
        "none | 256: the decode attention kernel's K/V copies ask L2 for whole 256-byte rows (cp.async .L2::256B; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_ORDER",
        "contiguous | interleave | dynamic: the decode attention kernel deals each warp a run of its CTA's units, every warps-th unit, or (dynamic) the next unclaimed one from a CTA counter as a ring stage frees (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_AHEAD",
        "0-7: units of K/V the decode attention kernel prefetches into L2 beyond its cp.async ring (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_QLOAD",
        "warp | cta: the decode attention kernel's q fragments loaded by each warp from global memory, or staged once per CTA in shared memory after its ids' load and read by ldmatrix after the first K/V copies (the _qs_ kernels; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_COPY",
        "cp_async | bulk: the decode attention kernel's K/V rows by each lane's 16-byte cp.async, or by one cp.async.bulk (TMA) per 256-byte row completing on an mbarrier per warp stage (the _bk_ kernels, sm_90a only; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_DEC_DIMS",
        "whole | half: each decode attention warp forms all of O's head dimension from its own units, or warps 2p and 2p + 1 stream the same units and each forms half of O's dims (the _hd_ kernels; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_NBUF",
        "1 | 2: staged K/V buffers of the staged attention kernel (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_SPLITS",
        "N >= 1: CTAs per work item of the staged forward (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_FWD",
        "staged | ring | warp: the staged forward's kernel where lists are not split: warp (one warp per token and kv head, sm_80+ CUDA, t <= 32) is sm_90's default, ring (cp.async ring, sm_80+ CUDA) the other sm_80+ targets' (qsa's switch)",
    ),
    (
        "QSA_ATTN_WARP_WARPS",
        "1 .. 8: warps per CTA of the warp forward (QSA_ATTN_FWD=warp; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_WARP_KEYS",
        "64 | 32: keys per K / V piece of the warp forward (32: qsa_attn_warp_h_fwd_*, twice the pieces in flight in the same shared memory; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_WARP_STAGES",
        "2 .. 6: K / V slots per warp of the warp forward (qsa's sweep switch; 2 for 64-key pieces, 4 for 32)",
    ),
    (
        "QSA_ATTN_WARP_PARTS",
        "2 | 3: bf16 P's 16-bit parts in the warp forward's P.V (qsa's sweep switch; 3 by default)",
    ),
    (
        "QSA_ATTN_WARP_RESCALE",
        "exact | lazy: the warp forward moves its running max on every increase, or only past a slack (as QSA_ATTN_RING_RESCALE; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_STAGES",
        "2 .. 7: slots of the ring forward (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_RING_PARTS",
        "2 | 3: bf16 P's 16-bit parts in the ring forward's P.V (qsa's sweep switch; 3 by default)",
    ),
    (
        "QSA_ATTN_RING_SLOT",
        "block | half: a ring slot holds a block's K and V rows, or its K or its V rows (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_RING_ORDER",
        "token | head: the ring forward's CTA order, the kv heads of a token side by side or one (batch, kv head)'s tokens first (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_RING_RESCALE",
        "exact | lazy: the ring forward moves its running max on every increase, or only past a slack (bf16 8, f16 1 in log2 units) and then rescales O (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_RING_LAYOUT",
        "pad | swizzle: the ring forward's slot rows, 272-byte padded or 256-byte with XOR-swizzled 16-byte chunks (qsa_attn_ring_sw_fwd_*; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_RING_COPY",
        "cta | warp: the ring forward's CTA copies every K / V row with a barrier per slot, or each warp its own 16 keys' rows with a __syncwarp (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_RING_Q",
        "reg | shared: the ring forward keeps q's fragments in registers or reads them from shared memory (qsa_attn_ring_qs_fwd_*, four CTAs per SM; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_KV_MMA",
        "tf32 | bf16 | bf16s | wg | wgp | wg2 | wg2a: the KV-block-major backward's dK / dV / dQ products as 3xTF32 m16n8k8 or bf16 m16n8k16 with f32 operands in bf16 hi + lo (qsa_attn_kv16_*), bf16s with each tile's dO split once in shared memory (qsa_attn_kv16s_*), wg on sm_90a wgmma with 64-row tiles (qsa_attn_kvwg_dq_bwd_bf16, fused only; a dispatch error without wgmma), wgp the same with the next tile's rows copied during this one (qsa_attn_kvwgp_dq_bwd_bf16), wg2 with two warpgroups per block taking alternate tiles (qsa_attn_kvwg2_dq_bwd_bf16), wg2a the same with dO landing chunk-major for a conflict-free split (qsa_attn_kvwg2a_dq_bwd_bf16; with QSA_ATTN_KV_DP_PARTS=3 dO in three parts for dP, qsa_attn_kvwg2a3_dq_bwd_bf16); bf16 inputs only, f16 keeps tf32 (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_KV_QCHUNK",
        "off | <tokens>: the wgmma backward's query ranges: one CTA per (batch, KV head, range of this many tokens, KV block), so that the CTAs resident together add dQ into the same rows, held in L2 (dK / dV then summed over ranges with atomics into zero-filled buffers); off: one CTA per block over every query (qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_KV_DP_PARTS",
        "2 | 3: dO's bf16 parts in the KV-block-major backward's dP = dO V^T (with QSA_ATTN_KV_MMA=bf16, or the fused split kernel: bf16s / the default path, qsa_attn_kv16sp2_dq_bwd_bf16; qsa's sweep switch; 3 by default)",
    ),
    (
        "QSA_ATTN_KV_PS_PARTS",
        "1 | 2: P and dS's bf16 parts in the fused split KV-block-major backward's dK / dV / dQ (qsa_attn_kv16sp1_dq_bwd_bf16: one part, fla's precision, a measurement form that fails the 5e-5 gate in emulation; qsa's sweep switch; 2 by default)",
    ),
    (
        "QSA_ATTN_KV_LAYOUT",
        "base | nc: the fused split KV-block-major backward's shared layout; nc stores P / dP rows at 76 floats and splits dO by contiguous quarter warps, without bank conflicts (qsa_attn_kv16sc_dq_bwd_bf16, same arithmetic as the default; not with QSA_ATTN_KV_PS_PARTS=1: that combination spilled; qsa's sweep switch)",
    ),
    (
        "QSA_ATTN_BWD",
        "atomic | kv: the staged backward's dK / dV by float atomics or by the KV-block-major kernel (qsa's switch)",
    ),
];

/// How to build one: `Switches::default()` (nothing set: every default), `Switches::from_pairs`
/// (tests, tools), `sw.with(pairs)` (some set over others), `Switches::new` (a parsed map:
/// matrix.yaml's variants, `qsa plan --switch`).
impl Switches {
    pub fn new(vars: BTreeMap<String, String>) -> Self {
        Switches { vars }
    }
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }
    /// A switch is on when set to "1".
    pub fn on(&self, key: &str) -> bool {
        self.get(key) == Some("1")
    }
    /// A switch is explicitly off when set to "0".
    pub fn off(&self, key: &str) -> bool {
        self.get(key) == Some("0")
    }
    pub fn vars(&self) -> &BTreeMap<String, String> {
        &self.vars
    }
    /// A two-valued switch: unset gives `default`, `off` false, `on` true; anything else is
    /// refused naming the switch and both values.
    pub fn either(
        &self,
        key: &str,
        default: bool,
        off: &str,
        on: &str,
    ) -> Result<bool, crate::backend::BackendError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) if v == off => Ok(false),
            Some(v) if v == on => Ok(true),
            Some(v) => Err(crate::backend::BackendError::Input(format!(
                "{key}={}: expected {off} or {on}",
                crate::echo::value(v)
            ))),
        }
    }
    /// Switches from (name, value) pairs (tests and tools); a later pair wins.
    pub fn from_pairs(kv: &[(&str, &str)]) -> Self {
        Switches::default().with(kv)
    }
    /// These switches with the pairs set over them (a pair wins over a value set here).
    pub fn with(&self, kv: &[(&str, &str)]) -> Self {
        let mut vars = self.vars.clone();
        for (k, v) in kv {
            vars.insert(k.to_string(), v.to_string());
        }
        Switches { vars }
    }
}
