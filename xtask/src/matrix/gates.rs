//! The gates `cargo xtask matrix` adds per target besides the snapshots: the kernel that ran
//! is the dispatch table's, the build succeeded, resources stay within the golden and the
//! target's limits (`resource_gates`); each a `GateNote` with the command that repeats it.

use crate::build::resources::{gate_resources, Report as ResourceReport};
use crate::golden::{Golden, Scope};
use crate::report::GateNote;
use crate::snapshots;
use anyhow::{Context, Result};
use qsa::matrix::{Matrix, Target};
use qsa::results::TargetResults;

pub(super) fn note(kind: &str, name: &str, failed: bool, message: String, repro: &str) -> GateNote {
    GateNote {
        kind: kind.into(),
        name: name.into(),
        failed,
        message,
        meaning: Vec::new(),
        diff: String::new(),
        repro: repro.into(),
    }
}

/// Every kernel that ran must be the one the dispatch table predicts.
pub(super) fn check_dispatch(m: &Matrix, t: &Target, r: &TargetResults, notes: &mut Vec<GateNote>) {
    for rec in &r.records {
        let (Some(ran), Some(case)) =
            (&rec.dispatched, m.cases.iter().find(|c| c.name == rec.case))
        else {
            continue;
        };
        if let Ok(want) = qsa::plan::predicted_kernel(m, t, case, &rec.variant, rec.check == "bwd")
        {
            // Through PTX on a newer card the runner drops Feature::Wgmma (SASS-only kernels):
            // the mma.sync twin of a predicted wgmma kernel is then the right one.
            let ptx_twin = r.status == qsa::results::TargetStatus::RunPtx
                && want.strip_suffix("_wgmma") == Some(ran.as_str());
            if &want != ran && !ptx_twin {
                notes.push(note("dispatch", &format!("{}/{}", rec.case, rec.variant), true, format!("ran `{ran}`, but the dispatch table says `{want}`: src/dispatch and the backend disagree"), &rec.repro));
            }
        }
    }
}

/// Resource snapshot and gates of one built target.
pub(super) fn resource_gates(
    golden: &mut Golden,
    t: &Target,
    new: &ResourceReport,
    build_failed: bool,
    notes: &mut Vec<GateNote>,
) -> Result<()> {
    if build_failed {
        notes.push(note(
            "build",
            &t.name,
            true,
            "a kernel failed to compile (warnings are errors): see the build output".into(),
            &format!("cargo xtask build --target {}", t.name),
        ));
    }
    let path = golden.dir(&t.name).join("resources.snap");
    let old = if path.exists() {
        let snap = insta::Snapshot::from_file(&path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let text = snap.as_text().map(|x| x.to_string()).unwrap_or_default();
        Some(
            ResourceReport::from_text(&text)
                .with_context(|| format!("{}: unreadable resource snapshot", path.display()))?,
        )
    } else {
        None
    };
    for v in gate_resources(old.as_ref(), new, t) {
        notes.push(note(
            "resources",
            &t.name,
            true,
            v.message,
            &format!("cargo xtask build --target {}", t.name),
        ));
    }
    snapshots::check(
        golden,
        &t.name,
        "resources",
        &new.to_text(),
        Scope::Full,
        format!("cargo xtask build --target {}", t.name),
        notes,
    )
}
