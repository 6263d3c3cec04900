#!/bin/sh
# The host C++ compiler as Ubuntu's g++ behaves by default (_FORTIFY_SOURCE=3 predefined),
# for tests/emu_fortify.rs: an emulated module must run under glibc's fortified calls.
exec "${QSA_EMU_REAL_CXX:-c++}" -D_FORTIFY_SOURCE=3 "$@"
