#!/usr/bin/env bash
# Health check of a self-hosted GPU runner, run by the GPU job before anything else:
# the driver answers and the card this job's target needs is there. On failure it writes
# the reason to OUT/TARGET/health.txt (uploaded; `cargo xtask report merge` shows it as
# the target's reason) and exits 1, so a sick runner fails in seconds, not after a build.
#
# usage: .ci/gpu-health.sh TARGET VENDOR OUT      (VENDOR: nvidia | amd)
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 TARGET nvidia|amd OUT" >&2
  exit 2
fi
target=$1 vendor=$2 out=$3
runner=${RUNNER_NAME:-$(hostname)}
mkdir -p "$out/$target"
rm -f "$out/$target/health.txt"

fail() {
  printf '%s\n' "$*" | tee "$out/$target/health.txt" >&2
  exit 1
}

case $vendor in
  nvidia)
    command -v nvidia-smi >/dev/null 2>&1 ||
      fail "nvidia-smi not found on runner $runner: is the NVIDIA driver installed?"
    if ! gpus=$(timeout 60 nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1); then
      fail "nvidia-smi failed on runner $runner: $(printf '%s' "$gpus" | tail -n 3)"
    fi
    want=${target#sm_}
    # compute_cap prints 9.0 for sm_90, 8.6 for sm_86.
    printf '%s\n' "$gpus" | awk -F', *' '{gsub(/\./, "", $2); print $2}' | grep -qx "$want" ||
      fail "no $target GPU on runner $runner (nvidia-smi lists: $(printf '%s' "$gpus" | tr '\n' ';')): check its labels against matrix.yaml"
    echo "$target on $runner: $gpus"
    ;;
  amd)
    command -v rocminfo >/dev/null 2>&1 || fail "rocminfo not found on runner $runner: is ROCm installed?"
    [ -r /dev/kfd ] && [ -w /dev/kfd ] ||
      fail "/dev/kfd is not readable and writable on runner $runner: add the runner's user to the render and video groups"
    if ! info=$(timeout 60 rocminfo 2>&1); then
      fail "rocminfo failed on runner $runner: $(printf '%s' "$info" | tail -n 3)"
    fi
    agents=$(printf '%s\n' "$info" | grep -o 'gfx[0-9a-f]*' | sort -u | tr '\n' ' ')
    printf '%s\n' "$info" | grep -qw "$target" ||
      fail "no $target agent on runner $runner (rocminfo lists: ${agents:-none}): check its labels against matrix.yaml"
    echo "$target on $runner: agents $agents"
    ;;
  *)
    echo "unknown vendor '$vendor' (nvidia or amd)" >&2
    exit 2
    ;;
esac
