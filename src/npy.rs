//! A minimal reader of NumPy `.npy` files (format 1.0-3.0, C order, little-endian f32 /
//! i32 / f64 / i64), so a case can take scores or keys captured from a real model.

use std::path::Path;

/// A loaded array: shape and values converted to the requested element type.
#[derive(Debug)]
pub struct Npy<T> {
    pub shape: Vec<usize>,
    pub data: Vec<T>,
}

fn header_field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

fn parse(bytes: &[u8], path: &Path) -> Result<(String, bool, Vec<usize>, usize), String> {
    let bad = |why: &str| format!("{}: not a readable .npy file: {why}", path.display());
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing the \\x93NUMPY magic"));
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(&format!("format version {v} is not supported"))),
    };
    let header = std::str::from_utf8(
        bytes
            .get(start..start + len)
            .ok_or_else(|| bad("truncated header"))?,
    )
    .map_err(|_| bad("header is not UTF-8"))?;
    let descr = header_field(header, "descr").ok_or_else(|| bad("no descr"))?;
    let descr = descr
        .trim_start_matches(['\'', '"'])
        .split(['\'', '"'])
        .next()
        .unwrap_or("")
        .to_string();
    let fortran = header_field(header, "fortran_order").is_some_and(|v| v.starts_with("True"));
    let shape_txt = header_field(header, "shape").ok_or_else(|| bad("no shape"))?;
    let inner = shape_txt
        .trim_start_matches('(')
        .split(')')
        .next()
        .unwrap_or("");
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| bad(&format!("bad shape `{shape_txt}`")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((descr, fortran, shape, start + len))
}

/// Read an .npy file as f32 (from <f4 or <f8) or i32 (from <i4 or <i8), by `T`.
pub fn read<T: NpyElem>(path: &Path) -> Result<Npy<T>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (descr, fortran, shape, off) = parse(&bytes, path)?;
    if fortran {
        return Err(format!(
            "{}: Fortran-order arrays are not supported: save with np.ascontiguousarray",
            path.display()
        ));
    }
    let count: usize = shape.iter().product();
    let width = match descr.as_str() {
        "<f4" | "<i4" => 4,
        "<f8" | "<i8" => 8,
        other => {
            return Err(format!(
            "{}: dtype `{other}` is not supported: use little-endian float32/float64/int32/int64",
            path.display()
        ))
        }
    };
    let body = &bytes[off..];
    if body.len() < count * width {
        return Err(format!(
            "{}: truncated: shape {shape:?} needs {} bytes, file has {}",
            path.display(),
            count * width,
            body.len()
        ));
    }
    let data = (0..count)
        .map(|i| T::from_le(&descr, &body[i * width..(i + 1) * width]))
        .collect::<Result<Vec<T>, String>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Npy { shape, data })
}

/// Element types `read` can produce.
pub trait NpyElem: Sized {
    fn from_le(descr: &str, b: &[u8]) -> Result<Self, String>;
}

impl NpyElem for f32 {
    fn from_le(descr: &str, b: &[u8]) -> Result<f32, String> {
        match descr {
            "<f4" => Ok(f32::from_le_bytes(b.try_into().expect("4 bytes"))),
            "<f8" => Ok(f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32),
            other => Err(format!("expected a float array, got dtype `{other}`")),
        }
    }
}

impl NpyElem for i32 {
    fn from_le(descr: &str, b: &[u8]) -> Result<i32, String> {
        match descr {
            "<i4" => Ok(i32::from_le_bytes(b.try_into().expect("4 bytes"))),
            "<i8" => i32::try_from(i64::from_le_bytes(b.try_into().expect("8 bytes")))
                .map_err(|_| "int64 value out of int32 range".to_string()),
            other => Err(format!("expected an integer array, got dtype `{other}`")),
        }
    }
}

/// Write an array as .npy, `descr` e.g. "<f4" (used by tests and by `qsa run --dump`).
pub fn write_le(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> std::io::Result<()> {
    let shape_txt = match shape {
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_txt}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    std::fs::write(path, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let vals = [1.5f32, -0.0, f32::NAN, 3.0, 4.0, 5.0];
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        write_le(&p, "<f4", &[2, 3], &bytes).unwrap();
        let a: Npy<f32> = read(&p).unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data[0], 1.5);
        assert_eq!(a.data[1].to_bits(), 0x8000_0000);
        assert!(a.data[2].is_nan());
        let e = read::<i32>(&p).unwrap_err();
        assert!(e.contains("expected an integer array"), "{e}");
        std::fs::write(&p, b"not numpy").unwrap();
        assert!(read::<f32>(&p).unwrap_err().contains("magic"));
    }
}
