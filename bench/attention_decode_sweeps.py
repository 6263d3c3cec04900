"""The decode kernel's sweep rows for bench/attention_vs_torch.py (`--decode-sweep`): switch sets
around the dispatched plan, one list per session's question (the plans come from `qsa plan`; a
switch set a target cannot take is refused there and skipped). Split out of attention_plans.py,
which picks among them by its DEC_SWEEP."""

# The decode kernel's sweep, one factor group at a time around the dispatched plan: warps x ring
# stages at its splits, then splits x merge at its warps and stages (plans that do not fit the
# target's shared memory are refused by `qsa plan` and skipped).
DEC_WARPS_STAGES = [(w, st) for w in (2, 4, 8) for st in (2, 3, 4)]
DEC_SPLITS = (1, 2, 4, 8, 16)
DEC_MERGES = ("kernel", "launch")
# sm_90's cluster merge: eight splits per item (the kernel's cluster size), over warps.
DEC_CLUSTER = [{"QSA_ATTN_DEC_MERGE": "cluster", "QSA_ATTN_DEC_WARPS": w} for w in (2, 4, 8)]
# Two 16-key units per softmax step (bf16), over warps x stages and with the cluster merge.
DEC_PAIR = [{"QSA_ATTN_DEC_PAIR": 1, "QSA_ATTN_DEC_WARPS": w, "QSA_ATTN_DEC_STAGES": st}
            for w, st in ((4, 2), (4, 4), (8, 2))] + \
           [{"QSA_ATTN_DEC_PAIR": 1, "QSA_ATTN_DEC_MERGE": "cluster", "QSA_ATTN_DEC_WARPS": 8}]
# Fewer warps per CTA, more CTAs per item: the one-unit bf16 kernel's 166 registers (sm_90) fit
# three 4-warp or six 2-warp CTAs per SM (12 warps, where one 8-warp CTA gives 8), so 16 q x 8
# KV heads (128 items) at 3 splits of 4 warps (or 6 of 2) keeps 12 warps on every SM; one query
# (8 items) at 16 splits of 4 warps: 128 CTAs with one unit per warp, a 4-warp CTA merge.
DEC_WARPS_SPLITS = [{"QSA_ATTN_DEC_WARPS": w, "QSA_ATTN_DEC_SPLITS": n, "QSA_ATTN_DEC_MERGE": m}
                    for w, n, m in ((4, 2, "kernel"), (4, 3, "kernel"), (4, 3, "launch"), (2, 4, "kernel"),
                                    (2, 6, "kernel"), (4, 16, "kernel"), (4, 16, "launch"))]
# Ablations (QSA_ATTN_DEC_PROBE; the output of a probe is NOT the attention, so its rows are not
# checked): the launch alone, the kernel without its K/V copies, the copies without the math; at
# the dispatched plan, and the copies alone with deeper rings (is the K/V traffic itself the bound?).
DEC_PROBES = [{"QSA_ATTN_DEC_PROBE": p} for p in ("launch", "no_kv", "no_math", "list", "loop")] + \
             [{"QSA_ATTN_DEC_PROBE": "no_math", "QSA_ATTN_DEC_WARPS": w, "QSA_ATTN_DEC_STAGES": st}
              for w, st in ((4, 4), (8, 3))]
