//! The hashed Python locks of `.ci/` agree with the files people edit: every pin of
//! `requirements*.in` is in its `requirements*.txt` at the same version, and every package
//! of the lock carries sha256 hashes, so `pip install --require-hashes` installs exactly what
//! the `.in` file says. pip itself refuses a file whose hash is not listed; what it cannot
//! see is a `.in` edited without regenerating the lock (the lock would silently win).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn ci_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join(".ci")
}

/// `name==version` pins of a requirements file, names lower-cased with `_`/`.` as `-`
/// (pip's normalisation), each with the sha256 hashes listed under it.
fn pins(text: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut out: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    let mut last: Option<String> = None;
    for line in text.lines() {
        let line = line
            .split('#')
            .next()
            .unwrap()
            .trim()
            .trim_end_matches('\\');
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(hash) = line.strip_prefix("--hash=sha256:") {
            let name = last.as_ref().expect("a --hash line follows a pin");
            out.get_mut(name).unwrap().1.push(hash.to_string());
        } else if let Some((name, version)) = line.split_once("==") {
            let name = name.trim().to_lowercase().replace(['_', '.'], "-");
            out.insert(name.clone(), (version.trim().to_string(), Vec::new()));
            last = Some(name);
        } else {
            panic!("unexpected line in a requirements file: `{line}` (pin NAME==VERSION only)");
        }
    }
    out
}

#[test]
fn python_locks_pin_what_their_inputs_say_with_hashes() {
    let mut checked = 0;
    for stem in ["requirements", "requirements-test"] {
        let read = |ext: &str| {
            let p = ci_dir().join(format!("{stem}.{ext}"));
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let wanted = pins(&read("in"));
        let locked = pins(&read("txt"));
        assert!(!wanted.is_empty(), ".ci/{stem}.in pins nothing");
        let regen = format!(
            "regenerate .ci/{stem}.txt with the pip-compile command in .ci/requirements.in"
        );
        for (name, (version, _)) in &wanted {
            let Some((have, _)) = locked.get(name) else {
                panic!(".ci/{stem}.in pins {name}=={version} but .ci/{stem}.txt lacks it: {regen}");
            };
            assert_eq!(
                have, version,
                ".ci/{stem}.in pins {name}=={version} but .ci/{stem}.txt has {name}=={have}: {regen}"
            );
        }
        for (name, (version, hashes)) in &locked {
            assert!(
                !hashes.is_empty(),
                ".ci/{stem}.txt pins {name}=={version} without --hash=sha256: lines: {regen}"
            );
            for h in hashes {
                assert!(
                    h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()),
                    ".ci/{stem}.txt: `{h}` ({name}) is not a sha256: {regen}"
                );
            }
            checked += 1;
        }
    }
    // The five tools of docs/ci.md ("Python tools"): a parser that finds fewer checked nothing.
    assert!(checked >= 5, "only {checked} locked packages found in .ci/");
}
