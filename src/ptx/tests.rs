//! The PTX-mode decision over device arch x target x fatbin contents.

use super::fatbin::{ptx_archs, synthetic, Kind};
use super::*;

const H200: Card = Card {
    vendor: Vendor::Nvidia,
    arch: "sm_90",
    max_shared_per_block: 232_448,
};

fn sm(name: &str, shared: u32) -> Wanted<'_> {
    Wanted {
        name,
        vendor: Vendor::Nvidia,
        shared_per_block: shared,
    }
}

/// Three families' fatbins, each with these entries.
fn scan_of(entries: &[(Kind, u32, usize)]) -> FatbinScan {
    let bytes = synthetic(entries);
    ["topk", "block_scores", "selection_attention"]
        .iter()
        .map(|s| (PathBuf::from(format!("k/{s}.fatbin")), ptx_archs(&bytes)))
        .collect()
}

fn never() -> FatbinScan {
    panic!("the fatbins were read where the decision needs none")
}

#[test]
fn the_own_card_runs_natively_without_reading_fatbins() {
    assert_eq!(
        decide(&sm("sm_90", 232_448), &H200, true, never),
        Ok(Mode::Native)
    );
}

#[test]
fn an_older_target_with_its_ptx_runs_as_ptx_under_its_own_shared_limit() {
    let with_ptx = || scan_of(&[(Kind::Sass, 75, 16), (Kind::Ptx, 75, 16)]);
    let Ok(Mode::Ptx(run)) = decide(&sm("sm_75", 65_536), &H200, true, with_ptx) else {
        panic!("sm_75 with its PTX on an sm_90 must run as PTX");
    };
    assert_eq!(
        run,
        PtxRun {
            target: "sm_75".into(),
            card: "sm_90".into(),
            shared_limit: 65_536
        }
    );
    assert_eq!(run.label(), "run (PTX on sm_90)");
    assert!(
        run.reason().contains("65536 bytes per block"),
        "{}",
        run.reason()
    );
    assert!(
        run.bench_skip().contains("no bench medians"),
        "{}",
        run.bench_skip()
    );
    // A target allowing more than the card: the card's limit binds.
    let small = Card {
        max_shared_per_block: 50_000,
        ..H200
    };
    let sm86 = || scan_of(&[(Kind::Ptx, 86, 8)]);
    let Ok(Mode::Ptx(run)) = decide(&sm("sm_86", 101_376), &small, true, sm86) else {
        panic!("sm_86 on sm_90");
    };
    assert_eq!(run.shared_limit, 50_000);
}

/// Architecture numbers compare as numbers: sm_100 is newer than sm_90 ("sm_100" < "sm_90"
/// as text).
#[test]
fn newer_means_a_larger_architecture_number() {
    let b200 = Card {
        arch: "sm_100",
        ..H200
    };
    let sm90 = || scan_of(&[(Kind::Ptx, 90, 8)]);
    assert!(matches!(
        decide(&sm("sm_90", 232_448), &b200, true, sm90),
        Ok(Mode::Ptx(_))
    ));
    assert_eq!(sm_number("sm_100"), Some(100));
    assert_eq!(sm_number("sm_90a"), None);
    assert_eq!(sm_number("gfx906"), None);
    assert_eq!(sm_number("sm_"), None);
}

#[test]
fn an_older_card_a_other_vendor_or_no_ptx_is_a_reason_naming_the_fix() {
    let turing = Card {
        arch: "sm_75",
        ..H200
    };
    let e = decide(&sm("sm_86", 101_376), &turing, true, never).unwrap_err();
    assert!(
        e.contains("older than sm_86") && e.contains("run target sm_75 instead"),
        "{e}"
    );

    let gfx = Wanted {
        name: "gfx906",
        vendor: Vendor::Amd,
        shared_per_block: 65_536,
    };
    let e = decide(&gfx, &H200, true, never).unwrap_err();
    assert!(e.contains("no code of one vendor runs on the other"), "{e}");

    let sass_only = || scan_of(&[(Kind::Sass, 75, 16)]);
    let e = decide(&sm("sm_75", 65_536), &H200, true, sass_only).unwrap_err();
    assert!(
        e.contains("k/topk.fatbin carries no compute_75 PTX (PTX found: none)")
            && e.contains("cargo xtask build --target sm_75")
            && e.contains("arch=compute_75,code=[sm_75,compute_75]"),
        "{e}"
    );
    // PTX of another architecture is not the target's: its dispatch would not match.
    let other = || scan_of(&[(Kind::Ptx, 70, 16)]);
    let e = decide(&sm("sm_75", 65_536), &H200, true, other).unwrap_err();
    assert!(e.contains("PTX found: compute_70"), "{e}");

    let unreadable = || vec![(PathBuf::from("k/topk.fatbin"), Err("cannot read it".into()))];
    let e = decide(&sm("sm_75", 65_536), &H200, true, unreadable).unwrap_err();
    assert!(e.contains("k/topk.fatbin: cannot read it"), "{e}");

    let e = decide(&sm("sm_75", 65_536), &H200, false, never).unwrap_err();
    assert!(e.contains("--no-ptx"), "{e}");

    let arch_specific = Card {
        arch: "sm_90a",
        ..H200
    };
    let e = decide(&sm("sm_75", 65_536), &arch_specific, true, never).unwrap_err();
    assert!(e.contains("not an sm_XX architecture"), "{e}");
}

#[test]
fn scanning_a_folder_without_fatbins_names_each_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let scan = scan_fatbins(dir.path());
    assert_eq!(scan.len(), 3);
    assert!(scan
        .iter()
        .all(|(p, r)| p.extension().is_some_and(|e| e == "fatbin") && r.is_err()));
    let e = decide(&sm("sm_75", 65_536), &H200, true, || scan).unwrap_err();
    assert!(e.contains("topk.fatbin: cannot read it"), "{e}");
}
