#!/usr/bin/env python3
"""Where a kernel's time and instructions go, from Nsight Compute's SASS page.

Input: `ncu -i REPORT --page source --csv --print-source sass > sass.csv` (a report taken with
`--set full`, so that the warp-state sampling and the instruction counts are there). Output, as
Markdown: the stall reasons summed over the kernel, the opcodes with the most samples, and the
code in windows of N instructions (default 100) with each window's share of the samples and of
the executed warp instructions and the landmark instructions in it (HGMMA: wgmma, LDGSTS:
cp.async, RED / ATOM: atomics, MUFU: exp / reciprocal, F2FP: bf16 packing, BAR: barriers,
SHFL, LDS / STS, LDSM: ldmatrix). The landmarks name the region: session 15 read the kvwg2a3
backward's row-copy loop from the LDGSTS windows (38% of its executed instructions, ~60 per
copy) and cut it (docs/results/session15-2026-12-03/README.md).

    python3 tools/ncu_sass_regions.py sass.csv [--window 100] [--min-share 0.4]
"""
import argparse
import collections
import csv
import re
import sys

LANDMARKS = ["HGMMA", "LDGSTS", "RED", "ATOM", "MUFU", "F2FP", "BAR", "SHFL", "LDSM", "LDS", "STS", "LDG", "STG"]


def opcode(text):
    m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)", text)
    return m.group(2) if m else "?"


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    header_at = next((i for i, r in enumerate(rows) if r[:2] == ["Address", "Source"]), None)
    if header_at is None:
        sys.exit(f"{path}: no 'Address,Source' header: export it with "
                 "`ncu -i REPORT --page source --csv --print-source sass`")
    hdr = rows[header_at]
    col = {h: i for i, h in enumerate(hdr)}
    for need in ("Warp Stall Sampling (All Samples)", "Instructions Executed"):
        if need not in col:
            sys.exit(f"{path}: no '{need}' column: take the report with `--set full`")
    data = [r for r in rows[header_at + 1:] if len(r) == len(hdr)]
    return hdr, col, data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--window", type=int, default=100, help="instructions per window")
    ap.add_argument("--min-share", type=float, default=0.4,
                    help="print windows with at least this %% of the samples")
    a = ap.parse_args()
    hdr, col, data = load(a.csv)
    samples = lambda r: int(r[col["Warp Stall Sampling (All Samples)"]] or 0)
    executed = lambda r: int(r[col["Instructions Executed"]] or 0)
    total_s = sum(map(samples, data)) or 1
    total_i = sum(map(executed, data)) or 1
    print(f"{len(data)} instructions, {total_s} samples, {total_i} warp instructions executed\n")
    reasons = [h for h in hdr if h.startswith("stall_") and "(Not Issued)" not in h]
    print("| stall reason | share of samples |\n|---|---|")
    sums = {h: sum(int(r[col[h]] or 0) for r in data) for h in reasons}
    for h, v in sorted(sums.items(), key=lambda x: -x[1])[:10]:
        print(f"| {h[6:]} | {100 * v / total_s:.1f}% |")
    ops_s, ops_i = collections.Counter(), collections.Counter()
    for r in data:
        ops_s[opcode(r[1])] += samples(r)
        ops_i[opcode(r[1])] += executed(r)
    print("\n| opcode | samples | executed |\n|---|---|---|")
    for o, v in ops_s.most_common(15):
        print(f"| {o} | {100 * v / total_s:.1f}% | {100 * ops_i[o] / total_i:.1f}% |")
    print(f"\n| first instruction | samples | executed | landmarks |\n|---|---|---|---|")
    for i in range(0, len(data), a.window):
        chunk = data[i:i + a.window]
        s = sum(map(samples, chunk))
        if 100 * s / total_s < a.min_share:
            continue
        n = collections.Counter(opcode(r[1]) for r in chunk)
        marks = " ".join(f"{o}x{n[o]}" for o in LANDMARKS if n[o])
        print(f"| {i} | {100 * s / total_s:.1f}% | {100 * sum(map(executed, chunk)) / total_i:.1f}% | {marks} |")


if __name__ == "__main__":
    main()
