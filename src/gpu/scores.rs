//! GPU host code: scores (see gpu/mod.rs).
