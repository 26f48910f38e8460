// Where the time of a large allocate + copy goes, call by call.
//
// Each call allocates a fresh destination the way dlb_buffer_to_host does
// (mem_alloc_aligned), copies a 4096 x 4096 float64 view into it with the
// copy engine, reads what the kernel granted, and frees it. Printed per
// call:
//   total / alloc / copy ms   wall time of the call and of its two steps
//   faults                    minor page faults of the process (getrusage)
//   huge                      AnonHugePages of the destination's mapping
//                             (/proc/self/smaps), MiB
//   thp ok/fb, compact        /proc/vmstat deltas: huge pages faulted in,
//                             huge-page faults that fell back to 4 KiB
//                             pages, direct compaction stalls
//   per thread                parts run, faults taken inside them, and when
//                             (ms after the copy started) the thread
//                             finished its last part
// --touch first writes one byte per 4 KiB page of the destination (timed
// as "touch": the page faults alone, with the kernel's zeroing), so that
// the copy that follows runs on pages already in. --no-huge leaves the
// destination unadvised (4 KiB pages, like malloc's).
// The last line sums up the calls after the first: median and 90th
// percentile of the call time, faults, the fewest huge pages granted,
// THP fallbacks and compaction stalls, and the gap between the first and
// the last thread's finish (the time one thread waited for the other). --busy starts a
// spinning child process for the duration (stopped at the end).
//
// Run (release build):
//   build/bench/bench/copy_diagnose [--view contiguous|transposed|reversed]
//       [--calls N] [--threads N] [--touch] [--no-huge] [--busy] [--parts]
//       [--no-keep] [--parts-per-thread N] [--ab] [--src-huge] [--dest-order]
//       [--ab-order] [--ab-stream]
// (--parts: every part's thread, start and end, and faults; --no-keep: no
// freed destination kept for the next call, every call maps afresh, as
// before the kept mapping; --parts-per-thread 4: the split into four parts
// per thread of earlier versions instead of huge-page parts; --ab: three
// configurations call by call in turn, see Config below, each summed up;
// --src-huge: the source in a huge-page-advised mapping instead of 4 KiB
// pages; --dest-order: transposes walked in the destination's order and
// split by destination rows, as in earlier versions; --ab-order: that and
// the present walk call by call in turn, each summed up; --ab-stream:
// compact runs copied with memcpy, as in earlier versions, and streamed,
// call by call in turn, each summed up)
#include <dlbridge/dlbridge.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/alloc.hpp"
#include "copy/copy_engine.hpp"
#include "copy/copy_pool.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::int64_t minor_faults() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

std::map<std::string, std::int64_t> vmstat() {
  std::map<std::string, std::int64_t> m;
  std::ifstream f("/proc/vmstat");
  std::string k;
  std::int64_t v;
  while (f >> k >> v) m[k] = v;
  return m;
}

// AnonHugePages (kB) of the mapping that holds p.
std::int64_t anon_huge_kb(const void* p) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      std::istringstream in(line.substr(14));
      std::int64_t kb = 0;
      in >> kb;
      return kb;
    }
  }
  return -1;
}

