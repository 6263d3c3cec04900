//! FP64 references (owned by the references helper).
