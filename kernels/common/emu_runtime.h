// qsa SIMT emulator, runtime: fibers, barriers, wave collectives, blocks over OS threads
// (emu_blocks.h: blocks, clusters, workers), and the C ABI the Rust side (src/emu/) loads. Included once per emulated module by the
// wrapper that src/emu/compile.rs generates, after the kernel source and the registry.
//
// A block runs on one OS thread: its threads are ucontext fibers with their own stacks.
// The scheduler runs every ready fiber, in the launch's order, until it stops at a sync
// point; then it resolves the wave collectives whose live lanes have all arrived, and when
// nothing else can move and every live thread waits at __syncthreads, it releases the
// barrier. The blocks of a thread-block cluster take turns on one OS thread, and a cluster
// barrier is released when every thread of every block waits at it (emu_cluster.h).
// Anything else (a wave split between a collective and a barrier, lanes of one wave at
// different collectives, a shuffle from an exited lane, a block that exits while its
// cluster waits for it) is an error naming the kernel and the block, never a hang.
#pragma once
#include "emu.h"  // and the standard headers, included there before its macros

namespace qsa_emu {

// ---- The registry: each kernel's name, C signature and a call through void* arguments.

struct KernelEntry {
  const char* name;
  const char* signature;  // one code per parameter: p pointer, i int, u unsigned, l 64-bit, f float
  void (*call)(void** args);
  unsigned cluster;  // blocks per cluster along x (QSA_CLUSTER_DIMS); 1 without clusters
};

template <class T> constexpr char arg_code() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_pointer_v<U>) return 'p';
  else if constexpr (std::is_same_v<U, int>) return 'i';
  else if constexpr (std::is_same_v<U, unsigned>) return 'u';
  else if constexpr (std::is_integral_v<U> && sizeof(U) == 8) return 'l';
  else if constexpr (std::is_same_v<U, float>) return 'f';
  else return '?';
}
template <class... A> struct Signature {
  static constexpr char value[] = {arg_code<A>()..., '\0'};
};
template <class... A> constexpr const char* signature_of(void (*)(A...)) { return Signature<A...>::value; }

template <class... A, size_t... I> void call_unpacked(void (*f)(A...), void** a, std::index_sequence<I...>) {
  f(*static_cast<std::remove_cv_t<A>*>(a[I])...);
}
template <class... A> void call_with(void (*f)(A...), void** a) { call_unpacked(f, a, std::index_sequence_for<A...>{}); }
template <auto F> void call(void** a) { call_with(F, a); }

#define QSA_EMU_ENTRY(f, cluster) \
  qsa_emu::KernelEntry{#f, qsa_emu::signature_of(&f), &qsa_emu::call<&f>, (cluster)}

// ---- One launch.

// WAVE_FIRST: only the lowest wave with a ready thread runs, and its wave collective (a
// matrix instruction included) is resolved as soon as its lanes arrive, before any other wave
// has run: the most skewed warps a card can have. A wave that reads shared memory other waves
// write without a barrier between (e.g. a wgmma reading an operand before the barrier that
// ends its staging) reads poison here, where the other schedules let every thread reach its
// first sync point before any collective resolves.
enum Schedule : int { FORWARD = 0, REVERSE = 1, RANDOM = 2, WAVE_FIRST = 3 };

}  // namespace qsa_emu

// The launch as the Rust side passes it (src/emu/ffi.rs mirrors this layout).
struct qsa_emu_launch_t {
  int kernel;
  unsigned grid[3], block[3];
  void** args;  // one pointer per parameter, to the value
  int schedule;
  int workers;
  unsigned long long seed;
  // Shared memory (static __shared__ variables and the dynamic array) as (offset from the
  // module's TLS anchor, bytes) pairs: filled with `poison` before each block runs, so a
  // read of what no thread of the block wrote differs between schedules.
  const long long* shared_ranges;
  int n_shared_ranges;
  unsigned char poison;
  unsigned long long stack_bytes;
};

