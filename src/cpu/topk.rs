//! CPU top-k: the GPU algorithms written out sequentially, as their proof.
//!
//! Radix select on the 32-bit order key of `crate::contract`: four passes of 256 bins, most
//! significant digit first. Each pass histograms the digit of the keys that still match the
//! prefix chosen so far and walks the bins from the top until the running count reaches the
//! rank still wanted; after four passes the prefix is the k-th largest key `T`, and `rem` says
//! how many keys equal to `T` are still wanted. The selection is then every key `> T` plus the
//! `rem` lowest-index keys `== T`: exactly the contract (larger key first, ties by lower
//! index).
//!
//! The two-stage split (decode): stage A cuts the row into chunks of `SPLIT_CHUNK` entries and
//! keeps each chunk's top `min(k, chunk)` by the same radix select; stage B radix-selects `k`
//! among all candidates, listed in ascending global index so that "lower position" in the
//! candidate list is "lower index" in the row.
//!
//! Why the split is exact: let `S` be the row's top-k under the contract's total order. For a
//! chunk `C`, every element of `S ∩ C` precedes every element of `C \ S` (it precedes every
//! element outside `S`), so `S ∩ C` is a prefix of `C`'s order, of length at most
//! `min(k, |C|)`; hence `S ∩ C` lies inside the chunk's candidates, and `S` inside their union
//! `U`. Since `S ⊆ U ⊆ row` and `S` is the top-k of the whole row, it is also the top-k of
//! `U` under the same order (keys and global indices are unchanged): stage B returns `S`.

use super::par::{par_chunks_mut, par_map};
use crate::contract::{finalize_ids, order_key};
use crate::dispatch::topk::SPLIT_CHUNK;
use crate::problem::TopkProblem;

/// The k-th largest key (1 <= k <= keys.len()) and how many keys equal to it are selected.
fn kth_key(keys: &[u32], k: usize) -> (u32, usize) {
    let (mut prefix, mut mask, mut rem) = (0u32, 0u32, k);
    for pass in 0..4 {
        let shift = 24 - 8 * pass;
        let mut hist = [0usize; 256];
        for &key in keys.iter().filter(|&&key| key & mask == prefix) {
            hist[((key >> shift) & 0xff) as usize] += 1;
        }
        // The keys matching the prefix number at least `rem`, so some bin stops the walk.
        let mut bin = 255;
        while hist[bin] < rem {
            rem -= hist[bin];
            bin -= 1;
        }
        prefix |= (bin as u32) << shift;
        mask |= 0xff << shift;
    }
    (prefix, rem)
}

/// Positions (ascending) of the `k` entries of `keys` the contract selects; all of them when
/// `k >= keys.len()`, none when `k == 0`.
pub fn radix_select(keys: &[u32], k: usize) -> Vec<usize> {
    if k >= keys.len() {
        return (0..keys.len()).collect();
    }
    if k == 0 {
        return Vec::new();
    }
    let (t, mut ties) = kth_key(keys, k);
    let mut out = Vec::with_capacity(k);
    for (i, &key) in keys.iter().enumerate() {
        if key > t {
            out.push(i);
        } else if key == t && ties > 0 {
            ties -= 1;
            out.push(i);
        }
    }
    out
}

fn keys_of(scores: &[f32]) -> Vec<u32> {
    scores.iter().map(|&x| order_key(x)).collect()
}

fn to_ids(positions: impl IntoIterator<Item = usize>, k: usize) -> Vec<i32> {
    finalize_ids(positions.into_iter().map(|i| i as i32).collect(), k)
}

/// Single-pass radix top-k (what the register and wide kernels compute): `nq * k` ids.
pub fn topk_radix(p: &TopkProblem) -> Vec<i32> {
    let mut out = vec![-1; p.nq * p.k];
    par_chunks_mut(&mut out, p.k.max(1), |q, row_out| {
        let keys = keys_of(&p.row(q)[..p.candidates(q)]);
        row_out.copy_from_slice(&to_ids(radix_select(&keys, p.k), p.k));
    });
    out
}

/// Stage A for one chunk: the chunk's top `min(k, len)` as (global index, key), ascending.
fn stage_a(row: &[f32], start: usize, len: usize, k: usize) -> Vec<(usize, u32)> {
    let keys = keys_of(&row[start..start + len]);
    radix_select(&keys, k.min(len))
        .into_iter()
        .map(|i| (start + i, keys[i]))
        .collect()
}

