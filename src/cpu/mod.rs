//! CPU implementations of the kernels (owned by the references helper).