// A fresh huge-page-aligned mapping advised for huge pages: what every
// large allocation was before the kept mapping.
void* fresh_mapping(std::size_t n) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  void* raw = mmap(nullptr, n + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (base + kHuge - 1) & ~static_cast<std::uintptr_t>(kHuge - 1);
  if (aligned > base) munmap(raw, aligned - base);
  const std::size_t tail = base + n + kHuge - (aligned + n);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + n), tail);
  madvise(reinterpret_cast<void*>(aligned), n, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

double load_average() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string view = "contiguous";
  int calls = 12, threads = 0, parts_per_thread = 0;
  bool touch = false, no_huge = false, src_huge = false, dest_order = false, busy = false, verbose = false;
  bool no_keep = false, ab = false, ab_order = false, ab_stream = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--view" && i + 1 < argc) view = argv[++i];
    else if (a == "--calls" && i + 1 < argc) calls = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--touch") touch = true;
    else if (a == "--no-huge") no_huge = true;
    else if (a == "--src-huge") src_huge = true;
    else if (a == "--dest-order") dest_order = true;
    else if (a == "--busy") busy = true;
    else if (a == "--parts") verbose = true;
    else if (a == "--no-keep") no_keep = true;
    else if (a == "--ab") ab = true;
    else if (a == "--ab-order") ab_order = true;
    else if (a == "--ab-stream") ab_stream = true;
    else if (a == "--parts-per-thread" && i + 1 < argc) parts_per_thread = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--view contiguous|transposed|reversed] [--calls N] [--threads N] "
                   "[--touch] [--no-huge] [--src-huge] [--dest-order] [--busy] [--parts] [--no-keep] [--parts-per-thread N] [--ab] [--ab-order] [--ab-stream]\n", argv[0]);
      return 2;
    }
  }
  constexpr std::int64_t k = 4096;
  constexpr std::size_t e = 8;
  const std::size_t n = static_cast<std::size_t>(k * k) * e;
  // The source: 4 KiB pages by default, like numpy 1.24's arrays here
  // (malloc, no huge-page advice); --src-huge: a huge-page-advised mapping.
  std::vector<double> src_store;
  double* src_data = nullptr;
  if (src_huge) {
    src_data = static_cast<double*>(fresh_mapping(n));
    if (src_data == nullptr) return 1;
  } else {
    src_store.resize(static_cast<std::size_t>(k * k));
    src_data = src_store.data();
  }
  for (std::size_t i = 0; i < static_cast<std::size_t>(k * k); ++i) src_data[i] = static_cast<double>(i);
  const auto* base = reinterpret_cast<const unsigned char*>(src_data);
  std::int64_t shape[2] = {k, k};
  std::int64_t strides[2] = {k, 1};
  const unsigned char* src = base;
  if (view == "transposed") {
    strides[0] = 1;
    strides[1] = k;
  } else if (view == "reversed") {
    strides[0] = -k;
    strides[1] = -1;
    src = base + (k * k - 1) * static_cast<std::int64_t>(e);
  } else if (view != "contiguous") {
    std::fprintf(stderr, "unknown view %s\n", view.c_str());
    return 2;
  }

  pid_t spinner = -1;
  if (busy) {
    spinner = fork();
    if (spinner == 0) {
      volatile unsigned long x = 0;
      for (;;) x = static_cast<unsigned long>(x) + 1;
    }
  }
  dlb::testing::set_huge_page_advice(!no_huge);
  dlb::testing::set_keep_large_mapping(!no_keep);
  dlb::testing::set_parts_per_thread(parts_per_thread);
  dlb::testing::set_transpose_source_order(!dest_order);
  const int nthreads = threads > 0 ? threads : 0;
  dlb_set_copy_threads(nthreads);
  const int used = dlb::copy_threads();
  std::printf("copy_diagnose: 4096x4096 float64 %s, %d thread(s), source huge pages %lld MiB%s%s%s%s%s, load %.2f\n",
              view.c_str(), used, static_cast<long long>(anon_huge_kb(base) / 1024),
              touch ? ", pre-touched" : "", no_huge ? ", no huge-page advice" : "", busy ? ", other core busy" : "",
              no_keep ? ", fresh mapping every call" : "",
              parts_per_thread > 0 ? (", " + std::to_string(parts_per_thread) + " parts per thread").c_str() : "",
              load_average());
  std::printf("%4s %8s %7s %7s %7s %7s %6s %5s %5s %5s  %s\n", "call", "total", "alloc", "touch", "copy", "faults",
              "hugeM", "thpok", "thpfb", "cstl", "per thread: parts/faults/finish ms");
  std::vector<dlb::testing::PartRecord> rec(1024);
  // For the summary: calls after the first of each configuration (which
  // also starts the pool).
  struct Stats {
    std::vector<double> totals, gaps, faults_per_call, touches, copies;
    std::int64_t min_huge_kb = INT64_MAX, fallbacks = 0, stalls = 0;
  };
  // --ab: every call takes the next of three configurations in turn, so
  // that they share the machine's load alike: the split of earlier versions
  // into a fresh mapping, the huge-page split into a fresh mapping, and the
  // huge-page split into the library's allocation (the kept mapping).
  // --ab-order: the transposes' walk and split of earlier versions
  // (destination order, parts of destination rows) and the present ones
  // (source order, parts of source rows), call by call, both into the
  // library's allocation; with --no-keep, both into fresh mappings.
  // --ab-stream: compact runs through memcpy (before) and streamed (now).
  struct Config {
    const char* name;
    int parts_per_thread;
    bool fresh;
    bool dest_order;
    bool compact_streaming = true;
  };
  std::vector<Config> configs;
  if (ab) {
    configs = {{"4 parts per thread, fresh mapping", 4, true, dest_order},
               {"huge-page parts, fresh mapping", 0, true, dest_order},
               {"huge-page parts, library allocation (kept mapping)", 0, false, dest_order}};
  } else if (ab_order) {
    configs = {{"destination order, destination-row parts (before)", parts_per_thread, no_keep, true},
               {"source order, source-row parts (now)", parts_per_thread, no_keep, false}};
  } else if (ab_stream) {
    configs = {{"compact runs through memcpy (before)", parts_per_thread, no_keep, dest_order, false},
               {"compact runs streamed (now)", parts_per_thread, no_keep, dest_order, true}};
  } else {
    configs = {{"as set", parts_per_thread, false, dest_order}};
  }
  const int ncfg = static_cast<int>(configs.size());
  std::vector<Stats> stats(configs.size());
  for (int c = 0; c < calls * ncfg; ++c) {
    const Config& cfg = configs[static_cast<std::size_t>(c % ncfg)];
    Stats& st = stats[static_cast<std::size_t>(c % ncfg)];
    dlb::testing::set_parts_per_thread(cfg.parts_per_thread);
    dlb::testing::set_transpose_source_order(!cfg.dest_order);
    dlb::testing::set_compact_streaming(cfg.compact_streaming);
    const auto vm0 = vmstat();
    const std::int64_t f0 = minor_faults();
    const auto t0 = Clock::now();
    auto* dst = static_cast<unsigned char*>(cfg.fresh ? fresh_mapping(n) : dlb::mem_alloc_aligned(64, n));
    const auto t1 = Clock::now();
    if (dst == nullptr) {
      std::fprintf(stderr, "allocation failed\n");
      return 1;
    }
    if (touch) {
      for (std::size_t i = 0; i < n; i += 4096) dst[i] = 0;
    }
    const auto t2 = Clock::now();
    dlb::testing::trace_parts(rec.data(), static_cast<int>(rec.size()));
    dlb::copy_strided_to_contiguous(src, 2, shape, strides, e, dst);
    const auto t3 = Clock::now();
    const int nparts = std::min(dlb::testing::parts_traced(), static_cast<int>(rec.size()));
    dlb::testing::trace_parts(nullptr, 0);
    const std::int64_t f1 = minor_faults();
    const std::int64_t huge_kb = anon_huge_kb(dst);
    const auto vm1 = vmstat();
    // Check one element per row, so that a wrong copy does not go unseen.
    for (std::int64_t r = 0; r < k; r += 97) {
      double got;
      std::memcpy(&got, dst + (r * k + 5) * 8, 8);
      double want;
      std::memcpy(&want, src + r * strides[0] * 8 + 5 * strides[1] * 8, 8);
      if (got != want) {
        std::fprintf(stderr, "wrong copy at row %lld\n", static_cast<long long>(r));
        return 1;
      }
    }
    if (cfg.fresh) {
      munmap(dst, n);
    } else {
      dlb::mem_free_aligned(dst);
    }
    auto d = [&](const char* key) {
      auto a = vm0.find(key), b = vm1.find(key);
      return a == vm0.end() || b == vm1.end() ? 0 : b->second - a->second;
    };
    const std::int64_t copy_start = std::chrono::duration_cast<std::chrono::nanoseconds>(t2.time_since_epoch()).count();
    std::map<int, std::vector<std::int64_t>> per;  // thread -> parts, faults, last end
    for (int i = 0; i < nparts; ++i) {
      auto& v = per[rec[static_cast<std::size_t>(i)].thread];
      if (v.empty()) v = {0, 0, 0};
      v[0] += 1;
      v[1] += rec[static_cast<std::size_t>(i)].minor_faults;
      v[2] = std::max(v[2], rec[static_cast<std::size_t>(i)].end_ns);
    }
    std::string threads_text;
    std::int64_t first_finish = INT64_MAX, last_finish = 0;
    for (auto& [who, v] : per) {
      first_finish = std::min(first_finish, v[2]);
      last_finish = std::max(last_finish, v[2]);
      char buf[96];
      std::snprintf(buf, sizeof buf, " t%d:%lld/%lld/%.1f", who, static_cast<long long>(v[0]),
                    static_cast<long long>(v[1]), static_cast<double>(v[2] - copy_start) / 1e6);
      threads_text += buf;
    }
    if (verbose) {
      for (int i = 0; i < nparts; ++i) {
        const auto& r = rec[static_cast<std::size_t>(i)];
        std::printf("     part %d thread %d: %.2f-%.2f ms, %lld faults\n", r.part, r.thread,
                    static_cast<double>(r.start_ns - copy_start) / 1e6, static_cast<double>(r.end_ns - copy_start) / 1e6,
                    static_cast<long long>(r.minor_faults));
      }
    }
    std::printf("%4d %8.2f %7.2f %7.2f %7.2f %7lld %6lld %5lld %5lld %5lld %s\n", c, ms_between(t0, t3),
                ms_between(t0, t1), ms_between(t1, t2), ms_between(t2, t3), static_cast<long long>(f1 - f0),
                static_cast<long long>(huge_kb / 1024), static_cast<long long>(d("thp_fault_alloc")),
                static_cast<long long>(d("thp_fault_fallback")), static_cast<long long>(d("compact_stall")),
                threads_text.c_str());
    if (c >= ncfg) {
      st.totals.push_back(ms_between(t0, t3));
      st.touches.push_back(ms_between(t1, t2));
      st.copies.push_back(ms_between(t2, t3));
      st.gaps.push_back(per.size() > 1 ? static_cast<double>(last_finish - first_finish) / 1e6 : 0.0);
      st.faults_per_call.push_back(static_cast<double>(f1 - f0));
      st.min_huge_kb = std::min(st.min_huge_kb, huge_kb);
      st.fallbacks += d("thp_fault_fallback");
      st.stalls += d("compact_stall");
    }
  }
  for (int k = 0; k < ncfg && calls > 1; ++k) {
    const Stats& st = stats[static_cast<std::size_t>(k)];
    auto pct = [](std::vector<double> v, double q) {
      std::sort(v.begin(), v.end());
      std::size_t k = static_cast<std::size_t>(q * static_cast<double>(v.size()) + 0.999999);
      k = k == 0 ? 0 : k - 1;
      return v[std::min(k, v.size() - 1)];
    };
    if (ab || ab_order || ab_stream) std::printf("%s: ", configs[static_cast<std::size_t>(k)].name);
    std::printf("summary (%d calls after the first): total median %.2f p90 %.2f ms (touch %.2f, copy %.2f); faults median %.0f; "
                "huge pages at least %lld MiB; "
                "THP fallbacks %lld, compaction stalls %lld; threads' finish gap median %.2f max %.2f ms; load %.2f\n",
                calls - 1, pct(st.totals, 0.5), pct(st.totals, 0.9), pct(st.touches, 0.5), pct(st.copies, 0.5),
                pct(st.faults_per_call, 0.5), static_cast<long long>(st.min_huge_kb / 1024),
                static_cast<long long>(st.fallbacks), static_cast<long long>(st.stalls), pct(st.gaps, 0.5),
                pct(st.gaps, 1.0), load_average());
  }
  if (spinner > 0) {
    kill(spinner, SIGKILL);
    waitpid(spinner, nullptr, 0);
  }
  return 0;
}
