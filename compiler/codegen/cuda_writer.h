// CudaWriter: the printer generated CUDA goes through. It keeps indentation in scopes, so
// emitters say what they write (a line, a block, a comment) and the text reads like careful
// hand-written code. Output is byte-stable: it depends only on the calls made.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

namespace stitch::codegen {

class CudaWriter {
 public:
  // One line at the current indentation.
  template <typename... Args>
  void line(fmt::format_string<Args...> f, Args&&... args) {
    put(fmt::format(f, std::forward<Args>(args)...));
  }
  void raw_line(const std::string& s) { put(s); }
  void blank() { text_ += '\n'; }
  // "// text" lines; a multi-line string gives one comment line per line.
  void comment(const std::string& text);

  // Opens "head {" and indents until the matching close().
  template <typename... Args>
  void open(fmt::format_string<Args...> f, Args&&... args) {
    put(fmt::format(f, std::forward<Args>(args)...) + " {");
    ++depth_;
  }
  void close(const char* tail = "");  // "}" plus tail (e.g. ";" or " else {")

  const std::string& text() const { return text_; }
  int depth() const { return depth_; }

 private:
  void put(const std::string& s);
  std::string text_;
  int depth_ = 0;
};

// Scoped block: opens on construction, closes on destruction.
class Block {
 public:
  template <typename... Args>
  Block(CudaWriter& w, fmt::format_string<Args...> f, Args&&... args) : w_(w) {
    w_.open(f, std::forward<Args>(args)...);
  }
  ~Block() { w_.close(); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

 private:
  CudaWriter& w_;
};

}  // namespace stitch::codegen
