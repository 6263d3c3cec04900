// An instruction the SIMT emulator does not model (inline PTX), for
// tests/emu_scores.rs: the emulated build must call it unsupported, naming it.
#include "common/portable.h"

QSA_KERNEL void uses_trap() { asm volatile("trap;"); }
