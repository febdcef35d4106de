// STITCH_CHECK: internal invariants. A failed check is a compiler bug, never
// a user error; it aborts with the file, line and condition (in every build
// type), so a bug can never turn into a silently wrong answer.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace stitch::detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond,
                                      const std::string& msg) {
  std::fprintf(stderr, "stitch internal error at %s:%d: check failed: %s%s%s\n", file, line,
               cond, msg.empty() ? "" : ": ", msg.c_str());
  std::fprintf(stderr, "This is a bug in stitch; please report it with the model.\n");
  std::fflush(stderr);
  std::abort();
}
}  // namespace stitch::detail

#define STITCH_CHECK(cond, ...)                                                              \
  do {                                                                                       \
    if (!(cond)) ::stitch::detail::check_failed(__FILE__, __LINE__, #cond,                   \
                                                 ::fmt::format("" __VA_ARGS__));             \
  } while (0)

#define STITCH_UNREACHABLE(...) \
  ::stitch::detail::check_failed(__FILE__, __LINE__, "unreachable", ::fmt::format("" __VA_ARGS__))
