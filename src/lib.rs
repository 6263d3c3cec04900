//! qsa: sparse-attention kernels (indexer block scores, radix top-k block selection, NSA
//! selection attention) for CUDA and HIP, FP64 references, a CPU backend, and the suites
//! that `cargo xtask matrix` runs on every target. ARCHITECTURE.md is the map.

pub mod backend;
pub mod cases;
pub mod contract;
pub mod cpu;
pub mod crash;
pub mod dispatch;
pub mod dump;
pub mod echo;
pub mod emu;
pub mod gen;
pub mod gpu;
pub mod journal;
pub mod matrix;
pub mod npy;
pub mod plan;
pub mod problem;
pub mod ptx;
pub mod reference;
pub mod results;
pub mod runner;
pub mod sanitize;
pub mod suites;
