//! CPU implementations of the kernels, written to be the proof of the GPU algorithms (same
//! selection algorithm, same summation orders) and multi-threaded with `std::thread::scope`.

pub mod attention;
pub mod par;
pub mod scores;
pub mod topk;
