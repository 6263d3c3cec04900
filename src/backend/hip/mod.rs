//! HIP backend (hip-sys). Owned by the HIP helper.
