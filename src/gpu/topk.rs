//! GPU host code: topk (see gpu/mod.rs).
