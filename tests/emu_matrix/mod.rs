//! What the emulator's family tests share: the repository's matrix.yaml, a target's caps
//! from it, and switches from (key, value) pairs.
#![allow(dead_code)] // each test binary uses its own subset

use qsa::dispatch::{Switches, TargetCaps};
use qsa::matrix::Matrix;
use std::collections::BTreeMap;
use std::path::Path;

pub fn matrix() -> Matrix {
    Matrix::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix.yaml")).unwrap()
}

pub fn caps(m: &Matrix, name: &str) -> TargetCaps {
    m.target(name).unwrap().caps()
}

pub fn switches(pairs: &[(&str, &str)]) -> Switches {
    Switches::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}
