//! Seeded, counter-based input generation: the value at index i of tensor `name` of case
//! `case` under distribution `dist` is a pure function of (seed, case, dist, name, i), so
//! every machine produces the same bytes, in any order, on any number of threads.

use crate::dispatch::topk::{CLUSTER_CTAS, SPLIT_CHUNK};
use crate::problem::{AttnDtype, GradDtype, KvLayout, ATTN_BLOCK, HEAD_DIM};

/// Top-k score distributions.
pub const TOPK_DISTS: &[&str] = &[
    "uniform",      // U(-1, 1): distinct almost everywhere
    "ties",         // 16 levels: heavy ties everywhere
    "all_equal",    // one value: selection by index alone
    "signed_zeros", // +0.0 and -0.0 (equal under the contract) among a few positives/negatives
    "nan_inf",      // uniform with NaN, +inf and -inf sprinkled in (NaN below -inf)
    "ascending",    // strictly increasing with the index
    "descending",   // strictly decreasing with the index
    "adversarial",  // many entries equal to the k-th largest value, straddling radix digits
    "chunk_edges",  // winners in the split's partial last chunk; ties cut at a chunk edge
    "part_edges",   // the same at the edges of the cluster kernel's parts (n / 8 each)
    "zero_cut",     // ~k/2 positives, then +0.0/-0.0 of random sign: the cut among zeros
    "nan_cut",      // ~k/2 numbers (+-inf, -0.0), then NaNs of any sign/payload: cut among NaNs
];
/// Block-score input distributions.
pub const SCORES_DISTS: &[&str] = &[
    "normal",      // N(0,1)-like q, kb, w
    "relu_sparse", // most dots negative: relu zeroes most heads
    "dup_blocks",  // Kb rows repeated: equal scores that only the index can order
];
/// Selection-attention id distributions (q, k, v are N(0,1)-like in every one).
pub const ATTN_DISTS: &[&str] = &[
    "random_ids",  // distinct causal-visible blocks
    "repeat_ids",  // ids repeated within a list (each counts once)
    "invalid_ids", // -1 sprinkled in (no block), some lists all -1
    "causal_edge", // the query's own (partial) block and blocks past it
];

/// A counter-based stream: `at(i)` is a function of (key, i) only.
#[derive(Clone, Copy, Debug)]
pub struct Stream {
    key: u64,
}

