//! GPU host code: backend (see gpu/mod.rs).
