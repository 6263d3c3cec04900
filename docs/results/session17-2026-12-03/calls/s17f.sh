#!/usr/bin/env bash
# Session 17, call F (H200): the decode rows of issue 13 with this session's build (decode
# kernels unchanged since session 16), so that all four rows come from session 17's calls:
# `bench/attention_vs_torch.py --bench --decode-only`.
set -u
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/s17f; mkdir -p $W
echo "### $(date -u +%T)"
timeout 150 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --out $W 2>&1 | tail -30
echo "### rc=${PIPESTATUS[0]} $(date -u +%T)"
tar -C $W -czf $OUT/s17f.tgz .
