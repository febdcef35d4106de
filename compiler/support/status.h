// Status and StatusOr: how user-facing failures travel in stitch.
//
// A failure the user can fix (bad file, unsupported op, bad shape binding,
// wrong input) is a Status with a message that names the file, node or input
// at fault and says what to do. The CLI maps Code to the exit codes of
// DESIGN.md. Compiler bugs are not Statuses: they use STITCH_CHECK (check.h).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace stitch {

enum class Code {
  kOk = 0,
  kMismatch = 1,  // verification found outputs that differ from the expectation
  kUser = 2,      // bad input of any kind: the user can fix it
  kInternal = 3,  // a compiler or runtime bug reached the surface
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status user(std::string msg) { return Status(Code::kUser, std::move(msg)); }
  static Status internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  static Status mismatch(std::string msg) { return Status(Code::kMismatch, std::move(msg)); }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with context, e.g. the file or node being processed.
  Status with_context(const std::string& ctx) const {
    if (is_ok()) return *this;
    return Status(code_, ctx + ": " + message_);
  }

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).is_ok() && "StatusOr from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace stitch

#define STITCH_CONCAT_INNER(a, b) a##b
#define STITCH_CONCAT(a, b) STITCH_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` fails.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::stitch::Status _st = (expr);                 \
    if (!_st.is_ok()) return _st;                  \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the failure.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(STITCH_CONCAT(_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.is_ok()) return tmp.status();      \
  lhs = std::move(tmp).value()
