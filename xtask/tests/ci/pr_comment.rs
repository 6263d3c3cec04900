//! The PR-comment script (pr-comment.yml's github-script) updates one comment.

use super::*;

/// The github-script of pr-comment.yml, run by node against a fake GitHub: the first run
/// creates the comment, the second updates it, a run for an old commit or a bad PR number
/// writes nothing, and @-mentions are defused.
#[test]
fn pr_comment_is_created_once_then_updated() {
    if !Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return skipped(
            "pr_comment_is_created_once_then_updated",
            "node is not installed",
            "QSA_REQUIRE_NODE",
        );
    }
    let pc = workflow("pr-comment.yml");
    let steps = job(&pc, "comment")["steps"].as_sequence().unwrap().clone();
    let script = steps
        .iter()
        .find_map(|st| st.get("with").and_then(|w| w.get("script")))
        .map(s)
        .expect("github-script step");
    let harness = r#"
const fs = require("node:fs");
const state = JSON.parse(fs.readFileSync(process.env.STATE, "utf8"));
const github = {
  paginate: async (fn, args) => fn(args),
  rest: {
    pulls: { get: async ({ pull_number }) => ({ data: { number: pull_number, head: { sha: state.head } } }) },
    issues: {
      listComments: async () => state.comments,
      updateComment: async ({ comment_id, body }) => { state.comments.find((c) => c.id === comment_id).body = body; },
      createComment: async ({ body }) => { const c = { id: state.comments.length + 1, user: { login: "github-actions[bot]" }, body }; state.comments.push(c); return { data: c }; },
    },
  },
};
const core = { info: (m) => console.log(m), warning: (m) => console.log(`warning: ${m}`) };
const context = { repo: { owner: "o", repo: "r" } };
(async () => {
  await (async function () { SCRIPT })();
  fs.writeFileSync(process.env.STATE, JSON.stringify(state));
})().catch((e) => { console.error(e); process.exit(1); });
"#
    .replace("SCRIPT", &script);
    let tmp = tempfile::tempdir().unwrap();
    let js = tmp.path().join("harness.cjs");
    std::fs::write(&js, harness).unwrap();
    let dir = tmp.path().join("summary");
    std::fs::create_dir_all(&dir).unwrap();
    let state = tmp.path().join("state.json");
    std::fs::write(&state, r#"{"head":"abc123","comments":[{"id":1,"user":{"login":"someone"},"body":"<!-- qsa-ci-summary --> not ours"}]}"#).unwrap();
    let run = |pr: &str, summary: &str, sha: &str| {
        std::fs::write(dir.join("pr-number"), pr).unwrap();
        std::fs::write(dir.join("summary.md"), summary).unwrap();
        let o = Command::new("node")
            .arg(&js)
            .env("STATE", &state)
            .env("SUMMARY_DIR", &dir)
            .env("HEAD_SHA", sha)
            .env("RUN_URL", "https://example.invalid/run/1")
            .env("CONCLUSION", "failure")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let v: Value = serde_yaml::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
        v["comments"].as_sequence().unwrap().clone()
    };
    let c = run("7\n", "## qsa matrix\nfirst @maintainer", "abc123");
    assert_eq!(c.len(), 2, "created one, left someone else's alone");
    assert!(
        s(&c[1]["body"]).starts_with("<!-- qsa-ci-summary -->")
            && s(&c[1]["body"]).contains("first @\u{200b}maintainer")
    );
    let c = run("7", "## qsa matrix\nsecond", "abc123");
    assert_eq!(c.len(), 2, "updated, not repeated");
    assert!(s(&c[1]["body"]).contains("second") && !s(&c[1]["body"]).contains("first"));
    assert_eq!(s(&c[0]["body"]), "<!-- qsa-ci-summary --> not ours");
    let c = run("7", "stale", "old999");
    assert!(
        !s(&c[1]["body"]).contains("stale"),
        "a run for an older commit writes nothing"
    );
    let c = run("7; rm -rf /", "evil", "abc123");
    assert!(c.len() == 2 && !s(&c[1]["body"]).contains("evil"));
    // A hostile artifact: summary.md a symlink to a file of the runner is never followed.
    let secret = tmp.path().join("runner-secret");
    std::fs::write(&secret, "TOKEN=hunter2").unwrap();
    std::fs::remove_file(dir.join("summary.md")).unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("summary.md")).unwrap();
    std::fs::write(dir.join("pr-number"), "7").unwrap();
    let o = Command::new("node")
        .arg(&js)
        .env("STATE", &state)
        .env("SUMMARY_DIR", &dir)
        .env("HEAD_SHA", "abc123")
        .env("RUN_URL", "https://example.invalid/run/1")
        .env("CONCLUSION", "failure")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_yaml::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let body = s(&v["comments"][1]["body"]);
    assert!(
        !body.contains("hunter2") && body.contains("before it wrote a summary"),
        "a symlinked summary.md must not be read: {body}"
    );
    // A summary over the byte limit is not read at all (no 100 MB string in the runner).
    std::fs::remove_file(dir.join("summary.md")).unwrap();
    let c = run("7", &"x".repeat((1 << 20) + 1), "abc123");
    let body = s(&c[1]["body"]);
    assert!(
        body.contains("over the 1048576-byte limit") && !body.contains("xxxx"),
        "an oversized summary.md must not be read: {}",
        &body[..body.len().min(300)]
    );
}