# Session 8 (issue 13): the chain probes above (list: launch + ids / q loads + the unit list;
# loop: everything but the merges), the cluster kernel's push merge (remote stores into the
# merging ranks' inboxes, one cluster barrier, no remote loads), the copies' 256-byte L2
# prefetch (is the 16-query K/V floor the DRAM's access pattern?), alone and on the copy floor;
# the warps' units round-robin (the CTA streams neighbouring units together) and 2-4 units of
# L2 look-ahead beyond the ring (more bytes in flight than shared memory holds).
DEC_NEW = [{"QSA_ATTN_DEC_MERGE": "push"}, {"QSA_ATTN_DEC_MERGE": "push", "QSA_ATTN_DEC_WARPS": 4},
           {"QSA_ATTN_DEC_MERGE": "cluster", "QSA_ATTN_DEC_WARPS": 4},
           {"QSA_ATTN_DEC_MERGE": "push", "QSA_ATTN_DEC_PROBE": "no_kv"},
           {"QSA_ATTN_DEC_PREFETCH": 256},
           {"QSA_ATTN_DEC_PREFETCH": 256, "QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 4},
           {"QSA_ATTN_DEC_PREFETCH": 256, "QSA_ATTN_DEC_PROBE": "no_math"},
           {"QSA_ATTN_DEC_ORDER": "interleave"},
           {"QSA_ATTN_DEC_AHEAD": 2}, {"QSA_ATTN_DEC_AHEAD": 4},
           {"QSA_ATTN_DEC_AHEAD": 4, "QSA_ATTN_DEC_PROBE": "no_math"},
           {"QSA_ATTN_DEC_AHEAD": 4, "QSA_ATTN_DEC_ORDER": "interleave", "QSA_ATTN_DEC_PREFETCH": 256}]
# Session 9 (issue 13): head-major K / V ([batch, hkv, kv_len, D], `kv_layout=hnd`: a 64-key
# block of one head is 16 KiB contiguous, where fla's layout spreads it over 64 rows of 256 bytes
# at a 2 KiB stride). Rows next to the NHD ones, same data permuted, torch gather+sdpa on the same
# layout; auto, the chain probes and the copy floor (probe=no_math), and the session-8 variants.
DEC_HND = [{}, {"QSA_ATTN_DEC_PROBE": "no_math"}, {"QSA_ATTN_DEC_PROBE": "launch"},
           {"QSA_ATTN_DEC_PROBE": "list"}, {"QSA_ATTN_DEC_PROBE": "loop"}, {"QSA_ATTN_DEC_PROBE": "no_kv"},
           {"QSA_ATTN_DEC_MERGE": "push"}, {"QSA_ATTN_DEC_PREFETCH": 256},
           {"QSA_ATTN_DEC_PREFETCH": 256, "QSA_ATTN_DEC_PROBE": "no_math"},
           {"QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 4},
           {"QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 4, "QSA_ATTN_DEC_PROBE": "no_math"},
           {"QSA_ATTN_DEC_AHEAD": 4}, {"QSA_ATTN_DEC_ORDER": "interleave"},
           ]
# One query (8 items): one CTA per item covering all its blocks, no cluster merge at all (the
# CTA merge only), with a 3-stage ring, and its chain probes; two splits merged by the item's
# last CTA. On both layouts (16 q: auto is already one CTA per item, the rows add the ring).
DEC_ONE_CTA = [{"QSA_ATTN_DEC_SPLITS": 1, "QSA_ATTN_DEC_STAGES": 3}] + \
              [{"QSA_ATTN_DEC_SPLITS": 1, "QSA_ATTN_DEC_STAGES": 3, "QSA_ATTN_DEC_PROBE": p}
               for p in ("no_math", "list", "loop")] + \
              [{"QSA_ATTN_DEC_SPLITS": 2, "QSA_ATTN_DEC_MERGE": "kernel", "QSA_ATTN_DEC_STAGES": 3}]
DEC_HND += DEC_ONE_CTA
# Session 10 (issue 13, the tail): units claimed from a CTA counter as a warp's ring stage frees
# (QSA_ATTN_DEC_ORDER=dynamic, the `_dyn_` kernels), with its chain probes (list: the head,
# loop: all but the merges, no_math: its copy floor), on a 3- and a 4 x 4 ring, and for one query
# one CTA per item (8 units a warp to balance, no cluster merge). `--decode-sweep dyn`: these next
# to auto and the static kernel's chain probes; DEC_HND_DYN on the head-major twin.
DEC_CHAIN = [{"QSA_ATTN_DEC_PROBE": p} for p in ("launch", "list", "loop", "no_math")]
DEC_DYN = [{"QSA_ATTN_DEC_ORDER": "dynamic"}] + \
          [{"QSA_ATTN_DEC_ORDER": "dynamic", "QSA_ATTN_DEC_PROBE": p} for p in ("list", "loop", "no_math")] + \
          [{"QSA_ATTN_DEC_ORDER": "dynamic", "QSA_ATTN_DEC_STAGES": 3},
           {"QSA_ATTN_DEC_ORDER": "dynamic", "QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 4},
           {"QSA_ATTN_DEC_ORDER": "dynamic", "QSA_ATTN_DEC_SPLITS": 1, "QSA_ATTN_DEC_STAGES": 3},
           {"QSA_ATTN_DEC_ORDER": "dynamic", "QSA_ATTN_DEC_SPLITS": 1, "QSA_ATTN_DEC_STAGES": 3,
            "QSA_ATTN_DEC_PROBE": "loop"},
           {"QSA_ATTN_DEC_SPLITS": 1, "QSA_ATTN_DEC_STAGES": 3}]
DEC_HND_DYN = [{}, {"QSA_ATTN_DEC_PROBE": "loop"}, {"QSA_ATTN_DEC_ORDER": "dynamic"},
               {"QSA_ATTN_DEC_ORDER": "dynamic", "QSA_ATTN_DEC_PROBE": "loop"}]
# Session 10 (issue 13, the merges): the one-level cluster merge (QSA_ATTN_DEC_MERGE=flat, the
# `_flat_cl_` kernels: every warp's partial straight into the cluster merge, no CTA merge), with
# its chain probes (launch: its own shared bytes; loop: all but the merge, the same loop as
# auto's), on 4 warps x 2 stages (32 partials a row) and with the 256-byte prefetch.
# `--decode-sweep flat`: these next to auto and the static kernel's chain probes (DEC_CHAIN);
# DEC_HND_FLAT on the head-major twin. At 16 q auto is one CTA per item: flat's rows there
# force 8 splits as a cluster (a control, not a candidate).
DEC_FLAT = [{"QSA_ATTN_DEC_MERGE": "flat"}] + \
           [{"QSA_ATTN_DEC_MERGE": "flat", "QSA_ATTN_DEC_PROBE": p} for p in ("launch", "list", "loop")] + \
           [{"QSA_ATTN_DEC_MERGE": "flat", "QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 2},
            {"QSA_ATTN_DEC_MERGE": "flat", "QSA_ATTN_DEC_PREFETCH": 256},
            {"QSA_ATTN_DEC_MERGE": "cluster"}]
DEC_HND_FLAT = [{}, {"QSA_ATTN_DEC_PROBE": "loop"}, {"QSA_ATTN_DEC_MERGE": "flat"},
                {"QSA_ATTN_DEC_MERGE": "flat", "QSA_ATTN_DEC_PROBE": "loop"}]
# Session 11 (issue 13, the head): q staged once per CTA in shared memory (QSA_ATTN_DEC_QLOAD=cta,
# the `_qs_` kernels: one 16-byte copy per thread issued before the ids' load, read by ldmatrix
# after the ring's first copies, instead of each warp's 32 four-byte loads per lane ahead of the
# ids and the copies), with its chain probes (launch: its shared bytes; list: q in registers and
# the unit list, as the static kernel's; loop: all but the merges; no_math: its copy floor), on a
# 3-stage ring and with the 256-byte prefetch. `--decode-sweep qs`: these next to auto and the
# static kernel's chain probes (DEC_CHAIN); DEC_HND_QS on the head-major twin.
DEC_QS = [{"QSA_ATTN_DEC_QLOAD": "cta"}] + \
         [{"QSA_ATTN_DEC_QLOAD": "cta", "QSA_ATTN_DEC_PROBE": p} for p in ("launch", "list", "loop", "no_math")] + \
         [{"QSA_ATTN_DEC_QLOAD": "cta", "QSA_ATTN_DEC_STAGES": 3},
          {"QSA_ATTN_DEC_QLOAD": "cta", "QSA_ATTN_DEC_PREFETCH": 256},
          {"QSA_ATTN_DEC_QLOAD": "cta", "QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 3}]
DEC_HND_QS = [{}, {"QSA_ATTN_DEC_PROBE": "loop"}, {"QSA_ATTN_DEC_QLOAD": "cta"},
              {"QSA_ATTN_DEC_QLOAD": "cta", "QSA_ATTN_DEC_PROBE": "loop"}]
# Session 12 (issue 13, the merge): the lean two-level merge (QSA_ATTN_DEC_MERGE=lean, the `_lean_`
# kernels: each warp's partial over its own ring, one CTA barrier, the CTA's rows pushed to their
# merging rank, one cluster barrier), with the merge probes (cta: the loop and the CTA level, no
# cluster barrier; cluster: that and one cluster barrier) on auto's pull merge and on the lean
# one, q staged per CTA with it, 4 warps x 2 units (half the CTA level's bytes), and the push
# merge and auto's q per CTA as controls. `--decode-sweep lean`: these next to auto and the
# static kernel's chain probes (DEC_CHAIN); DEC_HND_LEAN on the head-major twin.
DEC_LEAN = [{"QSA_ATTN_DEC_PROBE": p} for p in ("cta", "cluster")] + \
           [{"QSA_ATTN_DEC_MERGE": "lean"}] + \
           [{"QSA_ATTN_DEC_MERGE": "lean", "QSA_ATTN_DEC_PROBE": p} for p in ("launch", "loop", "cta", "cluster")] + \
           [{"QSA_ATTN_DEC_MERGE": "lean", "QSA_ATTN_DEC_QLOAD": "cta"},
            {"QSA_ATTN_DEC_MERGE": "lean", "QSA_ATTN_DEC_QLOAD": "cta", "QSA_ATTN_DEC_PROBE": "loop"},
            {"QSA_ATTN_DEC_MERGE": "lean", "QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 2},
            {"QSA_ATTN_DEC_MERGE": "lean", "QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 2,
             "QSA_ATTN_DEC_QLOAD": "cta"},
            {"QSA_ATTN_DEC_MERGE": "push"},
            {"QSA_ATTN_DEC_MERGE": "push", "QSA_ATTN_DEC_PROBE": "cta"},
            {"QSA_ATTN_DEC_QLOAD": "cta"}]
DEC_HND_LEAN = [{}, {"QSA_ATTN_DEC_MERGE": "lean"}]
# Session 12 (issue 13, the copy floor; branch dectma): K/V rows by cp.async.bulk
# (QSA_ATTN_DEC_COPY=bulk, the `_bk_` kernels: one TMA copy per 256-byte row into the warp's ring
# stage, one mbarrier per stage, instead of 16 cp.async of 16 bytes per lane per unit), with its
# chain probes (loop: all but the merges; no_math: its copy floor, against auto's 20.4-20.9 us),
# on deeper rings (8 x 3, 6 x 4: more bytes in flight per SM) with their copy floors, and with 4
# units of L2 look-ahead. The cp.async rows at the same deeper rings are the control.
# `--decode-sweep bulk`: these next to auto and the static kernel's chain probes (DEC_CHAIN);
# DEC_HND_BULK on the head-major twin. One query's auto stages q per CTA; bulk loads q per warp.
_BK = {"QSA_ATTN_DEC_COPY": "bulk"}
DEC_BULK = [dict(_BK)] + [dict(_BK, QSA_ATTN_DEC_PROBE=p) for p in ("loop", "no_math")] + \
           [dict(_BK, QSA_ATTN_DEC_STAGES=3), dict(_BK, QSA_ATTN_DEC_STAGES=3, QSA_ATTN_DEC_PROBE="no_math"),
            dict(_BK, QSA_ATTN_DEC_WARPS=6, QSA_ATTN_DEC_STAGES=4),
            dict(_BK, QSA_ATTN_DEC_WARPS=6, QSA_ATTN_DEC_STAGES=4, QSA_ATTN_DEC_PROBE="no_math"),
            dict(_BK, QSA_ATTN_DEC_AHEAD=4),
            {"QSA_ATTN_DEC_STAGES": 3, "QSA_ATTN_DEC_PROBE": "no_math"},
            {"QSA_ATTN_DEC_WARPS": 6, "QSA_ATTN_DEC_STAGES": 4, "QSA_ATTN_DEC_PROBE": "no_math"}]
DEC_HND_BULK = [{}, {"QSA_ATTN_DEC_PROBE": "no_math"}, dict(_BK), dict(_BK, QSA_ATTN_DEC_PROBE="no_math")]
# Session 20 (issue 13, the time past the copies): O's head dimension split over warp pairs
# (QSA_ATTN_DEC_DIMS=half, the `_hd_` kernels: both warps of a pair stream the same units and form
# S, each forms half of O's dims: 40 mma a unit where a warp took 64, 124 registers where 166,
# and half the CTA merge's partials), with its chain probes (loop: all but the merges, against
# auto's; no_math: its copy floor, V's half copied per warp; no_kv: its math alone; cta: one
# query's CTA level), on a 3-stage ring, on 4 warps (two pairs) x 4 stages, and with 256-byte
# L2 fetches (a pair's two K copies meet in L2). Auto's own math-alone and CTA-level probes are
# the controls. `--decode-sweep hd`: these next to auto and the static kernel's chain probes
# (DEC_CHAIN); DEC_HND_HD on the head-major twin.
_HD = {"QSA_ATTN_DEC_DIMS": "half"}
DEC_HD = [dict(_HD)] + [dict(_HD, QSA_ATTN_DEC_PROBE=p) for p in ("list", "loop", "no_math", "no_kv", "cta")] + \
         [dict(_HD, QSA_ATTN_DEC_STAGES=3), dict(_HD, QSA_ATTN_DEC_WARPS=4, QSA_ATTN_DEC_STAGES=4),
          dict(_HD, QSA_ATTN_DEC_PREFETCH=256),
          {"QSA_ATTN_DEC_PROBE": "no_kv"}, {"QSA_ATTN_DEC_PROBE": "cta"}]
DEC_HND_HD = [{}, dict(_HD)]
