//! FP64 references (and the obviously-correct top-k oracle): what every kernel and the CPU
//! backend are compared with. Plain code first, speed second; the scorer and attention
//! references are multi-threaded because the suites run them at size.

pub mod attention;
pub mod scores;
pub mod topk;
