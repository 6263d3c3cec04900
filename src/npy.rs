//! A minimal reader of NumPy `.npy` files (format 1.0-3.0, C order, little-endian f32 /
//! i32 / f64 / i64), so a case can take scores or keys captured from a real model.
//!
//! Every size comes from the header only after it is checked against the file: the element
//! count and the byte count are computed with checked arithmetic and must equal the bytes
//! the file holds after its header (a header claiming `(4611686018427387904,)` is an error,
//! not an overflow). `read_header` checks a file from its header and its length alone, so a
//! matrix can check every input when it is loaded, before any work.

use crate::echo;
use std::io::Read;
use std::path::Path;

/// A loaded array: shape and values converted to the requested element type.
#[derive(Debug)]
pub struct Npy<T> {
    pub shape: Vec<usize>,
    pub data: Vec<T>,
}

/// The element types this reader takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F4,
    F8,
    I4,
    I8,
}

impl Dtype {
    fn from_descr(d: &str) -> Option<Dtype> {
        match d {
            "<f4" => Some(Dtype::F4),
            "<f8" => Some(Dtype::F8),
            "<i4" => Some(Dtype::I4),
            "<i8" => Some(Dtype::I8),
            _ => None,
        }
    }
    pub fn descr(self) -> &'static str {
        match self {
            Dtype::F4 => "<f4",
            Dtype::F8 => "<f8",
            Dtype::I4 => "<i4",
            Dtype::I8 => "<i8",
        }
    }
    pub fn width(self) -> usize {
        match self {
            Dtype::F4 | Dtype::I4 => 4,
            Dtype::F8 | Dtype::I8 => 8,
        }
    }
}

/// What the header says, checked against the file's length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    /// Byte offset of the data (the end of the header).
    pub data_offset: usize,
}

/// numpy itself refuses headers over 10,000 bytes unless told otherwise; past this the
/// file is not one we wrote or numpy wrote.
const MAX_HEADER: usize = 1 << 20;

/// The header of an .npy file from its first bytes (`prefix`, at least up to the end of the
/// header) and the file's total length in bytes.
pub fn parse_header(prefix: &[u8], file_len: u64) -> Result<Header, String> {
    if prefix.len() < 10 || &prefix[..6] != b"\x93NUMPY" {
        return Err("missing the \\x93NUMPY magic: not an .npy file (save with np.save)".into());
    }
    let (len, start) = match prefix[6] {
        1 => (u16::from_le_bytes([prefix[8], prefix[9]]) as usize, 10),
        2 | 3 if prefix.len() >= 12 => (
            u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize,
            12,
        ),
        2 | 3 => return Err("truncated header".into()),
        v => return Err(format!("format version {v} is not supported (1, 2, 3 are)")),
    };
    if len > MAX_HEADER {
        return Err(format!(
            "header of {len} bytes is over the {MAX_HEADER}-byte limit"
        ));
    }
    let end = start + len; // both are small: no overflow
    let text = prefix
        .get(start..end)
        .ok_or_else(|| format!("truncated header: it claims {len} bytes"))?;
    let header = std::str::from_utf8(text).map_err(|_| "header is not UTF-8".to_string())?;
    let header = header.trim();
    if !(header.starts_with('{') && header.ends_with('}')) {
        return Err(format!(
            "header `{}` is not a Python dict",
            echo::value(header)
        ));
    }
    let descr = quoted(field(header, "descr").ok_or("header has no 'descr'")?)
        .ok_or("header's 'descr' is not a quoted string")?;
    let dtype = Dtype::from_descr(descr).ok_or_else(|| {
        format!(
            "dtype `{}` is not supported: save little-endian float32, float64, int32 or int64 \
             (arr.astype('<f4'))",
            echo::value(descr)
        )
    })?;
    let fortran = field(header, "fortran_order").ok_or("header has no 'fortran_order'")?;
    if fortran.starts_with("True") {
        return Err(
            "Fortran-order arrays are not supported: save np.ascontiguousarray(arr)".into(),
        );
    }
    if !fortran.starts_with("False") {
        return Err("header's 'fortran_order' is neither True nor False".into());
    }
    let shape_txt = field(header, "shape").ok_or("header has no 'shape'")?;
    let shape = parse_shape(shape_txt)?;
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("shape {shape:?} has more elements than memory can address"))?;
    let need = count
        .checked_mul(dtype.width())
        .and_then(|b| u64::try_from(b).ok())
        .ok_or_else(|| format!("shape {shape:?} needs more bytes than memory can address"))?;
    let have = file_len.saturating_sub(end as u64);
    if have != need {
        let what = if have < need { "truncated" } else { "too long" };
        return Err(format!(
            "{what}: shape {shape:?} of {} needs {need} bytes of data, the file has {have}",
            dtype.descr()
        ));
    }
    Ok(Header {
        dtype,
        shape,
        data_offset: end,
    })
}

/// The text after `'key':` in a header dict.
fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    Some(header[at..].trim_start().strip_prefix(':')?.trim_start())
}

/// The string at the start of `s` in single or double quotes.
fn quoted(s: &str) -> Option<&str> {
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let rest = &s[1..];
    rest.find(q).map(|e| &rest[..e])
}

