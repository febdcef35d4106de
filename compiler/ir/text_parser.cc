// Parser for the text form printed by text_printer.cc (grammar in text.h).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

#include "ir/legacy_forms.h"
#include "ir/op_table.h"
#include "ir/text.h"

namespace stitch {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  StatusOr<std::unique_ptr<Graph>> parse() {
    auto g = std::make_unique<Graph>();
    g_ = g.get();
    RETURN_IF_ERROR(keyword("graph"));
    ASSIGN_OR_RETURN(g->name, string_lit());
    RETURN_IF_ERROR(keyword("opset"));
    ASSIGN_OR_RETURN(int64_t opset, integer());
    // As the importer reads a model of opset 1 to 10: its nodes in their own forms until
    // infer_shapes upgrades them (ir/legacy_forms.h), the graph in opset 11's.
    g->model_opset = static_cast<int>(opset);
    g->opset = std::max(g->model_opset, kMinOpset);
    RETURN_IF_ERROR(expect('{'));
    while (true) {
      skip_ws();
      if (peek() == '}') { ++pos_; break; }
      if (at_end()) return error("unexpected end of text; missing '}'");
      RETURN_IF_ERROR(statement());
    }
    for (auto& [name, v] : pending_)
      if (!v->producer && !v->constant && !is_input(v))
        return Status::user(fmt::format("text IR: value %{} is used but never defined", name));
    return g;
  }

 private:
  Status statement() {
    if (try_keyword("input")) {
      ASSIGN_OR_RETURN(Value* v, define_value());
      RETURN_IF_ERROR(expect(':'));
      RETURN_IF_ERROR(type(*v));
      g_->inputs.push_back(v);
      return Status::ok();
    }
    if (try_keyword("output")) {
      ASSIGN_OR_RETURN(Value* v, use_value());
      g_->outputs.push_back(v);
      return Status::ok();
    }
    if (try_keyword("const")) {
      ASSIGN_OR_RETURN(Value* v, define_value());
      RETURN_IF_ERROR(expect(':'));
      ASSIGN_OR_RETURN(Tensor t, tensor_type());
      RETURN_IF_ERROR(expect('='));
      RETURN_IF_ERROR(tensor_values(t));
      v->dtype = t.dtype();
      v->dims = t.dims();
      v->constant = std::move(t);
      return Status::ok();
    }
    return node();
  }

  Status node() {
    auto n = std::make_unique<Node>();
    n->opset = g_->model_opset;
    while (true) {
      skip_ws();
      if (peek() == '_') {
        ++pos_;
        n->outputs.push_back(nullptr);
      } else {
        ASSIGN_OR_RETURN(Value* v, define_value());
        skip_ws();
        if (peek() == ':') {
          ++pos_;
          RETURN_IF_ERROR(type(*v));
        }
        n->outputs.push_back(v);
      }
      skip_ws();
      if (peek() == ',') { ++pos_; continue; }
      break;
    }
    RETURN_IF_ERROR(expect('='));
    ASSIGN_OR_RETURN(std::string op, ident());
    if (auto p = op.rfind("::"); p != std::string::npos) {
      n->domain = op.substr(0, p);
      n->op_type = op.substr(p + 2);
    } else {
      n->op_type = op;
    }
    RETURN_IF_ERROR(expect('('));
    skip_ws();
    if (peek() != ')') {
      while (true) {
        skip_ws();
        if (peek() == '_') {
          ++pos_;
          n->inputs.push_back(nullptr);
        } else {
          ASSIGN_OR_RETURN(Value* v, use_value());
          n->inputs.push_back(v);
        }
        skip_ws();
        if (peek() == ',') { ++pos_; continue; }
        break;
      }
    }
    RETURN_IF_ERROR(expect(')'));
    skip_ws();
    if (peek() == '{') {
      ++pos_;
      while (true) {
        skip_ws();
        if (peek() == '}') { ++pos_; break; }
        ASSIGN_OR_RETURN(std::string key, ident());
        RETURN_IF_ERROR(expect('='));
        ASSIGN_OR_RETURN(AttrValue a, attr_value());
        n->attrs[key] = std::move(a);
        skip_ws();
        if (peek() == ',') ++pos_;
      }
    }
    skip_ws();
    if (try_keyword("opset")) {
      ASSIGN_OR_RETURN(int64_t opset, integer());
      n->opset = static_cast<int>(opset);
      skip_ws();
    }
    if (peek() == '@') {
      ++pos_;
      ASSIGN_OR_RETURN(n->name, string_lit());
    } else {
      n->name = fmt::format("{}_{}", n->op_type, g_->nodes().size());
    }
    n->def = find_model_op(n->domain, n->op_type, n->opset);
    if (const OpDef* d = find_op(n->domain, n->op_type, n->opset); !n->def && d && d->internal)
      n->def = d;  // the text form also writes the compiler's own ops (a dump after the passes)
    g_->add_node(std::move(n));
    return Status::ok();
  }

