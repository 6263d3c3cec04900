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
/// spread over up to `threads()` threads. `chunk` must be > 0.
pub fn par_chunks_mut<T, F>(out: &mut [T], chunk: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    let items = out.len().div_ceil(chunk);
    let workers = threads().min(items).max(1);
    if workers == 1 {
        out.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
        return;
    }
    let per = items.div_ceil(workers);
    let f = &f;
    std::thread::scope(|s| {
        for (w, group) in out.chunks_mut(per * chunk).enumerate() {
            s.spawn(move || {
                for (j, c) in group.chunks_mut(chunk).enumerate() {
                    f(w * per + j, c);
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
    fn chunks_see_their_index() {
        let mut v = vec![0usize; 23];
        par_chunks_mut(&mut v, 4, |i, c| c.iter_mut().for_each(|x| *x = i));
        assert_eq!(v, (0..23).map(|j| j / 4).collect::<Vec<_>>());
    }
}
