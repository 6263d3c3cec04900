//! A case's `.npy` inputs, checked when the matrix or cases file is loaded (before any
//! work): the keys its family reads, each file's header against the file's length, its
//! dtype and shape against the case's, and the active counts' range. The data itself (but
//! for the small active counts) is read when the case runs.

use super::{ActiveMode, Case, FamilyName};
use crate::echo;
use crate::npy::{self, Dtype};
use crate::problem::HEAD_DIM;
use std::path::Path;

/// An input a case cannot use: its key under `inputs` and why.
pub struct BadInput {
    pub key: String,
    pub message: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Float,
    Int,
}

/// The inputs each family reads from files: key, element kind, shape.
fn wanted(c: &Case) -> Vec<(&'static str, Kind, Vec<usize>)> {
    match c.family() {
        FamilyName::Topk => {
            let s = c.topk.as_ref().expect("topk case");
            vec![
                ("scores", Kind::Float, vec![s.queries, s.capacity]),
                ("active", Kind::Int, vec![s.queries]),
            ]
        }
        FamilyName::Scores => {
            let s = c.scores.as_ref().expect("scores case");
            vec![
                ("q", Kind::Float, vec![s.queries, s.heads, HEAD_DIM]),
                ("kb", Kind::Float, vec![s.blocks, HEAD_DIM]),
                ("w", Kind::Float, vec![s.queries, s.heads]),
            ]
        }
        FamilyName::Attention => Vec::new(),
    }
}

/// Keys that must all be given once any input is (the rest cannot be generated to match).
fn required(family: FamilyName) -> &'static [&'static str] {
    match family {
        FamilyName::Topk => &["scores"],
        FamilyName::Scores => &["q", "kb", "w"],
        FamilyName::Attention => &[],
    }
}

pub fn check(c: &Case) -> Result<(), BadInput> {
    if c.inputs.is_empty() {
        return Ok(());
    }
    let bad = |key: &str, message: String| {
        Err(BadInput {
            key: key.to_string(),
            message,
        })
    };
    let want = wanted(c);
    let allowed: Vec<&str> = want.iter().map(|w| w.0).collect();
    for key in c.inputs.keys() {
        if !allowed.contains(&key.as_str()) {
            return bad(
                key,
                format!(
                    "input `{}` is not read from files for {}; allowed: {}",
                    echo::value(key),
                    c.family().name(),
                    if allowed.is_empty() {
                        "none".into()
                    } else {
                        allowed.join(", ")
                    }
                ),
            );
        }
    }
    for key in required(c.family()) {
        if !c.inputs.contains_key(*key) {
            return bad(
                key,
                format!(
                    "reads inputs from files but names no `{key}`: give all of {}",
                    required(c.family()).join(", ")
                ),
            );
        }
    }
    if let (Some(s), true) = (&c.topk, c.inputs.contains_key("active")) {
        if s.active != ActiveMode::None {
            return bad(
                "active",
                format!(
                    "active counts come from a file and from `active: {}` in the shape: keep one \
                 (remove `active:` from `topk`, or the `active` input)",
                    match s.active {
                        ActiveMode::Causal => "causal",
                        _ => "edge",
                    }
                ),
            );
        }
    }
    for (key, kind, shape) in want {
        let Some(path) = c.inputs.get(key) else {
            continue;
        };
        let h = npy::read_header(path).map_err(|m| BadInput {
            key: key.into(),
            message: m,
        })?;
        let kind_ok = match kind {
            Kind::Float => matches!(h.dtype, Dtype::F4 | Dtype::F8),
            Kind::Int => matches!(h.dtype, Dtype::I4 | Dtype::I8),
        };
        if !kind_ok {
            let (what, fix) = match kind {
                Kind::Float => ("float32 (or float64)", "<f4"),
                Kind::Int => ("int32 (or int64)", "<i4"),
            };
            return bad(
                key,
                format!(
                    "{}: dtype {} but `{key}` is {what}: save arr.astype('{fix}')",
                    path.display(),
                    h.dtype.descr()
                ),
            );
        }
        if h.shape != shape {
            return bad(
                key,
                format!(
                    "{}: shape {:?}, but `{key}` of this case is {:?} ({})",
                    path.display(),
                    h.shape,
                    shape,
                    shape_names(c.family(), key)
                ),
            );
        }
        if key == "active" {
            check_active(c, path).map_err(|m| BadInput {
                key: key.into(),
                message: m,
            })?;
        }
    }
    Ok(())
}

fn shape_names(family: FamilyName, key: &str) -> &'static str {
    match (family, key) {
        (FamilyName::Topk, "scores") => "queries x capacity",
        (FamilyName::Topk, _) => "queries",
        (_, "q") => "queries x heads x 128",
        (_, "kb") => "blocks x 128",
        _ => "queries x heads",
    }
}

/// Active counts are per query (small): read and check they lie in [0, n].
fn check_active(c: &Case, path: &Path) -> Result<(), String> {
    let n = c.topk.as_ref().map_or(0, |s| s.n);
    let a: npy::Npy<i32> = npy::read(path)?;
    if let Some((q, bad)) = a
        .data
        .iter()
        .enumerate()
        .find(|(_, &x)| x < 0 || x as usize > n)
    {
        return Err(format!(
            "{}: active count {bad} of query {q} is outside [0, n = {n}]",
            path.display()
        ));
    }
    Ok(())
}
