//! Data parallelism with `std::thread::scope` only: the CPU backend and the references split
//! independent work items (queries, rows, (batch, KV head) pairs) into one contiguous range
//! per thread. No work stealing: items of one call cost about the same.

use std::num::NonZeroUsize;

/// Threads to use: `std::thread::available_parallelism`, 1 when unknown.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// `(0..n).map(f).collect()`, computed by up to `threads()` threads; results in item order.
pub fn par_map<T, F>(n: usize, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> T + Sync,
{
    let workers = threads().min(n).max(1);
    if workers == 1 {
        return (0..n).map(f).collect();
    }
    let per = n.div_ceil(workers);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let range = (w * per).min(n)..((w + 1) * per).min(n);
                s.spawn(move || range.map(f).collect::<Vec<T>>())
            })
            .collect();
        // A panic in a worker is a bug in this crate (inputs are validated before): re-raise.
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// Call `f(i, chunk_i)` for every `chunk`-sized piece of `out` (the last may be shorter),
/// spread over up to `threads()` threads. `chunk` must be > 0. (Each chunk is a row of one
/// piece: `par_row_pieces` does the splitting.)
pub fn par_chunks_mut<T, F>(out: &mut [T], chunk: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    par_row_pieces(out, chunk, chunk, |i, _, c| f(i, c));
}

/// Call `f(row, start, piece)` for every piece of every `row_len`-long row of `out`: each row
/// cut into pieces of `piece` items (the last of a row shorter), all pieces spread over up to
/// `threads()` threads. Unlike `par_chunks_mut` by rows, one long row (a decode query's
/// scores) still uses every core. `row_len` and `piece` must be > 0.
pub fn par_row_pieces<T, F>(out: &mut [T], row_len: usize, piece: usize, f: F)
where
    T: Send,
    F: Fn(usize, usize, &mut [T]) + Sync,
{
    let mut items: Vec<(usize, usize, &mut [T])> = Vec::new();
    for (row, r) in out.chunks_mut(row_len).enumerate() {
        for (i, c) in r.chunks_mut(piece).enumerate() {
            items.push((row, i * piece, c));
        }
    }
    let workers = threads().min(items.len()).max(1);
    if workers == 1 {
        items
            .into_iter()
            .for_each(|(row, start, c)| f(row, start, c));
        return;
    }
    let per = items.len().div_ceil(workers);
    let f = &f;
    std::thread::scope(|s| {
        for group in items.chunks_mut(per) {
            s.spawn(move || {
                for (row, start, c) in group.iter_mut() {
                    f(*row, *start, c);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_order() {
        for n in [0, 1, 2, 3, 17] {
            assert_eq!(
                par_map(n, |i| i * i),
                (0..n).map(|i| i * i).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn row_pieces_see_their_row_and_start() {
        for (rows, row_len, piece) in [(3, 10, 4), (1, 9, 9), (2, 5, 8), (0, 4, 2)] {
            let mut v = vec![(0usize, 0usize); rows * row_len];
            par_row_pieces(&mut v, row_len, piece, |row, start, c| {
                for (i, x) in c.iter_mut().enumerate() {
                    *x = (row, start + i);
                }
            });
            let want: Vec<_> = (0..rows * row_len)
                .map(|i| (i / row_len, i % row_len))
                .collect();
            assert_eq!(v, want, "rows {rows} row_len {row_len} piece {piece}");
        }
    }

    #[test]
    fn chunks_see_their_index() {
        let mut v = vec![0usize; 23];
        par_chunks_mut(&mut v, 4, |i, c| c.iter_mut().for_each(|x| *x = i));
        assert_eq!(v, (0..23).map(|j| j / 4).collect::<Vec<_>>());
    }
}
