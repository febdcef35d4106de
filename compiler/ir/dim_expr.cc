// Symbolic dimension expressions (dim_expr.h): a recursive-descent parser that evaluates as it
// reads, over exact rationals, so that floor(s/2) and s/2*2 mean what sympy meant by them.
#include "ir/dim_expr.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>
#include <vector>

namespace stitch {
namespace {

// num / den in lowest terms, den > 0.
struct Rational {
  int64_t num = 0, den = 1;
};

bool symbol_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool symbol_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

class DimParser {
 public:
  // `symbols` null: only collect the names read (every symbol then reads as 1).
  DimParser(std::string_view text, const std::map<std::string, int64_t>* symbols)
      : text_(text), symbols_(symbols) {}

  // The whole text as one expression; nullopt when it is not one (error() says why).
  std::optional<Rational> parse() {
    std::optional<Rational> v = expr();
    skip_ws();
    if (v && pos_ != text_.size()) return fail(fmt::format("unexpected '{}' at {}", text_[pos_], pos_));
    return v;
  }
  const std::string& error() const { return error_; }
  const std::set<std::string>& read() const { return read_; }

 private:
  std::optional<Rational> fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return std::nullopt;
  }

  std::optional<Rational> make(__int128 num, __int128 den) {
    if (!symbols_ && den == 0) return Rational{1, 1};  // collecting names: values do not matter
    if (den == 0) return fail("division by zero");
    if (den < 0) num = -num, den = -den;
    __int128 a = num < 0 ? -num : num, b = den;
    while (b != 0) {
      const __int128 t = a % b;
      a = b;
      b = t;
    }
    if (a > 1) num /= a, den /= a;
    constexpr __int128 kMax = INT64_MAX;
    if (!symbols_ && (num > kMax || num < -kMax || den > kMax)) return Rational{1, 1};
    if (num > kMax || num < -kMax || den > kMax) return fail("a value too large for a dimension");
    return Rational{static_cast<int64_t>(num), static_cast<int64_t>(den)};
  }

  static int64_t floor_of(Rational r) {
    const int64_t q = r.num / r.den;
    return (r.num % r.den != 0 && r.num < 0) ? q - 1 : q;
  }

  void skip_ws() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool take(std::string_view s) {
    skip_ws();
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }

  // expr := term (('+' | '-') term)*
  std::optional<Rational> expr() {
    std::optional<Rational> v = term();
    while (v) {
      const bool add = take("+");
      if (!add && !take("-")) break;
      std::optional<Rational> r = term();
      if (!r) return std::nullopt;
      const __int128 n =
          static_cast<__int128>(v->num) * r->den + (add ? 1 : -1) * static_cast<__int128>(r->num) * v->den;
      v = make(n, static_cast<__int128>(v->den) * r->den);
    }
    return v;
  }

  // term := unary (('*' | '//' | '/' | '%') unary)*
  std::optional<Rational> term() {
    std::optional<Rational> v = unary();
    while (v) {
      char op;
      if (take("*"))
        op = '*';
      else if (take("//"))
        op = 'f';
      else if (take("/"))
        op = '/';
      else if (take("%"))
        op = '%';
      else
        break;
      std::optional<Rational> r = unary();
      if (!r) return std::nullopt;
      if (op == '*') {
        v = make(static_cast<__int128>(v->num) * r->num, static_cast<__int128>(v->den) * r->den);
        continue;
      }
      if (r->num == 0) {
        if (!symbols_) continue;  // collecting names
        return fail("division by zero");
      }
      std::optional<Rational> q =
          make(static_cast<__int128>(v->num) * r->den, static_cast<__int128>(v->den) * r->num);
      if (!q) return std::nullopt;
      if (op == '/') {
        v = q;
      } else if (op == 'f') {
        v = Rational{floor_of(*q), 1};
      } else {  // a - b * floor(a / b), Python's sign convention
        const __int128 f = floor_of(*q);
        v = make(static_cast<__int128>(v->num) * r->den - f * r->num * v->den,
                 static_cast<__int128>(v->den) * r->den);
      }
    }
    return v;
  }

  // unary := '-' unary | '+' unary | primary
  std::optional<Rational> unary() {
    if (take("-")) {
      std::optional<Rational> v = unary();
      if (v) v->num = -v->num;
      return v;
    }
    if (take("+")) return unary();
    return primary();
  }

  // primary := integer | symbol | call '(' expr (',' expr)* ')' | '(' expr ')'
  std::optional<Rational> primary() {
    skip_ws();
    if (pos_ >= text_.size()) return fail("the expression ends early");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      std::optional<Rational> v = expr();
      if (v && !take(")")) return fail(fmt::format("expected ')' at {}", pos_));
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      __int128 n = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        n = n * 10 + (text_[pos_++] - '0');
        if (n > INT64_MAX) return fail("a number too large for a dimension");
      }
      return Rational{static_cast<int64_t>(n), 1};
    }
    if (!symbol_start(c)) return fail(fmt::format("unexpected '{}' at {}", c, pos_));
    const size_t start = pos_;
    while (pos_ < text_.size() && symbol_char(text_[pos_])) ++pos_;
    const std::string name(text_.substr(start, pos_ - start));
    if (take("(")) return call(name);
    read_.insert(name);
    if (!symbols_) return Rational{1, 1};
    auto it = symbols_->find(name);
    if (it == symbols_->end()) return fail(fmt::format("'{}' is not bound", name));
    return Rational{it->second, 1};
  }

  std::optional<Rational> call(const std::string& name) {
    std::vector<Rational> args;
    do {
      std::optional<Rational> a = expr();
      if (!a) return std::nullopt;
      args.push_back(*a);
    } while (take(","));
    if (!take(")")) return fail(fmt::format("expected ')' after the arguments of {}", name));
    auto less = [](Rational a, Rational b) {
      return static_cast<__int128>(a.num) * b.den < static_cast<__int128>(b.num) * a.den;
    };
    if ((name == "floor" || name == "FloorToInt") && args.size() == 1) return Rational{floor_of(args[0]), 1};
    if ((name == "ceiling" || name == "CeilToInt") && args.size() == 1)
      return Rational{-floor_of(Rational{-args[0].num, args[0].den}), 1};
    if (name == "Max" || name == "Min") {
      Rational best = args[0];
      for (const Rational& a : args)
        if (name == "Max" ? less(best, a) : less(a, best)) best = a;
      return best;
    }
    return fail(fmt::format("unknown function '{}' with {} argument(s)", name, args.size()));
  }

  std::string_view text_;
  const std::map<std::string, int64_t>* symbols_;
  size_t pos_ = 0;
  std::string error_;
  std::set<std::string> read_;
};

}  // namespace

bool is_dim_symbol(std::string_view text) {
  if (text.empty() || !symbol_start(text[0])) return false;
  for (char c : text)
    if (!symbol_char(c)) return false;
  return true;
}

std::optional<std::set<std::string>> dim_expr_symbols(std::string_view text) {
  if (is_dim_symbol(text)) return std::nullopt;
  DimParser p(text, nullptr);
  if (!p.parse()) return std::nullopt;
  return p.read();
}

StatusOr<int64_t> eval_dim_expr(std::string_view text, const std::map<std::string, int64_t>& symbols) {
  DimParser p(text, &symbols);
  std::optional<Rational> v = p.parse();
  if (!v) return Status::user(fmt::format("dimension '{}': {}", text, p.error()));
  if (v->den != 1)
    return Status::user(
        fmt::format("dimension '{}' is {}/{} with these bindings, not a whole number", text, v->num, v->den));
  return v->num;
}

}  // namespace stitch
