// Fixture source for src/backend/hip/code_object.rs tests (see testdata/README.md).
extern "C" __attribute__((global)) void qsa_probe(int* p) { p[__builtin_amdgcn_workitem_id_x()] = 1; }
