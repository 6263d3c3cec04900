#!/usr/bin/env bash
# Session 13, call A (H200): session 12's two plans on main after the merges of tidy, wg2r,
# dec1q and dectma: wg2r.sh (the wgmma backward's two-warpgroup forms: sanitizers, error suite,
# bench beside default and fla) and dec1q.sh (the one-query lean merge: sweep twice, errors,
# sanitizers). The plans and their decision rules: docs/results/session12-2026-12-03/plans/.
set -u
D=docs/results/session12-2026-12-03/calls
bash $D/wg2r.sh
bash $D/dec1q.sh