namespace qsa_emu {

struct Launch {
  const KernelEntry* kernel;
  const qsa_emu_launch_t* desc;
  std::atomic<unsigned long long> next{0};
  std::atomic<bool> failed{false};
  std::mutex err_mutex;
  std::string error;

  void fail(const std::string& e) {
    std::lock_guard<std::mutex> g(err_mutex);
    if (!failed.exchange(true)) error = e;
  }
};

static thread_local Launch* cur_launch = nullptr;

inline void fiber_main() {
  cur_launch->kernel->call(cur_launch->desc->args);
  cur_thread->state = State::Done;
}

// ---- Context switches between the scheduler and its fibers. glibc's swapcontext saves the
// signal mask with a system call at every switch: 90% of an emulated attention run's time
// (perf, 2026-12-01). On x86-64 the switch is the callee-saved registers pushed on the old
// stack and popped from the new one (MXCSR and the x87 control word are not switched: no
// kernel changes rounding modes, and every fiber of a thread shares them); elsewhere
// swapcontext.
#if defined(__x86_64__)
extern "C" void qsa_emu_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .p2align 4
  .hidden qsa_emu_switch
  .type qsa_emu_switch, @function
qsa_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size qsa_emu_switch, .-qsa_emu_switch
)");

static thread_local void* sched_sp = nullptr;

inline void switch_to_scheduler(Thread* t) { qsa_emu_switch(&t->sp, sched_sp); }

[[noreturn]] inline void fiber_entry() {
  fiber_main();
  void* done;
  qsa_emu_switch(&done, sched_sp);  // never resumed
  __builtin_unreachable();
}

// A fresh fiber on `stack`: the frame qsa_emu_switch pops, returning into fiber_entry with
// the stack aligned as after a call.
inline void start_fiber(Thread& t, unsigned char* stack, size_t bytes, ucontext_t*) {
  uint64_t* top = (uint64_t*)((uintptr_t)(stack + bytes) & ~(uintptr_t)15);
  uint64_t* ret = top - 2;  // 16-byte aligned: fiber_entry starts with rsp = 8 mod 16
  ret[1] = 0;               // fiber_entry's own return address: it never returns
  ret[0] = (uint64_t)(uintptr_t)&fiber_entry;
  uint64_t* sp = ret - 6;   // rbp rbx r12 r13 r14 r15, zero
  for (int i = 0; i < 6; ++i) sp[i] = 0;
  t.sp = sp;
}

inline void resume(Thread& t) { qsa_emu_switch(&sched_sp, t.sp); }
#else
inline void switch_to_scheduler(Thread* t) { swapcontext(&t->ctx, sched_ctx); }

inline void start_fiber(Thread& t, unsigned char* stack, size_t bytes, ucontext_t* sched) {
  getcontext(&t.ctx);
  t.ctx.uc_stack.ss_sp = stack;
  t.ctx.uc_stack.ss_size = bytes;
  t.ctx.uc_link = sched;  // returning from fiber_main resumes the scheduler
  makecontext(&t.ctx, (void (*)())fiber_main, 0);
}

inline void resume(Thread& t) { swapcontext(sched_ctx, &t.ctx); }
#endif

// The fibers of one OS thread, reused block after block.
struct FiberPool {
  std::vector<Thread> threads;
  // The scheduler's own context: fibers switch back to it. A member rather than a local of
  // step_block, so `sched_ctx` never holds a stack address (g++ 13 warns on that:
  // -Wdangling-pointer, seen on the H200 image's compiler, 2026-12-01).
  ucontext_t sched;
  unsigned char* stacks = nullptr;
  size_t stack_bytes = 0, count = 0;

