// libFuzzer target: DLManagedTensorVersioned from arbitrary bytes through
// dlb_import_versioned, re-export, copies and release (see fuzz_import.hpp).
#include "fuzz_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::run_import<true>(data, size);
}
