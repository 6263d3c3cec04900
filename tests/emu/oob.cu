// Probe kernels of the emulator's guard zones (src/emu/guard.rs), for tests/emu_oob.rs: each
// thread stores at out[threadIdx.x + offset]; an offset that puts a store outside the
// buffer (past its end or before its start) must fail the launch by name, not corrupt the
// host heap (which killed the process with SIGSEGV before the zones).
#include "common/portable.h"

QSA_KERNEL void probe_oob_store(int* out, int offset) { out[(int)threadIdx.x + offset] = 7; }

// Each thread loads in[threadIdx.x + offset] into out[threadIdx.x]: an offset that puts a
// load past the end of `in` must fail the launch by name (the zones fault on reads too).
QSA_KERNEL void probe_oob_load(const int* in, int* out, int offset) {
  out[threadIdx.x] = in[(int)threadIdx.x + offset];
}