  // ---- values and types ----
  StatusOr<std::string> value_name() {
    skip_ws();
    if (peek() != '%') return error("expected a value name starting with %");
    ++pos_;
    if (peek() == '"') return string_lit();
    size_t b = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || std::strchr("_./-", s_[pos_]))) ++pos_;
    if (b == pos_) return error("empty value name");
    return s_.substr(b, pos_ - b);
  }
  StatusOr<Value*> define_value() {
    ASSIGN_OR_RETURN(std::string name, value_name());
    Value* v = g_->find_value(name);
    if (v && (v->producer || v->constant || is_input(v) || defined_.count(name)))
      return error(fmt::format("value %{} is defined twice", name));
    if (!v) v = g_->add_value(name);
    defined_.insert(name);
    return v;
  }
  StatusOr<Value*> use_value() {
    ASSIGN_OR_RETURN(std::string name, value_name());
    Value* v = g_->find_value(name);
    if (!v) {
      v = g_->add_value(name);
      pending_[name] = v;
    }
    return v;
  }
  bool is_input(const Value* v) const {
    return std::find(g_->inputs.begin(), g_->inputs.end(), v) != g_->inputs.end();
  }

  Status type(Value& v) {
    ASSIGN_OR_RETURN(std::string t, ident());
    auto dt = dtype_from_name(t);
    if (!dt) return error(fmt::format("unknown element type '{}'", t));
    v.dtype = *dt;
    RETURN_IF_ERROR(expect('['));
    skip_ws();
    if (peek() == '*') {
      ++pos_;
      return expect(']');
    }
    Dims d;
    std::vector<std::string> params;
    bool any_param = false;
    skip_ws();
    while (peek() != ']') {
      skip_ws();
      if (peek() == '?') {
        ++pos_;
        d.push_back(-1);
        params.emplace_back();
      } else if (std::isdigit(static_cast<unsigned char>(peek()))) {
        ASSIGN_OR_RETURN(int64_t x, integer());
        d.push_back(x);
        params.emplace_back();
      } else {
        // A symbol, or a quoted dim_param that is not one (an expression such as "past + 1")
        ASSIGN_OR_RETURN(std::string p, peek() == '"' ? string_lit() : ident());
        d.push_back(-1);
        params.push_back(p);
        any_param = true;
      }
      skip_ws();
      if (peek() == ',') ++pos_;
      else if (peek() != ']') return error("expected ',' or ']' in a shape");
    }
    ++pos_;
    v.dims = d;
    if (any_param) v.dim_params = params;
    return Status::ok();
  }

  StatusOr<Tensor> tensor_type() {
    ASSIGN_OR_RETURN(std::string t, ident());
    auto dt = dtype_from_name(t);
    if (!dt) return error(fmt::format("unknown element type '{}'", t));
    RETURN_IF_ERROR(expect('['));
    Dims d;
    skip_ws();
    while (peek() != ']') {
      ASSIGN_OR_RETURN(int64_t x, integer());
      if (x < 0) return error("negative dimension");
      d.push_back(x);
      skip_ws();
      if (peek() == ',') ++pos_;
    }
    ++pos_;
    return Tensor(*dt, d);
  }

  Status tensor_values(Tensor& t) {
    skip_ws();
    if (peek() == '<') return error("constant data was elided when this text was printed; it cannot be parsed back");
    RETURN_IF_ERROR(expect('['));
    int64_t i = 0;
    skip_ws();
    while (peek() != ']') {
      if (i >= t.size()) return error(fmt::format("more than the {} values the type holds", t.size()));
      ASSIGN_OR_RETURN(auto num, number());
      if (is_float(t.dtype())) t.set_f64(i, num.first);
      else t.set_i64(i, num.second);
      ++i;
      skip_ws();
      if (peek() == ',') ++pos_;
      skip_ws();
    }
    ++pos_;
    if (i != t.size()) return error(fmt::format("{} values given for a tensor of {}", i, t.size()));
    return Status::ok();
  }

  StatusOr<AttrValue> attr_value() {
    skip_ws();
    if (peek() == '"') {
      ASSIGN_OR_RETURN(std::string s, string_lit());
      return AttrValue(s);
    }
    if (std::isalpha(static_cast<unsigned char>(peek())) && !starts_with("nan") && !starts_with("inf")) {
      ASSIGN_OR_RETURN(std::string kind, ident());
      if (kind == "tensor") {
        RETURN_IF_ERROR(expect('<'));
        ASSIGN_OR_RETURN(Tensor t, tensor_type());
        RETURN_IF_ERROR(expect('>'));
        RETURN_IF_ERROR(tensor_values(t));
        return AttrValue(std::move(t));
      }
      RETURN_IF_ERROR(expect('['));
      std::vector<int64_t> ints;
      std::vector<float> floats;
      std::vector<std::string> strings;
      skip_ws();
      while (peek() != ']') {
        if (kind == "strings") {
          ASSIGN_OR_RETURN(std::string s, string_lit());
          strings.push_back(s);
        } else {
          ASSIGN_OR_RETURN(auto num, number());
          ints.push_back(num.second);
          floats.push_back(static_cast<float>(num.first));
        }
        skip_ws();
        if (peek() == ',') ++pos_;
        skip_ws();
      }
      ++pos_;
      if (kind == "ints") return AttrValue(ints);
      if (kind == "floats") return AttrValue(floats);
      if (kind == "strings") return AttrValue(strings);
      return error(fmt::format("unknown attribute kind '{}'", kind));
    }
    size_t b = pos_;
    ASSIGN_OR_RETURN(auto num, number());
    std::string text = s_.substr(b, pos_ - b);
    if (text.find_first_of(".eEni") != std::string::npos) return AttrValue(static_cast<float>(num.first));
    return AttrValue(num.second);
  }

  // ---- lexical ----
  StatusOr<std::pair<double, int64_t>> number() {
    skip_ws();
    size_t b = pos_;
    bool neg = peek() == '-';
    if (neg || peek() == '+') ++pos_;
    if (starts_with("nan")) { pos_ += 3; return std::pair<double, int64_t>{NAN, 0}; }
    if (starts_with("inf")) { pos_ += 3; return std::pair<double, int64_t>{neg ? -INFINITY : INFINITY, 0}; }
    while (!at_end() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || std::strchr(".eE+-", s_[pos_]))) ++pos_;
    std::string text = s_.substr(b, pos_ - b);
    if (text.empty() || text == "-") return error("expected a number");
    char* end = nullptr;
    double d = std::strtod(text.c_str(), &end);
    if (*end) return error(fmt::format("bad number '{}'", text));
    if (text.find_first_of(".eE") != std::string::npos)
      return std::pair<double, int64_t>{d, static_cast<int64_t>(d)};
    // An integer exactly: from -2^63 to 2^64 - 1, those past 2^63 - 1 (a uint64, as the printer
    // writes it) kept as their bits.
    errno = 0;
    const int64_t i = neg ? std::strtoll(text.c_str(), nullptr, 10)
                          : static_cast<int64_t>(std::strtoull(text.c_str(), nullptr, 10));
    if (errno == ERANGE) return error(fmt::format("integer '{}' is outside [-2^63, 2^64 - 1]", text));
    return std::pair<double, int64_t>{d, i};
  }
  StatusOr<int64_t> integer() {
    ASSIGN_OR_RETURN(auto n, number());
    return n.second;
  }
  StatusOr<std::string> ident() {
    skip_ws();
    size_t b = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '.' ||
                         (s_[pos_] == ':' && pos_ + 1 < s_.size() && s_[pos_ + 1] == ':') ||
                         (s_[pos_] == ':' && pos_ > 0 && s_[pos_ - 1] == ':')))
      ++pos_;
    if (b == pos_) return error("expected a name");
    return s_.substr(b, pos_ - b);
  }
  StatusOr<std::string> string_lit() {
    skip_ws();
    if (peek() != '"') return error("expected a quoted string");
    ++pos_;
    std::string out;
    while (!at_end() && s_[pos_] != '"') {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) {
        ++pos_;
        out += s_[pos_] == 'n' ? '\n' : s_[pos_];
      } else {
        out += s_[pos_];
      }
      ++pos_;
    }
    if (at_end()) return error("unterminated string");
    ++pos_;
    return out;
  }
  void skip_ws() {
    while (!at_end()) {
      if (std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      else if (s_[pos_] == '#') while (!at_end() && s_[pos_] != '\n') ++pos_;
      else break;
    }
  }
  bool starts_with(const char* w) const { return s_.compare(pos_, std::strlen(w), w) == 0; }
  bool try_keyword(const char* w) {
    skip_ws();
    size_t n = std::strlen(w);
    if (!starts_with(w) || (pos_ + n < s_.size() && !std::isspace(static_cast<unsigned char>(s_[pos_ + n]))))
      return false;
    pos_ += n;
    return true;
  }
  Status keyword(const char* w) { return try_keyword(w) ? Status::ok() : error(fmt::format("expected '{}'", w)); }
  Status expect(char c) {
    skip_ws();
    if (peek() != c) return error(fmt::format("expected '{}'", c));
    ++pos_;
    return Status::ok();
  }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  bool at_end() const { return pos_ >= s_.size(); }
  Status error(const std::string& msg) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    return Status::user(fmt::format("text IR {}:{}: {}", line, col, msg));
  }

  const std::string& s_;
  size_t pos_ = 0;
  Graph* g_ = nullptr;
  std::map<std::string, Value*> pending_;
  std::set<std::string> defined_;
};

}  // namespace

StatusOr<std::unique_ptr<Graph>> parse_graph(const std::string& text) {
  Parser p(text);
  ASSIGN_OR_RETURN(auto g, p.parse());
  RETURN_IF_ERROR(g->topo_sort());
  return g;
}

}  // namespace stitch
