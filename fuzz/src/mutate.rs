//! Mutations of one input: byte flips, interesting bytes, deletions, duplications, splices
//! from another input, integer boundary substitutions (YAML numbers and .npy header sizes)
//! and dictionary words. One to four are stacked per try.

use fastrand::Rng;

/// Integers at the edges of every width the readers parse, and the reviewers' 2^62.
const INTEGERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "7",
    "64",
    "127",
    "128",
    "255",
    "256",
    "4096",
    "4097",
    "8192",
    "8193",
    "32767",
    "32768",
    "65535",
    "65536",
    "1048576",
    "1048577",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "4611686018427387904",
    "99999999999999999999999999",
    "1e9",
    "0.5",
    "-0.0",
];

const BYTES: &[u8] = b"\x00\xff\x7f\x80\n :-{}[],'\"&*!#|>?%@\t\\";

/// Largest input the mutator grows to (the seeds themselves may be larger).
pub const MAX_LEN: usize = 1 << 17;

/// Mutate `data` in place (`other` is another corpus entry for splices).
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8], dict: &[&str]) {
    for _ in 0..rng.usize(1..=4) {
        one(rng, data, other, dict);
    }
    data.truncate(MAX_LEN);
}

fn one(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8], dict: &[&str]) {
    let len = data.len();
    match rng.u8(0..9) {
        0 if len > 0 => {
            let i = rng.usize(0..len);
            data[i] ^= 1 << rng.u8(0..8);
        }
        1 if len > 0 => {
            let i = rng.usize(0..len);
            data[i] = BYTES[rng.usize(0..BYTES.len())];
        }
        2 if len > 0 => {
            let (a, b) = range(rng, len);
            data.drain(a..b);
        }
        3 if len > 0 => {
            let (a, b) = range(rng, len);
            let chunk = data[a..b].to_vec();
            let at = rng.usize(0..=len);
            data.splice(at..at, chunk);
        }
        4 if !other.is_empty() => {
            let (a, b) = range(rng, other.len());
            let at = rng.usize(0..=len);
            if rng.bool() {
                data.splice(at..at, other[a..b].iter().copied());
            } else {
                let end = (at + (b - a)).min(len);
                data.splice(at..end, other[a..b].iter().copied());
            }
        }
        5 => replace_run(
            rng,
            data,
            |c| c.is_ascii_digit() || c == b'-',
            |rng| INTEGERS[rng.usize(0..INTEGERS.len())].as_bytes().to_vec(),
        ),
        6 => replace_run(
            rng,
            data,
            |c| c.is_ascii_alphanumeric() || c == b'_',
            |rng| dict[rng.usize(0..dict.len())].as_bytes().to_vec(),
        ),
        7 if len > 0 => {
            // A line deleted or repeated: YAML's structure is lines.
            let lines: Vec<usize> = std::iter::once(0)
                .chain(
                    data.iter()
                        .enumerate()
                        .filter(|(_, c)| **c == b'\n')
                        .map(|(i, _)| i + 1),
                )
                .filter(|i| *i < len)
                .collect();
            let s = lines[rng.usize(0..lines.len())];
            let e = data[s..]
                .iter()
                .position(|c| *c == b'\n')
                .map_or(len, |p| s + p + 1);
            if rng.bool() {
                data.drain(s..e);
            } else {
                let line = data[s..e].to_vec();
                data.splice(s..s, line);
            }
        }
        8 if len >= 12 => {
            // The .npy header length field (or any 2/4 bytes): a boundary value.
            let at = if rng.bool() { 8 } else { rng.usize(0..len - 4) };
            let v: u32 =
                [0, 1, 0xffff, 0x1_0000, 0x7fff_ffff, u32::MAX, len as u32][rng.usize(0..7)];
            let w = if rng.bool() { 2 } else { 4 };
            data[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
        }
        _ => {
            let at = rng.usize(0..=len);
            let w = dict[rng.usize(0..dict.len())].as_bytes();
            data.splice(at..at, w.iter().copied());
        }
    }
}

/// A random non-empty range of `0..len`, short more often than long.
fn range(rng: &mut Rng, len: usize) -> (usize, usize) {
    let a = rng.usize(0..len);
    let max = (len - a).min(if rng.u8(0..4) == 0 { len } else { 32 });
    (a, a + rng.usize(1..=max.max(1)))
}

/// Replace one maximal run of bytes matching `class` (picked at random) with `make()`.
fn replace_run(
    rng: &mut Rng,
    data: &mut Vec<u8>,
    class: impl Fn(u8) -> bool,
    make: impl Fn(&mut Rng) -> Vec<u8>,
) {
    let starts: Vec<usize> = (0..data.len())
        .filter(|&i| class(data[i]) && (i == 0 || !class(data[i - 1])))
        .collect();
    if starts.is_empty() {
        return;
    }
    let s = starts[rng.usize(0..starts.len())];
    let e = data[s..]
        .iter()
        .position(|c| !class(*c))
        .map_or(data.len(), |p| s + p);
    let new = make(rng);
    data.splice(s..e, new);
}
