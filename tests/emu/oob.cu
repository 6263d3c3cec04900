// Probe kernel of the emulator's guard zones (src/emu/api.rs), for tests/emu_oob.rs: each
// thread stores at out[threadIdx.x + offset]; an offset that puts a store outside the
// buffer (past its end or before its start) must fail the launch by name, not corrupt the
// host heap (which killed the process with SIGSEGV before the zones).
#include "common/portable.h"

QSA_KERNEL void probe_oob_store(int* out, int offset) { out[(int)threadIdx.x + offset] = 7; }