  void ensure(size_t n, size_t bytes) {
    if (n <= count && bytes == stack_bytes) return;
    release();
    const size_t page = 4096;
    stack_bytes = (bytes + page - 1) / page * page;
    const size_t each = stack_bytes + page;  // a guard page below each stack
    void* m = mmap(nullptr, each * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return;
    stacks = (unsigned char*)m;
    for (size_t i = 0; i < n; ++i) mprotect(stacks + i * each, page, PROT_NONE);
    threads.assign(n, Thread{});
    count = n;
  }
  unsigned char* stack(size_t i) const { return stacks + i * (stack_bytes + 4096) + 4096; }
  void release() {
    if (stacks) munmap(stacks, (stack_bytes + 4096) * count);
    stacks = nullptr;
    count = 0;
  }
  ~FiberPool() { release(); }
};

inline std::string block_name(const KernelEntry* k, Dim3 b) {
  char buf[160];
  snprintf(buf, sizeof buf, "%s, block (%u,%u,%u)", k->name, b.x, b.y, b.z);
  return buf;
}

inline const char* op_name(int op) {
  static const char* names[] = {"shfl", "shfl_xor", "shfl_up", "shfl_down", "ballot", "any", "all", "syncwarp",
                                "matrix exchange"};
  return op >= 0 && op <= OP_EXCHANGE ? names[op] : "?";
}

// The source lane of a shuffle, CUDA's / HIP's semantics within segments of `width` lanes;
// -1 when the lane keeps its own value.
inline int shuffle_source(int op, unsigned lane, int arg, unsigned width) {
  const unsigned seg = lane & ~(width - 1), off = lane - seg;
  switch (op) {
    case OP_SHFL: return (int)(seg + ((unsigned)arg & (width - 1)));
    case OP_SHFL_UP: return off >= (unsigned)arg ? (int)(lane - arg) : -1;
    case OP_SHFL_DOWN: return off + (unsigned)arg < width ? (int)(lane + arg) : -1;
    case OP_SHFL_XOR: {
      const unsigned j = lane ^ (unsigned)arg;
      return (j & ~(width - 1)) == seg ? (int)j : -1;
    }
  }
  return -1;
}

// Resolve wave `w`'s collective if every live lane waits at it. Returns 1 when resolved, 0
// when not ready, -1 on an error (written to `err`).
inline int resolve_wave(Thread* th, unsigned n, unsigned w, std::string& err) {
  const unsigned lo = w * QSA_WAVE, hi = std::min(n, lo + QSA_WAVE);
  unsigned live = 0, at = 0;
  int op = -1, width = 0;
  ExchangeFn fn = nullptr;
  for (unsigned i = lo; i < hi; ++i) {
    if (th[i].state == State::Done) continue;
    ++live;
    if (th[i].state != State::AtCollective) continue;
    ++at;
    if (op < 0) {
      op = th[i].op;
      width = th[i].width;
      fn = th[i].exchange;
    } else if (th[i].op != op || th[i].width != width || (op == OP_EXCHANGE && th[i].exchange != fn)) {
      err = std::string("lanes of wave ") + std::to_string(w) + " wait at different collectives (" + op_name(op) +
            ", " + op_name(th[i].op) + "): divergent control flow around a wave operation";
      return -1;
    }
  }
  if (at == 0 || at != live) return 0;
  if (width <= 0 || width > QSA_WAVE || (width & (width - 1))) {
    err = std::string(op_name(op)) + " with width " + std::to_string(width) + ": must be a power of two <= " +
          std::to_string(QSA_WAVE);
    return -1;
  }
  if (op == OP_EXCHANGE) {
    // A matrix instruction needs the whole wave: every lane holds part of the operands.
    if (hi - lo != QSA_WAVE || live != QSA_WAVE) {
      err = std::string("a matrix instruction in wave ") + std::to_string(w) + " ran with " + std::to_string(live) +
            " of " + std::to_string(QSA_WAVE) + " lanes: it needs the whole wave";
      return -1;
    }
    void* lanes[QSA_WAVE];
    for (unsigned i = lo; i < hi; ++i) lanes[i - lo] = th[i].exchange_data;
    if (!fn(lanes, err)) {
      err = "wave " + std::to_string(w) + ": " + err;
      return -1;
    }
    for (unsigned i = lo; i < hi; ++i) th[i].state = State::Ready;
    return 1;
  }
  uint64_t mask = 0;
  unsigned ones = 0;
  for (unsigned i = lo; i < hi; ++i)
    if (th[i].state == State::AtCollective && (th[i].value & 1)) {
      mask |= 1ull << (i - lo);
      ++ones;
    }
  for (unsigned i = lo; i < hi; ++i) {
    Thread& t = th[i];
    if (t.state != State::AtCollective) continue;
    switch (op) {
      case OP_BALLOT: t.result = mask; break;
      case OP_ANY: t.result = ones > 0; break;
      case OP_ALL: t.result = ones == live; break;
      case OP_SYNCWARP: t.result = 0; break;
      default: {
        const int src = shuffle_source(op, i - lo, t.arg, (unsigned)width);
        if (src < 0) {
          t.result = t.value;
        } else if (lo + src >= hi || th[lo + src].state != State::AtCollective) {
          err = std::string(op_name(op)) + " in lane " + std::to_string(i - lo) + " of wave " + std::to_string(w) +
                " reads lane " + std::to_string(src) + ", which has exited or does not exist";
          return -1;
        } else {
          t.result = th[lo + src].value;
        }
      }
    }
  }
  for (unsigned i = lo; i < hi; ++i)
    if (th[i].state == State::AtCollective) th[i].state = State::Ready;
  return 1;
}

}  // namespace qsa_emu

