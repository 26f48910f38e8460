// Marks memory that the library keeps for reuse as freed, for
// AddressSanitizer (poisoned) and valgrind (no access), so that a use
// after the owner let go is reported as it would be for freed memory; and
// as allocated again when it is handed out.
#ifndef DLBRIDGE_SRC_POISON_HPP_
#define DLBRIDGE_SRC_POISON_HPP_

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define DLB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DLB_ASAN 1
#endif
#endif

#if defined(DLB_ASAN)
#include <sanitizer/asan_interface.h>
#endif
// DLB_NO_VALGRIND_ANNOTATIONS leaves them out (for counting instructions
// under callgrind, where they would run).
#if defined(__has_include) && !defined(DLB_NO_VALGRIND_ANNOTATIONS)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define DLB_VALGRIND 1
#endif
#endif

namespace dlb {

#if defined(DLB_VALGRIND)
// Asked once: outside valgrind the hot paths then pay one predictable
// branch instead of a client request per block.
inline bool running_on_valgrind() noexcept { return RUNNING_ON_VALGRIND != 0; }
inline const bool g_under_valgrind = running_on_valgrind();
#endif

// The block's bytes now read as freed memory.
inline void mark_cached(void* block, std::size_t size) noexcept {
#if defined(DLB_ASAN)
  ASAN_POISON_MEMORY_REGION(block, size);
#endif
#if defined(DLB_VALGRIND)
  if (__builtin_expect(g_under_valgrind, 0)) (void)VALGRIND_MAKE_MEM_NOACCESS(block, size);
#endif
  (void)block;
  (void)size;
}

// The block's bytes are addressable again, their contents undefined.
inline void mark_taken(void* block, std::size_t size) noexcept {
#if defined(DLB_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(block, size);
#endif
#if defined(DLB_VALGRIND)
  if (__builtin_expect(g_under_valgrind, 0)) (void)VALGRIND_MAKE_MEM_UNDEFINED(block, size);
#endif
  (void)block;
  (void)size;
}

}  // namespace dlb

#endif
