#!/usr/bin/env bash
# Here (with cargo): fill .h200/ with what the sanitizer mode needs on the H200, which has
# no cargo (carried there by the device tool; keep it under 64 MiB):
#   .h200/qsa                       the stripped release runner (both backends, no GPU lib linked)
#   .h200/kernels/sm_90/            sm_90's code objects
#   .h200/kernels-mutant/sm_90/     the same with mutants/kernel-topk-register-writes-past-out.yaml
#   .h200/compute-sanitizer/        compute-sanitizer from PyPI (nvidia-cuda-sanitizer-api 13.0),
#                                   used only when the H200 has none on PATH or in /usr/local/cuda
# Then, there: bash tools/h200-sanitize/run.sh (it says how).
set -euo pipefail
cd "$(dirname "$0")/../.."
mutant=mutants/kernel-topk-register-writes-past-out.yaml
rm -rf .h200
mkdir -p .h200/kernels .h200/kernels-mutant .h200/compute-sanitizer

cargo build --release -p qsa --bin qsa
strip -o .h200/qsa target/release/qsa

# The planted out-of-bounds write: apply the mutant's edit, build, keep its code objects,
# restore the source (even on failure) and rebuild the clean ones.
restore() { git checkout -- kernels/topk.cu; }
trap restore EXIT
python3 - "$mutant" <<'PY'
import sys, yaml
m = yaml.safe_load(open(sys.argv[1]))
for e in m["edits"]:
    text = open(e["file"]).read()
    assert text.count(e["find"]) == 1, f"stale mutant: {e['file']}"
    open(e["file"], "w").write(text.replace(e["find"], e["replace"]))
PY
cargo xtask build --target sm_90
cp -r build/kernels/sm_90 .h200/kernels-mutant/
restore
trap - EXIT
cargo xtask build --target sm_90
cp -r build/kernels/sm_90 .h200/kernels/

wheel_dir=$(mktemp -d)
.venv-cuda/bin/pip download --quiet --no-deps -d "$wheel_dir" "nvidia-cuda-sanitizer-api==13.0.*"
python3 - "$wheel_dir" .h200/compute-sanitizer <<'PY'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
z = zipfile.ZipFile(whl)
for name in z.namelist():
    if name.startswith("nvidia/cu13/bin/"):
        dst = os.path.join(sys.argv[2], os.path.basename(name))
        with open(dst, "wb") as f:
            f.write(z.read(name))
        os.chmod(dst, 0o755)
print("compute-sanitizer from", os.path.basename(whl))
PY
rm -rf "$wheel_dir"
du -sh .h200 .h200/*