// Blocks, clusters and the workers that run them.
#include "emu_blocks.h"

// ---- The C ABI (src/emu/module.rs). The module is built with -fvisibility=hidden: only these
// are exported.
// The wrapper defines qsa_emu_kernels[] and its length.
#define QSA_EMU_EXPORT __attribute__((visibility("default")))
extern const qsa_emu::KernelEntry qsa_emu_kernels[];
extern const int qsa_emu_kernel_total;

extern "C" QSA_EMU_EXPORT int qsa_emu_wave() { return QSA_WAVE; }
extern "C" QSA_EMU_EXPORT int qsa_emu_kernel_count() { return qsa_emu_kernel_total; }
extern "C" QSA_EMU_EXPORT const char* qsa_emu_kernel_name(int i) { return qsa_emu_kernels[i].name; }
extern "C" QSA_EMU_EXPORT const char* qsa_emu_kernel_signature(int i) { return qsa_emu_kernels[i].signature; }

extern "C" QSA_EMU_EXPORT unsigned qsa_emu_kernel_cluster(int i) { return qsa_emu_kernels[i].cluster; }

// Run a launch to completion. 0 on success; else 1 with a message in err (NUL-terminated).
extern "C" QSA_EMU_EXPORT int qsa_emu_launch(const qsa_emu_launch_t* d, char* err, size_t err_bytes) {
  qsa_emu::Launch L;
  L.kernel = &qsa_emu_kernels[d->kernel];
  L.desc = d;
  const unsigned cluster = L.kernel->cluster;
  if (cluster == 0 || d->grid[0] % cluster != 0) {  // src/emu/module.rs refuses it first
    snprintf(err, err_bytes, "%s: grid x %u is not a multiple of its cluster size %u (QSA_CLUSTER_DIMS)",
             L.kernel->name, d->grid[0], cluster);
    return 1;
  }
  const unsigned long long clusters = (unsigned long long)d->grid[0] / cluster * d->grid[1] * d->grid[2];
  const unsigned long long fibers = (unsigned long long)d->block[0] * d->block[1] * d->block[2] * cluster;
  const unsigned long long most = std::max(1ull, qsa_emu::FIBER_BUDGET / std::max(1ull, fibers));
  const unsigned workers = (unsigned)std::max(1ull, std::min({(unsigned long long)d->workers, clusters, most}));
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back([&L] { qsa_emu::worker(L); });
  qsa_emu::worker(L);
  for (auto& t : pool) t.join();
  if (!L.failed.load()) return 0;
  snprintf(err, err_bytes, "%s", L.error.c_str());
  return 1;
}
