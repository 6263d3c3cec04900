#!/usr/bin/env bash
# Session 21, call F (H200): call E again with the clock's step read as the median gap between
# distinct stamps (call E's greatest common divisor read 32 ns while the tables sat on a 256 ns
# grid), and the raw stamps saved (--dump) to check the reading against. build/trace as call E.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/f/stamps
timeout 200 python3 tools/h200-decode-trace/trace.py --qsa .h200/qsa --kernels build/trace --dump $OUT/f/stamps > $OUT/f/auto.md 2>&1
echo "### rc=$?"; grep -E "^decode|spread" $OUT/f/auto.md
python3 - <<'PY'
import glob, os
import numpy as np
for f in sorted(glob.glob(os.environ["OUT"] + "/f/stamps/*.npy")):
    a = np.load(f).astype(np.int64)
    for i, run in enumerate(a[:3]):
        x = np.unique(run[run != 0])
        d = np.diff(x)
        off = np.mean((x - x.min()) % 256 != 0)
        print(os.path.basename(f), "run", i, "distinct", x.size, "gaps: min", d.min(), "median", np.median(d),
              "share of gaps < 256:", round(float(np.mean(d < 256)), 3), "off the 256 ns grid:", round(float(off), 3))
PY
