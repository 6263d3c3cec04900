// qsa mbarrier and 1-D bulk-copy primitives (sm_90a builds and the emulated sm_90), behind
// portable names as mma.h's. Only kernels that include this header use them (the TMA decode
// scorer, scores_decode_tma.h), so no other code object changes.
//
//   qsa_mbar_init(bar, count)              mbarrier.init.shared::cta.b64: `count` arrivals per phase
//   qsa_fence_mbar_init()                  fence.mbarrier_init.release.cluster (then a __syncthreads)
//   qsa_mbar_arrive(bar)                   mbarrier.arrive.shared::cta.b64 (release, CTA scope)
//   qsa_mbar_arrive_expect_tx(bar, bytes)  mbarrier.arrive.expect_tx: this arrival, and `bytes`
//                                          more to land before the phase completes
//   qsa_mbar_wait(bar, parity)             spin on mbarrier.try_wait.parity until the phase of
//                                          that parity has completed (acquire, CTA scope)
//   qsa_bulk_g2s(dst, src, bytes, bar)     cp.async.bulk.shared::cluster.global.mbarrier::
//                                          complete_tx::bytes: `bytes` (a multiple of 16, both
//                                          addresses 16-byte aligned) land in shared memory and
//                                          count down bar's transaction count
// The host branch (emu_mbarrier.h, included by emu.h) models the phases and lands copies at
// schedule-dependent times, so a missing wait or an early slot reuse shows.
#pragma once

#if defined(QSA_WGMMA) && !defined(QSA_EMU)
QSA_DEVICE void qsa_mbar_init(void* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(qsa_smem_addr(bar)), "r"(count) : "memory");
}
QSA_DEVICE void qsa_fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
QSA_DEVICE void qsa_mbar_arrive(void* bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(qsa_smem_addr(bar)) : "memory");
}
QSA_DEVICE void qsa_mbar_arrive_expect_tx(void* bar, unsigned bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(
                   qsa_smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
QSA_DEVICE void qsa_mbar_wait(void* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(qsa_smem_addr(bar)),
      "r"(parity)
      : "memory");
}
QSA_DEVICE void qsa_bulk_g2s(void* dst, const void* src, unsigned bytes, void* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          qsa_smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(qsa_smem_addr(bar))
      : "memory");
}
#elif defined(QSA_WGMMA) && defined(QSA_EMU)
QSA_DEVICE void qsa_mbar_init(void* bar, unsigned count) {
  qsa_emu::Mbar* m = static_cast<qsa_emu::Mbar*>(bar);
  if (count == 0 || count >= (1u << 15)) qsa_emu::fail_launch("qsa_mbar_init with count " + std::to_string(count));
  *m = qsa_emu::Mbar{count, count, 0u, 1u, 0};
}
QSA_DEVICE void qsa_fence_mbar_init() {}
QSA_DEVICE void qsa_mbar_arrive(void* bar) {
  qsa_emu::Mbar* m = qsa_emu::mbar_of(bar);
  if (m->pending == 0) {
    qsa_emu::fail_launch("an arrival on an mbarrier whose phase had all its arrivals (more arrivals than its count: "
        "a waiter skipped, so one side ran a phase ahead of the other)");
    return;
  }
  m->pending -= 1;
  qsa_emu::mbar_settle(m);
  // A scheduling point: what the arrival released (a ring slot) may be reused by a waiter
  // before this thread's next instruction, so a release placed before the last read of the
  // slot gives schedule-dependent answers.
  qsa_emu::yield_to_scheduler(qsa_emu::State::Ready);
}
QSA_DEVICE void qsa_mbar_arrive_expect_tx(void* bar, unsigned bytes) {
  qsa_emu::mbar_of(bar)->tx += (int32_t)bytes;
  qsa_mbar_arrive(bar);
}
QSA_DEVICE void qsa_mbar_wait(void* bar, unsigned parity) {
  qsa_emu::mbar_of(bar);
  if (qsa_emu::mbar_poll(bar, parity)) return;
  qsa_emu::Thread* t = qsa_emu::cur_thread;
  t->mbar = bar;
  t->parity = parity;
  qsa_emu::yield_to_scheduler(qsa_emu::State::AtMbarrier);  // Ready once the phase is over
}
QSA_DEVICE void qsa_bulk_g2s(void* dst, const void* src, unsigned bytes, void* bar) {
  qsa_emu::Mbar* m = qsa_emu::mbar_of(bar);
  if (bytes == 0 || bytes % 16 != 0 || ((uintptr_t)dst & 15u) != 0 || ((uintptr_t)src & 15u) != 0) {
    qsa_emu::fail_launch("cp.async.bulk of " + std::to_string(bytes) +
                         " bytes: the size must be a non-zero multiple of 16 and both addresses 16-byte aligned");
    return;
  }
  qsa_emu::shared_address(dst);  // fails unless dst is this block's shared memory
  const qsa_emu::BulkCopy c{dst, src, bytes, m};
  if (qsa_emu::bulk_lands_eagerly()) qsa_emu::bulk_land(c);
  else qsa_emu::bulk_defer(c);
}
#endif
