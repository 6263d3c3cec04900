//! compute-sanitizer's text output -> findings and summaries.
//!
//! The format (every line of the tool starts with `=========`; a finding is a header line,
//! then indented detail lines, then a line with nothing after the prefix), as NVIDIA's
//! compute-sanitizer prints it:
//!
//! ```text
//! ========= COMPUTE-SANITIZER
//! ========= Invalid __global__ write of size 4 bytes
//! =========     at reverseArray(const float *, float *, int)+0x70 in sanitizer_oob.cu:25
//! =========     by thread (232,0,0) in block (3,0,0)
//! =========     Address 0x7f5c92600fa0 is out of bounds
//! =========
//! ========= Error: Race reported between Write access at k+0x140
//! =========     and Read access at k+0xe0 [4 hazards]
//! ========= ERROR SUMMARY: 3 errors
//! ========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
//! ```
//!
//! A kernel's location takes three shapes across releases and build options: `at
//! kernel(args)+0x70 in file.cu:25` (with -lineinfo), `at 0x90 in kernel(args)` (without),
//! and the old cuda-memcheck `at 0x000000c8 in path.cuh:75:void kernel<T>(args)`. The tests
//! use real output of each (tests.rs says where each came from).

/// One thing compute-sanitizer reported: an error (memcheck, initcheck, synccheck), a
/// hazard (racecheck errors and warnings), an API error ("Program hit ...").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The header line without the prefix: "Invalid __global__ write of size 4 bytes".
    pub what: String,
    /// The kernel it names, without arguments ("reverseArray"), if it names one.
    pub kernel: Option<String>,
    /// "by thread (232,0,0) in block (3,0,0)", if given.
    pub thread: Option<String>,
    /// The detail lines worth reading (address, the racing access), backtraces left out.
    pub details: Vec<String>,
    /// The line of the merged log it started on (0-based): attribution to a unit.
    pub line: usize,
}

/// What one run of the tool printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// `ERROR SUMMARY: N errors` (memcheck, initcheck, synccheck; racecheck prints it too).
    pub errors: Option<u64>,
    /// `RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)`: (N, E, W).
    pub hazards: Option<(u64, u64, u64)>,
}

impl Report {
    /// Did the tool get to its summary (it finished), and does the summary count anything?
    pub fn summary_count(&self) -> Option<u64> {
        match (self.errors, self.hazards) {
            (None, None) => None,
            (e, h) => Some(e.unwrap_or(0).max(h.map_or(0, |(n, e, w)| n.max(e + w)))),
        }
    }
}

const PREFIX: &str = "=========";

/// Lines of the tool that are neither findings nor their details.
fn is_status(body: &str) -> bool {
    body == "COMPUTE-SANITIZER"
        || body == "CUDA-MEMCHECK"
        || body.starts_with("ERROR SUMMARY:")
        || body.starts_with("RACECHECK SUMMARY:")
        || body.starts_with("LEAK SUMMARY:")
        // The target exited non-zero: qsa's own exit 1 when a check failed, which its
        // results already say.
        || body.starts_with("Target application returned an error")
}

/// Detail lines of a finding (indented; the old cuda-memcheck did not indent them).
fn is_detail(raw: &str, body: &str) -> bool {
    raw.starts_with("  ")
        || [
            "at ",
            "by thread",
            "Address ",
            "and ",
            "Saved host backtrace",
            "Host Frame",
        ]
        .iter()
        .any(|p| body.starts_with(p))
}

pub fn parse(text: &str) -> Report {
    let mut report = Report::default();
    let mut current: Option<Finding> = None;
    for (i, line) in text.lines().enumerate() {
        let Some(raw) = line.strip_prefix(PREFIX) else {
            continue;
        };
        let body = raw.trim();
        if body.is_empty() {
            report.findings.extend(current.take());
            continue;
        }
        if let Some(n) = count_after(body, "ERROR SUMMARY:") {
            report.errors = Some(n);
        }
        if let Some(rest) = body.strip_prefix("RACECHECK SUMMARY:") {
            report.hazards = Some(hazard_summary(rest));
        }
        if is_status(body) {
            report.findings.extend(current.take());
            continue;
        }
        match current.as_mut() {
            Some(f) if is_detail(raw, body) => add_detail(f, body),
            _ => {
                report.findings.extend(current.take());
                let mut f = Finding {
                    what: body.to_string(),
                    kernel: None,
                    thread: None,
                    details: Vec::new(),
                    line: i,
                };
                // racecheck names the kernel in the header: "... Write access at k+0x140".
                if let Some((_, at)) = body.split_once("access at ") {
                    f.kernel = kernel_of(at);
                }
                current = Some(f);
            }
        }
    }
    report.findings.extend(current);
    report
}

fn add_detail(f: &mut Finding, body: &str) {
    if let Some(at) = body.strip_prefix("at ") {
        if f.kernel.is_none() {
            f.kernel = kernel_of(at);
        }
    } else if body.starts_with("by thread") {
        f.thread.get_or_insert_with(|| body.to_string());
    } else if !(body.starts_with("Saved host backtrace")
        || body.starts_with("Host Frame")
        || body.starts_with("Device Frame")
        || body.starts_with("in /"))
        && f.details.len() < 4
    {
        f.details.push(body.to_string());
    }
}

/// The kernel's name in a location: `k(args)+0x70 in f.cu:25`, `0x90 in k(args)`,
/// `0xc8 in path.cuh:75:void k<T>(args)`, `k():0x160 in f.cu:6`.
fn kernel_of(at: &str) -> Option<String> {
    let at = at.trim();
    let sig = if at.starts_with("0x") {
        at.split_once(" in ")?.1
    } else {
        at
    };
    // Up to the argument list (or the offset, for a name printed without one).
    let end = [sig.find('('), sig.find("+0x"), sig.find(" in ")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(sig.len());
    let head = &sig[..end];
    // "path.cuh:75:void k<T>" -> "k<T>".
    let name = head.rsplit(':').next()?.split_whitespace().last()?;
    (!name.is_empty() && !name.starts_with("0x")).then(|| name.to_string())
}

/// "ERROR SUMMARY: 3 errors" -> 3.
fn count_after(body: &str, label: &str) -> Option<u64> {
    body.strip_prefix(label)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// " 1 hazard displayed (1 error, 0 warnings)" -> (1, 1, 0); a part it cannot read counts
/// as 1, so a changed format fails the run instead of passing it.
fn hazard_summary(rest: &str) -> (u64, u64, u64) {
    let number_before = |word: &str| -> Option<u64> {
        let words: Vec<&str> = rest
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
            .filter(|w| !w.is_empty())
            .collect();
        let at = words.iter().position(|w| w.starts_with(word))?;
        words.get(at.checked_sub(1)?)?.parse().ok()
    };
    (
        number_before("hazard").unwrap_or(1),
        number_before("error").unwrap_or(1),
        number_before("warning").unwrap_or(1),
    )
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
