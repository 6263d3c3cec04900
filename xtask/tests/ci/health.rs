//! The runner health check (.ci/gpu-health.sh) reports why a runner is sick.

use super::*;

#[test]
fn health_check_names_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = root().join(".ci/gpu-health.sh");
    let run = |target: &str, vendor: &str| {
        let out = tmp.path().join("out");
        let o = Command::new("bash")
            .arg(&script)
            .args([target, vendor, out.to_str().unwrap()])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("RUNNER_NAME", "box1")
            .output()
            .unwrap();
        let health =
            std::fs::read_to_string(out.join(target).join("health.txt")).unwrap_or_default();
        (o.status.code(), health)
    };
    // No driver at all (this machine has none: the fake comes next).
    if !Path::new("/usr/bin/nvidia-smi").exists() {
        let (code, why) = run("sm_90", "nvidia");
        assert_eq!(code, Some(1));
        assert!(why.contains("nvidia-smi not found on runner box1"), "{why}");
    }
    let fake = bin.join("nvidia-smi");
    std::fs::write(&fake, "#!/bin/sh\necho 'NVIDIA H200, 9.0, 580.82'\n").unwrap();
    Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
    let (code, why) = run("sm_90", "nvidia");
    assert_eq!((code, why.as_str()), (Some(0), ""));
    let (code, why) = run("sm_86", "nvidia");
    assert_eq!(code, Some(1));
    assert!(
        why.contains("no sm_86 GPU on runner box1") && why.contains("NVIDIA H200"),
        "{why}"
    );
    std::fs::write(&fake, "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver' >&2\nexit 9\n").unwrap();
    let (code, why) = run("sm_90", "nvidia");
    assert_eq!(code, Some(1));
    assert!(
        why.contains("could not communicate with the NVIDIA driver"),
        "{why}"
    );
}
