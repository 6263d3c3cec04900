//! CUDA backend (cudarc). Owned by the top-k helper.
