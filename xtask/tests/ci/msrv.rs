//! The stated minimum Rust (`rust-version`) can build the locked tree.

use super::*;

/// Cargo.toml's `rust-version` is at least what every package Cargo.lock resolves for this
/// host declares (cargo metadata), so the stated minimum can build the locked tree; CI's
/// msrv job builds with exactly that version, which checks the other side.
#[test]
fn rust_version_covers_the_lock() {
    // "1.89" is "1.89.0": compare (major, minor, patch).
    let parse = |v: &str| -> Vec<u64> {
        let mut p: Vec<u64> = v.split('.').map(|x| x.parse().unwrap()).collect();
        p.resize(3, 0);
        p
    };
    let host = String::from_utf8(Command::new("rustc").arg("-vV").output().unwrap().stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host");
    let o = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
        ])
        .arg(&host)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let m: Value = serde_yaml::from_slice(&o.stdout).unwrap();
    let resolved: Vec<String> = m["resolve"]["nodes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|n| s(&n["id"]))
        .collect();
    let mut need: Option<(Vec<u64>, String)> = None;
    let mut ours: Option<(Vec<u64>, String)> = None;
    for p in m["packages"].as_sequence().unwrap() {
        if !resolved.contains(&s(&p["id"])) {
            continue;
        }
        let Some(rv) = p["rust_version"].as_str() else {
            continue;
        };
        if s(&p["name"]) == "qsa" {
            ours = Some((parse(rv), rv.to_string()));
        }
        let who = format!("{rv} for {} {}", s(&p["name"]), s(&p["version"]));
        if need.as_ref().is_none_or(|(v, _)| parse(rv) > *v) {
            need = Some((parse(rv), who));
        }
    }
    let (need, who) = need.expect("some locked package declares a rust-version");
    let (ours, stated) = ours.expect("the qsa package declares rust-version");
    assert!(
        ours >= need,
        "Cargo.toml says rust-version {stated} but Cargo.lock needs {who}. Raise \
         [workspace.package] rust-version (and the README's minimum) or pin that crate lower"
    );
}