/// SplitMix64's finalizer: a bijective 64-bit mix with full avalanche.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a over the labels, so different tensors get independent streams.
fn label_hash(parts: &[&str]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

impl Stream {
    pub fn new(seed: u64, labels: &[&str]) -> Stream {
        Stream {
            key: mix(seed ^ mix(label_hash(labels))),
        }
    }
    /// 64 random bits for counter `i`.
    pub fn bits(&self, i: u64) -> u64 {
        mix(self.key.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
    }
    /// Uniform in [0, 1) with 53 bits.
    pub fn unit(&self, i: u64) -> f64 {
        (self.bits(i) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform in [-1, 1).
    pub fn sym(&self, i: u64) -> f64 {
        2.0 * self.unit(i) - 1.0
    }
    /// Uniform integer in [0, m).
    pub fn below(&self, i: u64, m: u64) -> u64 {
        ((self.bits(i) as u128 * m as u128) >> 64) as u64
    }
    /// Approximately N(0,1): sum of four uniforms, scaled (cheap, bounded, deterministic).
    pub fn normal(&self, i: u64) -> f64 {
        let s: f64 = (0..4).map(|j| self.unit(i * 4 + j)).sum();
        (s - 2.0) * (3.0f64).sqrt()
    }
}

/// Top-k scores `[nq, capacity]` (padding past `n` is NaN: a kernel that reads it breaks).
pub fn topk_scores(
    seed: u64,
    case: &str,
    dist: &str,
    nq: usize,
    n: usize,
    capacity: usize,
    k: usize,
) -> Result<Vec<f32>, String> {
    let s = Stream::new(seed, &[case, dist, "scores"]);
    let mut out = vec![f32::NAN; nq * capacity];
    for q in 0..nq {
        for i in 0..n {
            let c = (q * capacity + i) as u64;
            out[q * capacity + i] = topk_value(&s, dist, c, i, n, k)?;
        }
    }
    Ok(out)
}

fn topk_value(s: &Stream, dist: &str, c: u64, i: usize, n: usize, k: usize) -> Result<f32, String> {
    Ok(match dist {
        "uniform" => s.sym(c) as f32,
        "ties" => s.below(c, 16) as f32 * 0.25 - 2.0,
        "all_equal" => 0.5,
        "signed_zeros" => match s.below(c, 8) {
            0 => 1.0 + s.unit(c ^ 1) as f32,
            1 => -1.0 - s.unit(c ^ 1) as f32,
            2..=4 => 0.0,
            _ => -0.0,
        },
        "nan_inf" => match s.below(c, 32) {
            0 => f32::NAN,
            1 => -f32::NAN,
            2 => f32::INFINITY,
            3 => f32::NEG_INFINITY,
            _ => s.sym(c ^ 7) as f32,
        },
        "ascending" => i as f32 / n as f32,
        "descending" => 1.0 - i as f32 / n as f32,
        "adversarial" => {
            // A third of the entries equal the value that the k-th largest will take, the
            // rest spread just above and below it with the same high radix digits.
            let pivot = 1.0f32 + (k % 7) as f32 * 0.125;
            match s.below(c, 3) {
                0 => pivot,
                1 => f32::from_bits(pivot.to_bits() + 1 + s.below(c ^ 3, 255) as u32),
                _ => f32::from_bits(pivot.to_bits() - 1 - s.below(c ^ 3, 255) as u32),
            }
        }
        "chunk_edges" => chunk_edges(s, c, i, n, k),
        "part_edges" => part_edges(s, c, i, n, k),
        "zero_cut" => {
            if s.below(c, n as u64) < (k / 2) as u64 {
                0.5 + s.unit(c ^ 5) as f32
            } else if s.below(c ^ 9, 2) == 0 {
                0.0
            } else {
                -0.0
            }
        }
        "nan_cut" => {
            if s.below(c, n as u64) < (k / 2) as u64 {
                match s.below(c ^ 5, 6) {
                    0 => f32::INFINITY,
                    1 => f32::NEG_INFINITY,
                    2 => -0.0,
                    _ => s.sym(c ^ 7) as f32,
                }
            } else {
                // Any sign, quiet or signalling, any non-zero payload: all one value.
                let payload = 1 + s.below(c ^ 11, (1 << 23) - 1) as u32;
                let sign = (s.below(c ^ 13, 2) as u32) << 31;
                f32::from_bits(sign | 0x7f80_0000 | payload)
            }
        }
        other => {
            return Err(format!(
                "unknown top-k distribution `{other}`; known: {}",
                TOPK_DISTS.join(", ")
            ))
        }
    })
}

/// `chunk_edges`: where the two-stage split (chunks of `SPLIT_CHUNK`) can go wrong.
/// - The partial last chunk (`n % SPLIT_CHUNK` entries, at most `k / 2` of them at the end
///   of the row) holds winners: 2.0, above everything else. A split that drops or clips that
///   chunk loses them.
/// - With `r = k - winners` still wanted, every interior chunk boundary `e` has a band of
///   ties (1.0) on `[e - r, e + r)`. The lowest-index `r` ties are exactly `[S - r, S)` for
///   the first boundary `S = SPLIT_CHUNK`: the cut falls on the chunk edge, so a stage B that
///   does not order candidates by global index takes ties from the wrong chunk.
/// - Everything else is uniform in (-1, -0.5].
fn chunk_edges(s: &Stream, c: u64, i: usize, n: usize, k: usize) -> f32 {
    edges(s, c, i, n, k, SPLIT_CHUNK, (n % SPLIT_CHUNK).min(k / 2))
}

/// `part_edges`: `chunk_edges` for the cluster top-k (kernels/topk.cu), whose CTA r owns
/// entries `[r * P, (r + 1) * P)`, `P = ceil(n / CLUSTER_CTAS)`: 5 winners at the end of the
/// last part, and ties whose cut is exactly the first part edge, so a CTA that places its
/// ids without the counts of the parts before it, or takes ties from the wrong part, fails.
fn part_edges(s: &Stream, c: u64, i: usize, n: usize, k: usize) -> f32 {
    edges(s, c, i, n, k, n.div_ceil(CLUSTER_CTAS), 5.min(k / 2))
}

/// Winners 2.0 in the row's last `winners` entries; ties 1.0 within `k - winners` of every
/// interior multiple of `edge`; the rest uniform in (-1, -0.5].
fn edges(s: &Stream, c: u64, i: usize, n: usize, k: usize, edge: usize, winners: usize) -> f32 {
    let r = k - winners;
    let near_edge = (1..=n / edge).any(|e| {
        let edge = e * edge;
        i + r >= edge && i < edge + r
    });
    if i >= n - winners {
        2.0
    } else if near_edge {
        1.0
    } else {
        -0.5 - 0.5 * s.unit(c) as f32
    }
}

/// Block-score inputs: (q [nq, heads, 128], kb [blocks, 128], w [nq, heads]).
pub type ScoresInputs = (Vec<f32>, Vec<f32>, Vec<f32>);

/// Generate the block-score inputs of one case and distribution.
pub fn scores_inputs(
    seed: u64,
    case: &str,
    dist: &str,
    nq: usize,
    heads: usize,
    blocks: usize,
) -> Result<ScoresInputs, String> {
    if !SCORES_DISTS.contains(&dist) {
        return Err(format!(
            "unknown scores distribution `{dist}`; known: {}",
            SCORES_DISTS.join(", ")
        ));
    }
    let sq = Stream::new(seed, &[case, dist, "q"]);
    let sk = Stream::new(seed, &[case, dist, "kb"]);
    let sw = Stream::new(seed, &[case, dist, "w"]);
    let bias = if dist == "relu_sparse" { -0.05 } else { 0.0 };
    let q: Vec<f32> = (0..nq * heads * HEAD_DIM)
        .map(|i| (sq.normal(i as u64) * 0.25 + bias) as f32)
        .collect();
    let kb: Vec<f32> = (0..blocks * HEAD_DIM)
        .map(|i| {
            let (b, d) = (i / HEAD_DIM, i % HEAD_DIM);
            // dup_blocks: every block b >= 8 copies block b % 8 (exact duplicates).
            let src = if dist == "dup_blocks" { b % 8 } else { b };
            (sk.normal((src * HEAD_DIM + d) as u64) * 0.25 + 0.1) as f32
        })
        .collect();
    let w: Vec<f32> = (0..nq * heads)
        .map(|i| (sw.unit(i as u64) * 0.9 + 0.1) as f32)
        .collect();
    Ok((q, kb, w))
}

/// Selection-attention inputs for one case: (q, k, v, ids, d_o).
pub struct AttnInputs {
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
    pub ids: Vec<i32>,
    pub d_o: Vec<f32>,
}

/// Shape of a selection-attention case, for generation.
#[derive(Clone, Copy, Debug)]
pub struct AttnGenShape {
    pub batch: usize,
    pub q_len: usize,
    pub kv_len: usize,
    pub hq: usize,
    pub hkv: usize,
    pub t: usize,
    pub dtype: AttnDtype,
    pub kv_layout: KvLayout,
    /// `Bf16`: dO drawn as f32 and rounded to bf16 (what a bf16 model's autograd hands on).
    pub do_dtype: GradDtype,
}

pub fn attn_inputs(
    seed: u64,
    case: &str,
    dist: &str,
    s: AttnGenShape,
    grad_rows: Option<&[(usize, usize)]>,
) -> Result<AttnInputs, String> {
    if !ATTN_DISTS.contains(&dist) {
        return Err(format!(
            "unknown attention distribution `{dist}`; known: {}",
            ATTN_DISTS.join(", ")
        ));
    }
    // Counter-based, so filling in parallel chunks gives the same bytes as one thread.
    const CHUNK: usize = 1 << 16;
    let tensor = |name: &str, len: usize| -> Vec<u16> {
        let st = Stream::new(seed, &[case, dist, name]);
        let mut out = vec![0u16; len];
        crate::cpu::par::par_chunks_mut(&mut out, CHUNK, |c, chunk| {
            for (j, x) in chunk.iter_mut().enumerate() {
                *x = s.dtype.from_f32(st.normal((c * CHUNK + j) as u64) as f32);
            }
        });
        out
    };
    // K / V: element (b, j, g, d) draws the value of its fla-layout (NHD) index in either
    // layout, so an `hnd` case holds the same tensors as its `nhd` twin, only placed head-major.
    let kv_tensor = |name: &str| -> Vec<u16> {
        let st = Stream::new(seed, &[case, dist, name]);
        let (kl, h) = (s.kv_len, s.hkv);
        let mut out = vec![0u16; s.batch * kl * h * HEAD_DIM];
        crate::cpu::par::par_chunks_mut(&mut out, CHUNK, |c, chunk| {
            for (j, x) in chunk.iter_mut().enumerate() {
                let at = (c * CHUNK + j) as u64;
                let nhd = match s.kv_layout {
                    KvLayout::Nhd => at,
                    KvLayout::Hnd => {
                        let (d, r) = (at % HEAD_DIM as u64, at / HEAD_DIM as u64);
                        let (key, r) = (r % kl as u64, r / kl as u64);
                        let (g, b) = (r % h as u64, r / h as u64);
                        ((b * kl as u64 + key) * h as u64 + g) * HEAD_DIM as u64 + d
                    }
                };
                *x = s.dtype.from_f32(st.normal(nhd) as f32);
            }
        });
        out
    };
    let q = tensor("q", s.batch * s.q_len * s.hq * HEAD_DIM);
    let k = kv_tensor("k");
    let v = kv_tensor("v");
    let ids = attn_ids(seed, case, dist, s);
    // The upstream gradient: zero outside `grad_rows` when only some rows are checked, so
    // that dk/dv hold exactly the checked rows' contributions (see suites::error).
    let sd = Stream::new(seed, &[case, dist, "d_o"]);
    let row_len = s.hq * HEAD_DIM;
    let mut d_o = vec![0f32; s.batch * s.q_len * row_len];
    crate::cpu::par::par_chunks_mut(&mut d_o, CHUNK, |c, chunk| {
        for (j, x) in chunk.iter_mut().enumerate() {
            let x32 = sd.normal((c * CHUNK + j) as u64) as f32;
            *x = match s.do_dtype {
                GradDtype::F32 => x32,
                GradDtype::Bf16 => half::bf16::from_f32(x32).to_f32(),
            };
        }
    });
    if let Some(rows) = grad_rows {
        let keep: std::collections::BTreeSet<usize> =
            rows.iter().map(|&(b, i)| b * s.q_len + i).collect();
        for (r, chunk) in d_o.chunks_mut(row_len).enumerate() {
            if !keep.contains(&r) {
                chunk.fill(0.0);
            }
        }
    }
    Ok(AttnInputs { q, k, v, ids, d_o })
}

fn attn_ids(seed: u64, case: &str, dist: &str, s: AttnGenShape) -> Vec<i32> {
    let st = Stream::new(seed, &[case, dist, "ids"]);
    let mut ids = vec![-1i32; s.batch * s.q_len * s.hkv * s.t];
    for b in 0..s.batch {
        for i in 0..s.q_len {
            let pos = s.kv_len - s.q_len + i;
            let visible_blocks = pos / ATTN_BLOCK + 1; // blocks holding a visible token
            let all_blocks = s.kv_len.div_ceil(ATTN_BLOCK);
            for g in 0..s.hkv {
                let base = ((b * s.q_len + i) * s.hkv + g) * s.t;
                let c = base as u64 * 16;
                let list = &mut ids[base..base + s.t];
                // Distinct visible blocks by a random start and stride (co-prime draws).
                let start = st.below(c, visible_blocks as u64) as usize;
                for (j, slot) in list.iter_mut().enumerate() {
                    *slot = ((start + j * 7919) % visible_blocks) as i32;
                }
                match dist {
                    "repeat_ids" => {
                        for j in 1..s.t {
                            if st.below(c + j as u64, 3) == 0 {
                                list[j] = list[st.below(c + 100 + j as u64, j as u64) as usize];
                            }
                        }
                    }
                    "invalid_ids" => {
                        let all_invalid = st.below(c + 1, 8) == 0;
                        for (j, slot) in list.iter_mut().enumerate() {
                            if all_invalid || st.below(c + 200 + j as u64, 4) == 0 {
                                *slot = -1;
                            }
                        }
                    }
                    "causal_edge" => {
                        // The query's own partial block first, then blocks past the query.
                        list[0] = (pos / ATTN_BLOCK) as i32;
                        for (j, slot) in list.iter_mut().enumerate().skip(1) {
                            if j % 3 == 0 && visible_blocks < all_blocks {
                                let ahead = visible_blocks
                                    + st.below(
                                        c + 300 + j as u64,
                                        (all_blocks - visible_blocks) as u64,
                                    ) as usize;
                                *slot = ahead as i32;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_pure_functions_of_their_labels() {
        let a = Stream::new(7, &["case", "uniform", "scores"]);
        let b = Stream::new(7, &["case", "uniform", "scores"]);
        let c = Stream::new(7, &["case", "uniform", "active"]);
        let d = Stream::new(8, &["case", "uniform", "scores"]);
        for i in [0u64, 1, 1 << 40] {
            assert_eq!(a.bits(i), b.bits(i));
            assert_ne!(a.bits(i), c.bits(i));
            assert_ne!(a.bits(i), d.bits(i));
        }
    }

    #[test]
    fn generated_bytes_are_pinned() {
        // Pinned digests: a change here changes every golden snapshot on every target, so it
        // must be deliberate. Values computed once by this generator.
        let s = topk_scores(20261130, "pin", "uniform", 2, 5, 8, 3).unwrap();
        let bits: Vec<u32> = s.iter().map(|x| x.to_bits()).collect();
        let h = bits.iter().fold(0u64, |h, &b| mix(h ^ b as u64));
        assert_eq!(
            h, PINNED_UNIFORM_DIGEST,
            "generator output changed: {bits:x?}"
        );
    }
    const PINNED_UNIFORM_DIGEST: u64 = 11617779765431140889;

    #[test]
    fn distributions_have_their_shape() {
        let ties = topk_scores(1, "c", "ties", 1, 1000, 1000, 10).unwrap();
        let distinct: std::collections::BTreeSet<u32> = ties.iter().map(|x| x.to_bits()).collect();
        assert!(distinct.len() <= 16);
        let nan = topk_scores(1, "c", "nan_inf", 1, 4000, 4000, 10).unwrap();
        assert!(
            nan.iter().any(|x| x.is_nan())
                && nan.contains(&f32::INFINITY)
                && nan.contains(&f32::NEG_INFINITY)
        );
        let z = topk_scores(1, "c", "signed_zeros", 1, 1000, 1000, 10).unwrap();
        assert!(z.iter().any(|x| x.to_bits() == 0x8000_0000) && z.iter().any(|x| x.to_bits() == 0));
        let pad = topk_scores(1, "c", "uniform", 2, 3, 5, 1).unwrap();
        assert!(pad[3].is_nan() && pad[4].is_nan() && !pad[5].is_nan());
        assert!(topk_scores(1, "c", "bogus", 1, 1, 1, 1).is_err());
    }

    /// The edge distributions put the selection cut where they say: checked through the
    /// oracle, on the shape of matrix.yaml's `topk_cut_specials`.
    #[test]
    fn edge_distributions_cut_where_they_say() {
        use crate::problem::TopkProblem;
        let (n, k) = (3 * SPLIT_CHUNK + 5, 300);
        let select = |dist: &str| {
            let scores = topk_scores(20261130, "topk_cut_specials", dist, 1, n, n, k).unwrap();
            let p = TopkProblem {
                nq: 1,
                n,
                capacity: n,
                k,
                scores: scores.clone(),
                active: None,
            };
            (scores, crate::reference::topk::topk_ids(&p))
        };
        // chunk_edges: the 5 entries of the partial last chunk, and the ties up to the first
        // chunk edge exactly.
        let (_, ids) = select("chunk_edges");
        let want: Vec<i32> = (SPLIT_CHUNK - 295..SPLIT_CHUNK)
            .chain(n - 5..n)
            .map(|i| i as i32)
            .collect();
        assert_eq!(ids, want);
        // part_edges: the 5 winners, then the ties up to the first part edge (P = 1537).
        let part = n.div_ceil(CLUSTER_CTAS);
        assert_eq!(part, 1537);
        let (_, ids) = select("part_edges");
        let want: Vec<i32> = (part - 295..part)
            .chain(n - 5..n)
            .map(|i| i as i32)
            .collect();
        assert_eq!(ids, want);
        // zero_cut: the selection ends among zeros of both signs, and zeros are left out.
        let (s, ids) = select("zero_cut");
        let picked = |id: &i32| s[*id as usize];
        assert!(ids.iter().any(|i| picked(i).to_bits() == 0));
        assert!(ids.iter().any(|i| picked(i).to_bits() == 0x8000_0000));
        assert!(ids.iter().filter(|i| picked(i) > 0.0).count() < k);
        // nan_cut: every number is selected, then NaNs of both signs; NaNs are left out.
        let (s, ids) = select("nan_cut");
        let picked = |id: &i32| s[*id as usize];
        let numbers = s.iter().filter(|x| !x.is_nan()).count();
        assert!(numbers < k && ids.iter().filter(|i| !picked(i).is_nan()).count() == numbers);
        assert!(ids
            .iter()
            .any(|i| picked(i).is_nan() && picked(i).is_sign_negative()));
        assert!(ids
            .iter()
            .any(|i| picked(i).is_nan() && picked(i).is_sign_positive()));
        assert!(s.contains(&f32::NEG_INFINITY) && s.contains(&f32::INFINITY));
    }

    #[test]
    fn attention_ids_are_visible_or_as_the_distribution_says() {
        let shape = AttnGenShape {
            batch: 1,
            q_len: 10,
            kv_len: 1000,
            hq: 4,
            hkv: 2,
            t: 16,
            dtype: AttnDtype::Bf16,
            kv_layout: KvLayout::Nhd,
            do_dtype: GradDtype::F32,
        };
        let inp = attn_inputs(3, "c", "random_ids", shape, None).unwrap();
        // The head-major twin holds the same K / V, placed [batch, hkv, kv_len, D].
        let hnd = AttnGenShape {
            kv_layout: KvLayout::Hnd,
            ..shape
        };
        let twin = attn_inputs(3, "c", "random_ids", hnd, None).unwrap();
        assert_eq!((&twin.q, &twin.ids), (&inp.q, &inp.ids));
        for (j, g, d) in [(0, 0, 0), (999, 1, 127), (517, 0, 64), (1, 1, 3)] {
            let nhd_at = (j * 2 + g) * HEAD_DIM + d;
            let hnd_at = (g * 1000 + j) * HEAD_DIM + d;
            assert_eq!(twin.k[hnd_at], inp.k[nhd_at]);
            assert_eq!(twin.v[hnd_at], inp.v[nhd_at]);
        }
        assert_ne!(twin.k, inp.k, "the layouts differ in placement");
        for i in 0..10 {
            let pos = 990 + i;
            for g in 0..2 {
                let list = &inp.ids[(i * 2 + g) * 16..(i * 2 + g + 1) * 16];
                assert!(list
                    .iter()
                    .all(|&id| id >= 0 && (id as usize) * ATTN_BLOCK <= pos));
            }
        }
        let inv = attn_inputs(3, "c", "invalid_ids", shape, None).unwrap();
        assert!(inv.ids.contains(&-1));
        let rows = [(0usize, 3usize)];
        let g = attn_inputs(3, "c", "random_ids", shape, Some(&rows)).unwrap();
        let row_len = 4 * HEAD_DIM;
        assert!(g.d_o[..3 * row_len].iter().all(|x| *x == 0.0));
        assert!(g.d_o[3 * row_len..4 * row_len].iter().any(|x| *x != 0.0));
    }
}
