// qsa SIMT emulator: mbarriers and 1-D bulk copies (cp.async.bulk, the TMA's unit-stride
// form), for mbarrier.h's portable names on the host build of sm_90. emu.h includes this.
//
// Model. An mbarrier is its 8 bytes of shared memory, holding here: the expected arrival
// count, the arrivals still pending in the current phase, the transaction count (bytes
// expected minus bytes landed) and the phase bit. A phase completes when no arrival is
// pending and the transaction count is 0: the phase bit flips and the pending count resets.
// qsa_mbar_wait(bar, parity) returns once the phase of that parity has completed (parity !=
// the current phase bit), else the fiber waits in State::AtMbarrier and the scheduler
// (emu_blocks.h step_block) re-polls it; a block where nothing else can move reports a
// deadlock naming the mbarrier waiters.
//
// When a bulk copy lands is the schedule's freedom, so that a kernel that reads a slot before
// waiting on its mbarrier, or overwrites it before its readers released it, gives wrong or
// schedule-dependent answers: REVERSE lands every copy when it is issued (eager: a producer
// that reuses a slot too early overwrites a tile still to be read, and REVERSE runs a producer
// warp placed after its consumers first); FORWARD and WAVE_FIRST land a copy only when some
// thread polls its mbarrier for a phase not yet over (lazy: a consumer that reads without
// waiting, or waits on a stale parity, reads the slot's old bytes or the launch's poison);
// RANDOM flips a coin per copy. mbarrier arrivals are
// scheduling points, so a release before the last read of a slot can be overtaken.
// Copies still pending when the block exits are an error (nothing waited on them).
#pragma once

namespace qsa_emu {

struct Mbar {
  uint32_t expected : 15, pending : 15, phase : 1, init : 1;
  int32_t tx;
};
static_assert(sizeof(Mbar) == 8, "an mbarrier is 8 bytes");

struct BulkCopy {
  void* dst;
  const void* src;
  unsigned bytes;
  Mbar* bar;
};
// This OS thread's block's copies not yet landed (one block runs per OS thread at a time).
// Plain data: a TLS object with a constructor or destructor would add an unnamed TLS guard
// byte that src/emu/module.rs counts as every kernel's static shared memory.
constexpr unsigned BULK_MAX = 1024;  // the decode forward's `_bk_` kernels: 8 warps x 4 stages x 32 rows
static thread_local BulkCopy bulk_pending[BULK_MAX];
static thread_local unsigned bulk_count;

// Defined in emu_blocks.h (the launch's state lives there).
inline void fail_launch(const std::string& what);
inline bool bulk_lands_eagerly();

inline Mbar* mbar_of(void* p) {
  Mbar* m = static_cast<Mbar*>(p);
  if (((uintptr_t)p & 7u) != 0) fail_launch("an mbarrier at an address that is not 8-byte aligned");
  else if (!m->init) fail_launch("an mbarrier used before qsa_mbar_init (or its bytes overwritten)");
  return m;
}
// Complete the current phase if nothing is pending.
inline void mbar_settle(Mbar* m) {
  if (m->pending == 0 && m->tx == 0) {
    m->phase ^= 1u;
    m->pending = m->expected;
  }
}
inline void mbar_complete_tx(Mbar* m, unsigned bytes) {
  m->tx -= (int32_t)bytes;
  mbar_settle(m);
}
inline void bulk_land(const BulkCopy& c) {
  memcpy(c.dst, c.src, c.bytes);
  mbar_complete_tx(c.bar, c.bytes);
}
// Land every pending copy that signals `m`, in issue order.
inline void bulk_land_for(Mbar* m) {
  unsigned keep = 0;
  for (unsigned i = 0; i < bulk_count; ++i) {
    if (bulk_pending[i].bar == m) bulk_land(bulk_pending[i]);
    else bulk_pending[keep++] = bulk_pending[i];
  }
  bulk_count = keep;
}
// A poll of `m` for `parity` (try_wait.parity): true at once if that phase is already over (the
// card does not wait for copies of a later phase either), else its copies land, then true if that
// completed it. Landing on every poll would hide a wait on a stale parity (a phase bit never
// flipped): the poll would land the copies the wait was meant for.
inline bool mbar_poll(void* p, unsigned parity) {
  Mbar* m = static_cast<Mbar*>(p);
  if (m->phase != (parity & 1u)) return true;
  bulk_land_for(m);
  return m->phase != (parity & 1u);
}
// The exit check: the copies no thread waited on (their count, 0 if none) and forget them.
inline size_t bulk_abandoned() {
  const size_t n = bulk_count;
  bulk_count = 0;
  return n;
}
// Hold copy `c` until its mbarrier is polled.
inline void bulk_defer(const BulkCopy& c) {
  if (bulk_count == BULK_MAX) {
    fail_launch("more than " + std::to_string(BULK_MAX) +
                " bulk copies in flight in one block, none waited on (the emulator's limit; a missing wait?)");
    return;
  }
  bulk_pending[bulk_count++] = c;
}

}  // namespace qsa_emu
