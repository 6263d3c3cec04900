// qsa SIMT emulator, runtime: blocks and thread-block clusters over the fibers of one OS
// thread, and the workers that take clusters from a launch. Part of emu_runtime.h, which
// includes it after the fibers, the fiber pool and the wave collectives it uses.
#pragma once

namespace qsa_emu {

// ---- Blocks and clusters.
//
// A block's fibers run until none can move; `step_block` returns then, either because the
// block finished or because every live thread waits at qsa_cluster_sync. The blocks of a
// cluster (1 block without QSA_CLUSTER_DIMS) take turns on one OS thread (`run_cluster`):
// a cluster barrier is released once every block of the cluster waits at it. Each block's
// shared memory lives in this OS thread's TLS while it runs and in the cluster's copy
// (`Cluster::saved`) while another block runs; qsa_cluster_map of another block reads that
// copy.

enum class BlockStatus : uint8_t { Running, AtCluster, Done, Failed };

// Named barriers 1..15 (bar.sync / bar.arrive id, count; 0 is __syncthreads'): threads
// arrived at each since it last completed, and the count they were given.
struct NamedBarriers {
  unsigned arrived[16];
  unsigned expected[16];
};

struct BlockRun {
  Dim3 idx;
  Thread* th;  // its `n` fibers in the pool
  std::mt19937_64 rng;
  BlockStatus status;
  NamedBarriers bars;
};

// The running block's named barriers and threads (set by step_block), for qsa_bar_sync.
static thread_local BlockRun* cur_run = nullptr;
static thread_local unsigned cur_run_threads = 0;

struct Cluster {
  Launch* L = nullptr;
  unsigned size = 1;
  unsigned rank = 0;                  // the block whose shared memory is in TLS now
  bool loaded = false;                // whether any block's shared memory is in TLS
  size_t block_bytes = 0;             // every shared range of one block, end to end
  std::vector<unsigned char> saved;   // size x block_bytes
  std::vector<BlockRun> blocks;
};

static thread_local Cluster* cur_cluster = nullptr;

// Bytes a shared range takes in a block's saved copy: rounded up to 16, so every range's copy
// starts 16-byte aligned, as its live range does where it is declared so (a remote float4
// through qsa_cluster_map_store compiles to an aligned 16-byte move).
inline size_t saved_span(long long bytes) { return ((size_t)bytes + 15) & ~(size_t)15; }

// Copy block `r`'s shared memory between TLS and its saved copy (to_tls: restore).
inline void move_shared(Cluster& c, unsigned r, bool to_tls) {
  const qsa_emu_launch_t& d = *c.L->desc;
  unsigned char* anchor = &tls_anchor;
  unsigned char* copy = c.saved.data() + r * c.block_bytes;
  for (int i = 0; i < d.n_shared_ranges; ++i) {
    unsigned char* live = anchor + d.shared_ranges[2 * i];
    const size_t bytes = (size_t)d.shared_ranges[2 * i + 1];
    if (to_tls) memcpy(live, copy, bytes);
    else memcpy(copy, live, bytes);
    copy += saved_span((long long)bytes);
  }
}

// Put block `r`'s shared memory in TLS (the block running before it saved first).
inline void load_block(Cluster& c, unsigned r) {
  if (c.size == 1 || (c.loaded && c.rank == r)) {
    c.rank = r;
    return;
  }
  if (c.loaded) move_shared(c, c.rank, false);
  move_shared(c, r, true);
  c.rank = r;
  c.loaded = true;
}

inline unsigned cluster_rank() { return cur_cluster ? cur_cluster->rank : 0; }

inline const void* cluster_map(const void* p, unsigned rank) {
  Cluster* c = cur_cluster;
  const BlockRun& self = c->blocks[c->rank];
  if (rank >= c->size) {
    c->L->fail(block_name(c->L->kernel, self.idx) + ": qsa_cluster_map to rank " + std::to_string(rank) +
               " of a cluster of " + std::to_string(c->size) + " blocks");
    return p;
  }
  if (rank == c->rank) return p;
  const qsa_emu_launch_t& d = *c->L->desc;
  const long long off = (long long)((const unsigned char*)p - &tls_anchor);
  size_t pos = 0;
  for (int i = 0; i < d.n_shared_ranges; ++i) {
    const long long start = d.shared_ranges[2 * i], bytes = d.shared_ranges[2 * i + 1];
    if (off >= start && off < start + bytes) return c->saved.data() + rank * c->block_bytes + pos + (off - start);
    pos += saved_span(bytes);
  }
  c->L->fail(block_name(c->L->kernel, self.idx) +
             ": qsa_cluster_map of an address that is not this kernel's shared memory");
  return p;
}

// wgmma's shared addresses (emu_mma.h): the block's shared window starts at the lowest of
// the launch's shared ranges (offsets from the TLS anchor), and a shared address is the
// offset from there, as a card's shared state space starts at the block's first byte.
inline long long shared_window_start() {
  const qsa_emu_launch_t& d = *cur_launch->desc;
  long long lo = 0;
  for (int i = 0; i < d.n_shared_ranges; ++i)
    if (i == 0 || d.shared_ranges[2 * i] < lo) lo = d.shared_ranges[2 * i];
  return lo;
}
inline void fail_launch(const std::string& what) {
  cur_launch->fail(block_name(cur_launch->kernel, cur_block.idx) + ": " + what);
}
// When a bulk copy lands (emu_mbarrier.h): at issue under REVERSE (which runs a producer
// warp placed after its consumers first), a coin per copy under RANDOM, at the first poll of
// its mbarrier otherwise (FORWARD, WAVE_FIRST: consumers first, reading what has landed).
inline bool bulk_lands_eagerly() {
  const int s = cur_launch->desc->schedule;
  return s == REVERSE || (s == RANDOM && (cur_run->rng() & 1u));
}
// Barrier balance: a barrier that every thread of the block waits at (__syncthreads, or a
// named barrier counting the whole block, every arrival a sync) must find every thread after
// the same number of barrier waits. Threads that pass different barrier sequences between two
// CTA barriers (one warpgroup on its named barrier more often than the other) are ordered
// correctly by the PTX memory model, but compute-sanitizer racecheck counts barriers per warp
// and reports the shared memory they exchange after such a barrier as hazards (session 11
// call C: wg2's s.hits, attention_kv_wg.h). `id`: the named barrier (0: __syncthreads), whose
// waiters are the threads parked there plus the arriving one if it syncs (`arriving_syncs`).
inline void check_balance(const std::string& what, unsigned id, bool arriving_syncs) {
  const unsigned n = cur_run_threads;
  Thread* th = cur_run->th;
  auto waits = [&](unsigned i) {
    const Thread& t = th[i];
    if (&t == cur_thread && id != 0) return arriving_syncs;
    return id == 0 ? t.state == State::AtBarrier : (t.state == State::AtNamedBarrier && t.named == id);
  };
  for (unsigned i = 0; i < n; ++i)
    if (!waits(i)) return;  // a bar.arrive among the arrivals, or exited threads: not CTA-wide
  for (unsigned i = 1; i < n; ++i)
    if (th[i].passes != th[0].passes) {
      fail_launch(what + " (every thread of the block waits there) reached by thread 0 after " +
                  std::to_string(th[0].passes) + " barrier waits and thread " + std::to_string(i) + " after " +
                  std::to_string(th[i].passes) +
                  " (this one counted): unbalanced barrier sequences; correct by the PTX memory model, but compute-sanitizer "
                  "racecheck counts barriers per warp and may report the shared memory exchanged across this "
                  "barrier as a hazard (give every warp the same number of barrier waits between CTA barriers)");
      return;
    }
}
// One arrival at named barrier `id` expecting `count` threads (whole warps, as the hardware
// counts them). True when this arrival completed it: its waiters are released and it resets.
inline bool named_arrival(unsigned id, unsigned count, bool sync = false) {
  NamedBarriers& b = cur_run->bars;
  if (id == 0 || id >= 16 || count == 0 || count % 32 != 0 || count > cur_run_threads) {
    fail_launch("named barrier " + std::to_string(id) + " with count " + std::to_string(count) +
                ": ids are 1..15 (0 is __syncthreads) and counts whole warps, at most the block's " +
                std::to_string(cur_run_threads) + " threads");
    return true;
  }
  if (b.arrived[id] == 0) {
    b.expected[id] = count;
  } else if (b.expected[id] != count) {
    fail_launch("named barrier " + std::to_string(id) + ": arrival with count " + std::to_string(count) +
                " while " + std::to_string(b.arrived[id]) + " threads arrived with count " +
                std::to_string(b.expected[id]));
    return true;
  }
  if (++b.arrived[id] < count) return false;
  b.arrived[id] = 0;
  if (count == cur_run_threads) check_balance("named barrier " + std::to_string(id), id, sync);
  for (unsigned i = 0; i < cur_run_threads; ++i) {
    Thread& t = cur_run->th[i];
    if (t.state == State::AtNamedBarrier && t.named == id) t.state = State::Ready;
  }
  return true;
}

// The names of every named barrier with pending arrivals, for error messages.
inline std::string named_pending(const NamedBarriers& b) {
  std::string s;
  for (unsigned id = 1; id < 16; ++id)
    if (b.arrived[id])
      s += (s.empty() ? "" : ", ") + std::string("id ") + std::to_string(id) + ": " + std::to_string(b.arrived[id]) +
           " of " + std::to_string(b.expected[id]) + " arrived";
  return s;
}

inline unsigned shared_address(const void* p) {
  const long long off = (long long)((const unsigned char*)p - &tls_anchor) - shared_window_start();
  if (off < 0 || off >= (1ll << 18)) {
    fail_launch("qsa_smem_addr of an address outside the block's shared memory");
    return 0;
  }
  return (unsigned)off;
}
// The bytes at shared address `addr`, which must lie inside one of the block's shared ranges.
inline const unsigned char* shared_at(unsigned addr, unsigned bytes) {
  static const unsigned char zeros[16] = {0};
  const qsa_emu_launch_t& d = *cur_launch->desc;
  const long long off = shared_window_start() + addr;
  for (int i = 0; i < d.n_shared_ranges; ++i) {
    const long long start = d.shared_ranges[2 * i], len = d.shared_ranges[2 * i + 1];
    if (off >= start && off + bytes <= start + len) return &tls_anchor + off;
  }
  fail_launch("a wgmma operand at shared address " + std::to_string(addr) +
              " lies outside the block's shared memory (a wrong descriptor start, LBO or SBO?)");
  return zeros;
}

// Run block `br`'s fibers until it finishes or every live thread waits at the cluster
// barrier. An error is recorded in `L` (status Failed).
inline BlockStatus step_block(Launch& L, FiberPool& pool, BlockRun& br, std::vector<unsigned>& ready) {
  const qsa_emu_launch_t& d = *L.desc;
  const Dim3 dim = {d.block[0], d.block[1], d.block[2]};
  const unsigned n = dim.x * dim.y * dim.z;
  cur_block = BlockState{br.idx, dim, Dim3{d.grid[0], d.grid[1], d.grid[2]}};
  sched_ctx = &pool.sched;
  cur_launch = &L;
  cur_run = &br;
  cur_run_threads = n;
  Thread* th = br.th;
  const unsigned waves = (n + QSA_WAVE - 1) / QSA_WAVE;
  std::string err;
  for (;;) {
    ready.clear();
    for (unsigned i = 0; i < n; ++i) {
      if (th[i].state == State::AtMbarrier && mbar_poll(th[i].mbar, th[i].parity)) th[i].state = State::Ready;
      if (th[i].state == State::Ready) ready.push_back(i);
    }
    if (!ready.empty() && d.schedule == WAVE_FIRST) {
      const unsigned w = th[ready[0]].wave;
      for (unsigned i : ready) {
        if (th[i].wave != w) break;  // `ready` is in thread order: wave w's come first
        cur_thread = &th[i];
        resume(th[i]);
      }
      if (resolve_wave(th, n, w, err) < 0) {
        L.fail(block_name(L.kernel, br.idx) + ": " + err);
        return BlockStatus::Failed;
      }
      continue;
    }
    if (!ready.empty()) {
      if (d.schedule == REVERSE) std::reverse(ready.begin(), ready.end());
      else if (d.schedule == RANDOM) std::shuffle(ready.begin(), ready.end(), br.rng);
      for (unsigned i : ready) {
        cur_thread = &th[i];
        resume(th[i]);
      }
      continue;
    }
    bool moved = false;
    for (unsigned w = 0; w < waves; ++w) {
      const int r = resolve_wave(th, n, w, err);
      if (r < 0) {
        L.fail(block_name(L.kernel, br.idx) + ": " + err);
        return BlockStatus::Failed;
      }
      moved |= r > 0;
    }
    if (moved) continue;
    unsigned live = 0, at_barrier = 0, at_cluster = 0, at_named = 0, at_mbar = 0;
    for (unsigned i = 0; i < n; ++i) {
      live += th[i].state != State::Done;
      at_mbar += th[i].state == State::AtMbarrier;
      at_barrier += th[i].state == State::AtBarrier;
      at_cluster += th[i].state == State::AtClusterBarrier;
      at_named += th[i].state == State::AtNamedBarrier;
    }
    if (live == 0) {
      if (const size_t lost = bulk_abandoned()) {
        L.fail(block_name(L.kernel, br.idx) + ": the block exited with " + std::to_string(lost) +
               " bulk copies (cp.async.bulk) in flight: no thread waited on their mbarrier, so nothing read "
               "what they wrote (a missing qsa_mbar_wait?)");
        return BlockStatus::Failed;
      }
      const std::string pending = named_pending(br.bars);
      if (pending.empty()) return BlockStatus::Done;
      L.fail(block_name(L.kernel, br.idx) + ": the block exited with arrivals pending at named barriers (" + pending +
             "): a bar.arrive no bar.sync consumed");
      return BlockStatus::Failed;
    }
    if (at_mbar > 0) {  // nothing can move, and no copy is left to land on these mbarriers
      bulk_abandoned();
      L.fail(block_name(L.kernel, br.idx) + ": deadlock: " + std::to_string(at_mbar) + " of " + std::to_string(live) +
             " live threads wait on mbarrier phases that never complete (an arrival or expect_tx missing, a "
             "wrong parity, or a count larger than the arrivals), the rest at barriers, collectives or exited");
      return BlockStatus::Failed;
    }
    if (at_named > 0) {  // nothing can move, and named waiters are only released by arrivals
      L.fail(block_name(L.kernel, br.idx) + ": deadlock: " + std::to_string(at_named) + " of " + std::to_string(live) +
             " live threads wait at named barriers (" + named_pending(br.bars) + ") that the others (" +
             std::to_string(at_barrier) + " at __syncthreads, the rest at a collective or exited) never complete");
      return BlockStatus::Failed;
    }
    if (at_barrier == live) {
      if (live == n) {
        check_balance("__syncthreads", 0, false);
        if (L.failed) return BlockStatus::Failed;
      }
      for (unsigned i = 0; i < n; ++i)
        if (th[i].state == State::AtBarrier) th[i].state = State::Ready;
      continue;
    }
    if (at_cluster == live) {
      if (live == n) return BlockStatus::AtCluster;
      L.fail(block_name(L.kernel, br.idx) + ": " + std::to_string(n - live) + " of " + std::to_string(n) +
             " threads exited while the others wait at qsa_cluster_sync, which waits for every thread of every "
             "block of the cluster: a barrier they never reach");
      return BlockStatus::Failed;
    }
    if (at_cluster > 0 && at_cluster + at_barrier == live) {
      L.fail(block_name(L.kernel, br.idx) + ": " + std::to_string(at_cluster) +
             " threads wait at qsa_cluster_sync while " + std::to_string(at_barrier) +
             " wait at __syncthreads: divergent control flow around a barrier");
      return BlockStatus::Failed;
    }
    L.fail(block_name(L.kernel, br.idx) + ": deadlock: " + std::to_string(at_barrier + at_cluster) + " of " +
           std::to_string(live) +
           " live threads wait at __syncthreads or qsa_cluster_sync while the others wait at a wave collective "
           "that lanes at the barrier (or exited lanes) never reach");
    return BlockStatus::Failed;
  }
}

// Run the cluster whose rank-0 block is `first` to completion on this OS thread (a cluster of
// one: one block). False on an error (recorded in `L`).
inline bool run_cluster(Launch& L, FiberPool& pool, Cluster& c, Dim3 first, unsigned long long linear_cluster) {
  const qsa_emu_launch_t& d = *L.desc;
  const unsigned n = d.block[0] * d.block[1] * d.block[2];
  if (c.size == 1) {  // no copies: the one block's shared memory stays in TLS
    unsigned char* anchor = &tls_anchor;
    for (int r = 0; r < d.n_shared_ranges; ++r)
      memset(anchor + d.shared_ranges[2 * r], d.poison, (size_t)d.shared_ranges[2 * r + 1]);
  } else {
    std::fill(c.saved.begin(), c.saved.end(), d.poison);  // each block's memory poisoned
    c.loaded = false;
  }
  c.blocks.resize(c.size);
  for (unsigned r = 0; r < c.size; ++r) {
    BlockRun& br = c.blocks[r];
    br.idx = Dim3{first.x + r, first.y, first.z};
    const unsigned long long linear =
        br.idx.x + (unsigned long long)d.grid[0] * (br.idx.y + (unsigned long long)d.grid[1] * br.idx.z);
    br.rng.seed(d.seed ^ (linear * 0x9e3779b97f4a7c15ull));
    br.status = BlockStatus::Running;
    br.bars = NamedBarriers{};
    br.th = pool.threads.data() + (size_t)r * n;
    for (unsigned i = 0; i < n; ++i) {
      Thread& t = br.th[i];
      t.idx = Dim3{i % d.block[0], (i / d.block[0]) % d.block[1], i / (d.block[0] * d.block[1])};
      t.linear = i;
      t.lane = i % QSA_WAVE;
      t.wave = i / QSA_WAVE;
      t.state = State::Ready;
      t.passes = 0;
      start_fiber(t, pool.stack((size_t)r * n + i), pool.stack_bytes, &pool.sched);
    }
  }
  cur_cluster = &c;
  bulk_abandoned();  // a failed block before this one may have left copies
  std::mt19937_64 rng(d.seed ^ ~(linear_cluster * 0x9e3779b97f4a7c15ull));
  std::vector<unsigned> order(c.size), ready;
  ready.reserve(n);
  for (;;) {
    for (unsigned r = 0; r < c.size; ++r) order[r] = d.schedule == REVERSE ? c.size - 1 - r : r;
    if (d.schedule == RANDOM) std::shuffle(order.begin(), order.end(), rng);
    for (unsigned r : order) {
      BlockRun& br = c.blocks[r];
      if (br.status != BlockStatus::Running) continue;
      load_block(c, r);
      br.status = step_block(L, pool, br, ready);
      if (br.status == BlockStatus::Failed || L.failed.load()) return false;
    }
    const BlockRun* waiting = nullptr;
    const BlockRun* done = nullptr;
    for (const BlockRun& br : c.blocks) (br.status == BlockStatus::Done ? done : waiting) = &br;
    if (!waiting) return true;
    if (done) {
      L.fail(block_name(L.kernel, waiting->idx) + ": waits at qsa_cluster_sync while block (" +
             std::to_string(done->idx.x) + "," + std::to_string(done->idx.y) + "," + std::to_string(done->idx.z) +
             ") of its cluster exited without reaching it");
      return false;
    }
    for (BlockRun& br : c.blocks) {  // every thread of the cluster is at the barrier
      for (unsigned i = 0; i < n; ++i) br.th[i].state = State::Ready;
      br.status = BlockStatus::Running;
    }
  }
}

// Fibers one OS thread may hold: each stack has a guard page, so a pool maps 2 areas per
// fiber, and Linux allows a process vm.max_map_count areas (65,530 by default). 16,384
// fibers per launch (16 workers of 1,024-thread blocks, or 2 workers of 8-block clusters)
// take half of that; past it a launch uses fewer workers rather than fail to map memory.
constexpr unsigned long long FIBER_BUDGET = 16384;

inline void worker(Launch& L) {
  const qsa_emu_launch_t& d = *L.desc;
  FiberPool pool;
  Cluster c;
  c.L = &L;
  c.size = L.kernel->cluster;
  const unsigned n = d.block[0] * d.block[1] * d.block[2];
  pool.ensure((size_t)n * c.size, (size_t)d.stack_bytes);
  if (pool.count < (size_t)n * c.size) {
    L.fail(std::string(L.kernel->name) + ": cannot map fiber stacks for " + std::to_string(n * c.size) + " threads");
    return;
  }
  for (int r = 0; r < d.n_shared_ranges; ++r) c.block_bytes += saved_span(d.shared_ranges[2 * r + 1]);
  if (c.size > 1) c.saved.assign(c.size * c.block_bytes, 0);
  const unsigned clusters_x = d.grid[0] / c.size;
  const unsigned long long total = (unsigned long long)clusters_x * d.grid[1] * d.grid[2];
  for (;;) {
    if (L.failed.load()) break;
    const unsigned long long i = L.next.fetch_add(1);
    if (i >= total) break;
    const unsigned long long lin = d.schedule == REVERSE ? total - 1 - i : i;
    const Dim3 first = {(unsigned)(lin % clusters_x) * c.size, (unsigned)((lin / clusters_x) % d.grid[1]),
                        (unsigned)(lin / ((unsigned long long)clusters_x * d.grid[1]))};
    if (!run_cluster(L, pool, c, first, lin)) break;
  }
  cur_cluster = nullptr;
}

}  // namespace qsa_emu

// bar.sync id, count / bar.arrive id, count (mma.h's qsa_bar_sync / qsa_bar_arrive): the
// arrival counts; a sync waits (a sync point) until `count` threads arrived since the barrier
// last completed.
inline void qsa_bar_sync(unsigned id, unsigned count) {
  ++qsa_emu::cur_thread->passes;
  if (!qsa_emu::named_arrival(id, count, true)) {
    qsa_emu::cur_thread->named = id;
    qsa_emu::yield_to_scheduler(qsa_emu::State::AtNamedBarrier);
  }
}
inline void qsa_bar_arrive(unsigned id, unsigned count) { (void)qsa_emu::named_arrival(id, count); }
