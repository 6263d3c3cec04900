#!/usr/bin/env bash
# Session 21, call G (H200): what %globaltimer's stamps look like, counted per stamp (call F
# counted distinct values): for each shape and run, the share of stamps on a 256 ns grid from the
# run's first stamp (1/8 if the 32 ns steps were uniform) and the stamps' phase within 256 ns.
set -u
mkdir -p $OUT/g/stamps
timeout 200 python3 tools/h200-decode-trace/trace.py --qsa .h200/qsa --kernels build/trace --dump $OUT/g/stamps > $OUT/g/auto.md 2>&1
echo "### rc=$?"; grep -E "^decode" $OUT/g/auto.md | cut -c1-60,150-
python3 - <<'PY'
import glob, os
import numpy as np
for f in sorted(glob.glob(os.environ["OUT"] + "/g/stamps/*.npy")):
    a = np.load(f).astype(np.int64)
    for i, run in enumerate(a[:3]):
        x = run[run != 0]
        ph = (x - x.min()) % 256
        hist = np.bincount(ph // 32, minlength=8)
        print(os.path.basename(f), "run", i, "stamps", x.size, "on the 256 grid:", round(float(np.mean(ph == 0)), 3),
              "phase histogram (32 ns bins):", hist.tolist(), "phase not a multiple of 32:", int(np.sum(ph % 32 != 0)))
PY
