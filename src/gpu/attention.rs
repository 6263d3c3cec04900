//! GPU host code: attention (see gpu/mod.rs).
