//! The CPU backend (owned by the references helper).
