#include "codegen/cuda_writer.h"

#include "support/check.h"

namespace stitch::codegen {

void CudaWriter::put(const std::string& s) {
  text_.append(static_cast<size_t>(depth_) * 2, ' ');
  text_ += s;
  text_ += '\n';
}

void CudaWriter::comment(const std::string& text) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string piece = text.substr(start, end - start);
    put(piece.empty() ? "//" : "// " + piece);
    start = end + 1;
  }
}

void CudaWriter::close(const char* tail) {
  STITCH_CHECK(depth_ > 0, "CudaWriter: close() without open()");
  --depth_;
  put(std::string("}") + tail);
}

}  // namespace stitch::codegen