/// Two-stage split top-k (the decode kernel pair) with chunks of `chunk` entries: `nq * k`
/// ids, equal to [`topk_radix`] (see the module doc for why). Honours `active` as well.
pub fn topk_split_chunked(p: &TopkProblem, chunk: usize) -> Vec<i32> {
    assert!(chunk > 0, "split chunk must be positive");
    let chunks: Vec<usize> = (0..p.nq).map(|q| p.candidates(q).div_ceil(chunk)).collect();
    // One work item per (query, chunk), as stage A runs one CTA per chunk.
    let items: Vec<(usize, usize)> = (0..p.nq)
        .flat_map(|q| (0..chunks[q]).map(move |c| (q, c)))
        .collect();
    let cands = par_map(items.len(), |it| {
        let (q, c) = items[it];
        let start = c * chunk;
        stage_a(p.row(q), start, chunk.min(p.candidates(q) - start), p.k)
    });
    // Stage B: per query, the candidates of its chunks in chunk order = ascending index.
    let mut per_query: Vec<Vec<(usize, u32)>> = vec![Vec::new(); p.nq];
    for ((q, _), c) in items.iter().zip(cands) {
        per_query[*q].extend(c);
    }
    let mut out = vec![-1; p.nq * p.k];
    par_chunks_mut(&mut out, p.k.max(1), |q, row_out| {
        let cand = &per_query[q];
        let keys: Vec<u32> = cand.iter().map(|c| c.1).collect();
        let ids = radix_select(&keys, p.k).into_iter().map(|j| cand[j].0);
        row_out.copy_from_slice(&to_ids(ids, p.k));
    });
    out
}

/// Two-stage split top-k with the kernels' chunk size `dispatch::topk::SPLIT_CHUNK`.
pub fn topk_split(p: &TopkProblem) -> Vec<i32> {
    topk_split_chunked(p, SPLIT_CHUNK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::topk::topk_ids;

    /// Tiny xorshift64 for test data (the project's generator lives in src/gen.rs).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A score from a small pool (heavy ties), with specials mixed in.
    fn score(rng: &mut Rng, pool: u64) -> f32 {
        match rng.below(40) {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => -0.0,
            4 => 0.0,
            5 => -f32::NAN,
            _ => (rng.below(pool) as f32 - pool as f32 / 2.0) * 0.25,
        }
    }

    fn random_problem(rng: &mut Rng, nq: usize, n: usize, k: usize, pool: u64) -> TopkProblem {
        let capacity = n + rng.below(5) as usize;
        let scores = (0..nq * capacity).map(|_| score(rng, pool)).collect();
        let active = if rng.below(2) == 0 {
            None
        } else {
            Some((0..nq).map(|_| rng.below(n as u64 + 1) as i32).collect())
        };
        TopkProblem {
            nq,
            n,
            capacity,
            k,
            scores,
            active,
        }
    }

    fn check(p: &TopkProblem) {
        let want = topk_ids(p);
        assert_eq!(topk_radix(p), want, "radix: {p:?}");
        for chunk in [1, 3, 7, 64] {
            assert_eq!(topk_split_chunked(p, chunk), want, "split chunk {chunk}");
        }
    }

    #[test]
    fn random_rows_with_heavy_ties() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..300 {
            let n = 1 + rng.below(200) as usize;
            let k = 1 + rng.below(n as u64 + 10) as usize;
            let pool = [1, 2, 3, 17, 1000, 1 << 20][case % 6];
            let nq = 1 + rng.below(4) as usize;
            check(&random_problem(&mut rng, nq, n, k, pool));
        }
    }

    #[test]
    fn special_rows() {
        let rows: [Vec<f32>; 5] = [
            vec![1.0; 50],
            vec![f32::NAN; 50],
            (0..50)
                .map(|i| {
                    if i % 2 == 0 {
                        f32::INFINITY
                    } else {
                        f32::NEG_INFINITY
                    }
                })
                .collect(),
            (0..50)
                .map(|i| if i % 3 == 0 { -0.0 } else { 0.0 })
                .collect(),
            (0..50).map(|i| -(i as f32)).collect(),
        ];
        for row in rows {
            for k in [1, 2, 25, 49, 50, 51, 100] {
                for active in [None, Some(vec![0]), Some(vec![1]), Some(vec![37])] {
                    let p = TopkProblem {
                        nq: 1,
                        n: 50,
                        capacity: 50,
                        k,
                        scores: row.clone(),
                        active,
                    };
                    check(&p);
                }
            }
        }
    }

    #[test]
    fn split_with_real_chunk_crosses_chunks() {
        let mut rng = Rng(42);
        let n = 2 * SPLIT_CHUNK + 123;
        for (k, pool) in [(5, 3), (300, 50), (SPLIT_CHUNK + 7, 4)] {
            let scores = (0..2 * n).map(|_| score(&mut rng, pool)).collect();
            let p = TopkProblem {
                nq: 2,
                n,
                capacity: n,
                k,
                scores,
                active: None,
            };
            let want = topk_ids(&p);
            assert_eq!(topk_split(&p), want);
            assert_eq!(topk_radix(&p), want);
        }
    }
}
