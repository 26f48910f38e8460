// libFuzzer target: legacy DLManagedTensor from arbitrary bytes through
// dlb_import_legacy, re-export, copies and release (see fuzz_import.hpp).
#include "fuzz_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::run_import<false>(data, size);
}
