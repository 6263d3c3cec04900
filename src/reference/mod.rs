//! FP64 references (and the obviously-correct top-k oracle): what every kernel and the CPU
//! backend are compared with. Plain code first, speed second; only the scorer reference is
//! multi-threaded because the suites run it at full size.

pub mod topk;