/// `(2, 3)`, `(5,)` or `()` as dimensions.
fn parse_shape(txt: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("shape `{}` is not a tuple of sizes", echo::value(txt));
    let inner = txt.strip_prefix('(').ok_or_else(bad)?;
    let inner = &inner[..inner.find(')').ok_or_else(bad)?];
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L').parse::<usize>().map_err(|_| {
                format!(
                    "shape `{}`: `{}` is not a size",
                    echo::value(txt),
                    echo::value(s)
                )
            })
        })
        .collect()
}

/// The header of the .npy file at `path`, read from its first bytes and checked against
/// its length (the data is not read).
pub fn read_header(path: &Path) -> Result<Header, String> {
    let fail = |e: String| format!("{}: {e}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(fail("not a regular file".into()));
    }
    let mut f = std::fs::File::open(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    let mut prefix = vec![0u8; 12];
    let got = read_up_to(&mut f, &mut prefix).map_err(|e| fail(e.to_string()))?;
    prefix.truncate(got);
    // Read the rest of the header: its length is in the prefix (checked by parse_header).
    let header_end = match prefix.get(6) {
        Some(1) if got >= 10 => 10 + u16::from_le_bytes([prefix[8], prefix[9]]) as usize,
        Some(2 | 3) if got >= 12 => {
            12 + (u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize)
                .min(MAX_HEADER + 1)
        }
        _ => got,
    };
    if header_end > got {
        let mut rest = vec![0u8; header_end - got];
        let n = read_up_to(&mut f, &mut rest).map_err(|e| fail(e.to_string()))?;
        prefix.extend_from_slice(&rest[..n]);
    }
    parse_header(&prefix, meta.len()).map_err(fail)
}

fn read_up_to(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Decode a whole .npy file held in memory as `T`.
pub fn decode<T: NpyElem>(bytes: &[u8]) -> Result<Npy<T>, String> {
    let h = parse_header(bytes, bytes.len() as u64)?;
    T::accepts(h.dtype)?;
    let width = h.dtype.width();
    // parse_header checked that exactly count * width bytes follow the header.
    let data = bytes[h.data_offset..]
        .chunks_exact(width)
        .map(|b| T::from_le(h.dtype, b))
        .collect::<Result<Vec<T>, String>>()?;
    Ok(Npy {
        shape: h.shape,
        data,
    })
}

/// Read an .npy file as f32 (from <f4 or <f8) or i32 (from <i4 or <i8), by `T`.
pub fn read<T: NpyElem>(path: &Path) -> Result<Npy<T>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    decode(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Element types `read` can produce.
pub trait NpyElem: Sized {
    /// Whether an array of `dtype` converts to this type (the error says what would).
    fn accepts(dtype: Dtype) -> Result<(), String>;
    /// One element of `dtype` (`b` holds exactly `dtype.width()` bytes).
    fn from_le(dtype: Dtype, b: &[u8]) -> Result<Self, String>;
}

fn bytes4(b: &[u8]) -> [u8; 4] {
    let mut a = [0; 4];
    a.copy_from_slice(&b[..4]);
    a
}

fn bytes8(b: &[u8]) -> [u8; 8] {
    let mut a = [0; 8];
    a.copy_from_slice(&b[..8]);
    a
}

impl NpyElem for f32 {
    fn accepts(dtype: Dtype) -> Result<(), String> {
        match dtype {
            Dtype::F4 | Dtype::F8 => Ok(()),
            d => Err(format!(
                "expected a float array (<f4 or <f8), got dtype `{}`: save arr.astype('<f4')",
                d.descr()
            )),
        }
    }
    fn from_le(dtype: Dtype, b: &[u8]) -> Result<f32, String> {
        Self::accepts(dtype)?;
        Ok(match dtype {
            Dtype::F8 => f64::from_le_bytes(bytes8(b)) as f32,
            _ => f32::from_le_bytes(bytes4(b)),
        })
    }
}

impl NpyElem for i32 {
    fn accepts(dtype: Dtype) -> Result<(), String> {
        match dtype {
            Dtype::I4 | Dtype::I8 => Ok(()),
            d => Err(format!(
                "expected an integer array (<i4 or <i8), got dtype `{}`: save arr.astype('<i4')",
                d.descr()
            )),
        }
    }
    fn from_le(dtype: Dtype, b: &[u8]) -> Result<i32, String> {
        Self::accepts(dtype)?;
        match dtype {
            Dtype::I8 => {
                let v = i64::from_le_bytes(bytes8(b));
                i32::try_from(v).map_err(|_| format!("int64 value {v} is out of int32 range"))
            }
            _ => Ok(i32::from_le_bytes(bytes4(b))),
        }
    }
}

/// The bytes of an .npy file of `descr` and `shape` holding `data` (tests and fuzz seeds).
pub fn encode(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
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
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_txt}, }}");
    with_header(&dict, data)
}

/// A version-1 file whose header dict is `dict`, padded as numpy pads it (tests build bad
/// headers with it).
pub(crate) fn with_header(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Write an f32 or i32 array as .npy (used by tests and by `qsa run --dump`).
pub fn write_le(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, encode(descr, shape, data))
}

#[cfg(test)]
mod tests;
