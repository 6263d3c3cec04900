//! The selection-order contract (owned by the references helper; see DESIGN.md).
