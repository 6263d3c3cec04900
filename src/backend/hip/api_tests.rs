use super::*;

fn fixture_dir(files: &[(&str, Family)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/hip/testdata");
    for (name, family) in files {
        std::fs::copy(data.join(name), code_object_path(dir.path(), *family)).unwrap();
    }
    dir
}

/// No AMD GPU exists where this was written: there, `open` must be a clear error, not
/// a panic. On an AMD machine the same test checks the empty-directory error instead.
#[test]
fn open_without_device_or_code_objects_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = HipApi::open(0, dir.path()).unwrap_err();
    let msg = err.to_string();
    eprintln!("HipApi::open here: {msg}");
    if HipApi::device_count().unwrap() == 0 {
        assert!(matches!(err, BackendError::Device(_)), "{msg}");
        assert!(msg.contains("no HIP device"), "{msg}");
        assert!(msg.contains("/dev/kfd"), "{msg}");
    } else {
        assert!(msg.contains("no HIP code objects in"), "{msg}");
        assert!(msg.contains("cargo xtask build --target gfx"), "{msg}");
    }
}

#[test]
fn an_ordinal_past_the_last_device_is_an_error() {
    let dir = fixture_dir(&[("gfx906.co", Family::Topk)]);
    let msg = HipApi::open(1 << 20, dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("no HIP device") || msg.contains("requested, but the runtime sees"),
        "{msg}"
    );
}

#[test]
fn the_target_comes_from_the_code_objects() {
    let dir = fixture_dir(&[
        ("gfx950.co", Family::Scores),
        ("gfx950.co", Family::Attention),
    ]);
    let (t, first) = resolve_target_with(dir.path(), (9, 5), None).unwrap();
    assert_eq!(
        (t.to_string(), first),
        ("gfx950".to_string(), Family::Scores)
    );
    // The override agrees: fine; disagrees: an error naming both.
    assert!(resolve_target_with(dir.path(), (9, 5), Some("gfx950")).is_ok());
    let msg = resolve_target_with(dir.path(), (9, 5), Some("gfx906"))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("QSA_HIP_ARCH=gfx906") && msg.contains("gfx950"),
        "{msg}"
    );
}

#[test]
fn mixed_or_missing_code_objects_are_errors_that_say_what_to_run() {
    let mixed = fixture_dir(&[("gfx906.co", Family::Topk), ("gfx1201.co", Family::Scores)]);
    let msg = resolve_target_with(mixed.path(), (9, 0), None)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("topk.co is for gfx906") && msg.contains("gfx1201"),
        "{msg}"
    );

    let empty = tempfile::tempdir().unwrap();
    let msg = resolve_target_with(empty.path(), (12, 0), None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("no HIP code objects in"), "{msg}");
    assert!(
        msg.contains("topk.co, block_scores.co, selection_attention.co"),
        "{msg}"
    );
    assert!(msg.contains("cargo xtask build --target gfx120N"), "{msg}");

    let junk = tempfile::tempdir().unwrap();
    std::fs::write(
        code_object_path(junk.path(), Family::Topk),
        b"not a code object",
    )
    .unwrap();
    let msg = resolve_target_with(junk.path(), (9, 0), None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("topk.co: neither"), "{msg}");
    // An unreadable header is accepted only when the override names the target.
    let (t, _) = resolve_target_with(junk.path(), (9, 0), Some("gfx90a:xnack-")).unwrap();
    assert_eq!(t.features, vec!["xnack-".to_string()]);

    let msg = read_code_object(&code_object_path(empty.path(), Family::Attention), "gfx906")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("selection_attention.co not found"), "{msg}");
    assert!(msg.contains("cargo xtask build --target gfx906"), "{msg}");
}

#[test]
fn launch_dims_outside_hip_limits_are_shape_errors() {
    let d = |grid, block, shared_bytes| LaunchDims {
        grid,
        block,
        shared_bytes,
    };
    let ok = |dims: LaunchDims| check_dims("k", &dims, 65536);
    assert!(ok(d((65536, 65536, 1), (256, 1, 1), 65536)).is_ok());
    for bad in [
        d((0, 1, 1), (64, 1, 1), 0),
        d((1, 1, 1), (64, 0, 1), 0),
        d((1, 65537, 1), (64, 1, 1), 0),
        d((1 << 31, 1, 1), (1, 1, 1), 0),
        d((1 << 24, 1, 1), (256, 1, 1), 0),
        d((1, 1, 1), (64, 1, 1), 65537),
    ] {
        let err = ok(bad).unwrap_err();
        assert!(matches!(err, BackendError::Shape(_)), "{bad:?}: {err}");
        assert!(err.to_string().contains("launch of k"), "{err}");
    }
}

#[test]
fn runtime_versions_decode() {
    assert_eq!(decode_version(50221153), "5.2.21153");
    assert_eq!(decode_version(60443482), "6.4.43482");
    assert_eq!(decode_version(70051831), "7.0.51831");
    assert_eq!(
        describe_versions(60443482, 60443482),
        "HIP runtime 6.4.43482, driver 6.4.43482"
    );
}
