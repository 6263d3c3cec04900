use super::*;

fn f32_bytes(vals: &[f32]) -> Vec<u8> {
    vals.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn round_trips_and_rejects_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.npy");
    let vals = [1.5f32, -0.0, f32::NAN, 3.0, 4.0, 5.0];
    write_le(&p, "<f4", &[2, 3], &f32_bytes(&vals)).unwrap();
    let a: Npy<f32> = read(&p).unwrap();
    assert_eq!(a.shape, vec![2, 3]);
    assert_eq!(a.data[0], 1.5);
    assert_eq!(a.data[1].to_bits(), 0x8000_0000);
    assert!(a.data[2].is_nan());
    let h = read_header(&p).unwrap();
    assert_eq!((h.dtype, h.shape), (Dtype::F4, vec![2, 3]));
    let e = read::<i32>(&p).unwrap_err();
    assert!(e.contains("expected an integer array"), "{e}");
    std::fs::write(&p, b"not numpy").unwrap();
    assert!(read::<f32>(&p).unwrap_err().contains("magic"));
    assert!(read_header(&p).unwrap_err().contains("magic"));
}

/// The reviewers' file: a header claiming 2^62 elements made `count * width` overflow
/// (a panic at src/npy.rs:95). Sizes now come from the header only after checking.
#[test]
fn a_header_claiming_more_than_memory_is_an_error_not_an_overflow() {
    for shape in [
        "(4611686018427387904,)",
        "(18446744073709551615,)",
        "(4294967296, 4294967296)",
        "(99999999999999999999999,)",
    ] {
        let bytes = with_header(
            &format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"),
            &[0; 16],
        );
        let e = decode::<f32>(&bytes).unwrap_err();
        assert!(
            e.contains("more elements than memory")
                || e.contains("more bytes than memory")
                || e.contains("is not a size"),
            "{shape}: {e}"
        );
        let e = parse_header(&bytes, u64::MAX).unwrap_err();
        assert!(!e.is_empty(), "{shape}");
    }
    // 2^62 f32 is 2^64 bytes: the element count fits, the byte count does not.
    let bytes = with_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }",
        &[],
    );
    assert!(decode::<f32>(&bytes)
        .unwrap_err()
        .contains("more bytes than memory"));
}

#[test]
fn each_problem_is_named() {
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
            &[0; 8],
            "dtype `>f4` is not supported",
        ),
        (
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
            &[0; 8],
            "Fortran-order",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
            &[0; 8],
            "truncated: shape [3] of <f4 needs 12 bytes of data, the file has 8",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
            &[0; 8],
            "too long: shape [1] of <f4 needs 4 bytes of data, the file has 8",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
            &[0; 8],
            "`-1` is not a size",
        ),
        (
            "{'descr': '<f4', 'shape': (2,), }",
            &[0; 8],
            "no 'fortran_order'",
        ),
        ("not a dict", &[], "not a Python dict"),
    ];
    for (dict, data, want) in cases {
        let e = decode::<f32>(&with_header(dict, data)).unwrap_err();
        assert!(e.contains(want), "{dict}: `{e}` lacks `{want}`");
    }
    let e = decode::<f32>(&encode("<i4", &[2], &[0; 8])).unwrap_err();
    assert!(e.contains("expected a float array"), "{e}");
    let big = (i64::from(i32::MAX) + 1).to_le_bytes();
    let e = decode::<i32>(&encode("<i8", &[1], &big)).unwrap_err();
    assert!(e.contains("out of int32 range"), "{e}");
    // Cut anywhere, a valid file is an error, never a panic.
    let good = encode("<f8", &[2, 2], &[1; 32]);
    for cut in 0..good.len() {
        assert!(decode::<f32>(&good[..cut]).is_err(), "cut at {cut}");
    }
    assert_eq!(decode::<f32>(&good).unwrap().data.len(), 4);
}

#[test]
fn a_long_header_is_not_echoed_whole() {
    let junk = "x".repeat(5000);
    let e = decode::<f32>(&with_header(&format!("{{'descr': '{junk}'}}"), &[])).unwrap_err();
    assert!(e.len() < 300, "{} bytes: {e}", e.len());
}
