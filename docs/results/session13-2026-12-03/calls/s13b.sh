#!/usr/bin/env bash
# Session 13, call B (H200): dectma.sh (decode K/V rows by cp.async.bulk: sweep with copy floors,
# errors, sanitizers; plan docs/results/session12-2026-12-03/plans/dectma.md).
set -u
bash docs/results/session12-2026-12-03/calls/dectma.sh
