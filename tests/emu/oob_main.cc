// Runs a broken test kernel under the sanitizers (built only with STITCH_SANITIZE):
//   stitch_emu_oob        out_of_bounds_write on a heap buffer one element too short; ASan
//                         must stop with a heap-buffer-overflow report naming the kernel
//   stitch_emu_oob null   null_write; UBSan must stop with "store to null pointer"
#include <cstdio>
#include <string>
#include <vector>

#include "stitch/emu/launch.h"

void out_of_bounds_write(float* out, int n);
void null_write(float* out);

int main(int argc, char** argv) {
  const int n = 64;
  std::vector<float> out(n);
  const bool null = argc > 1 && std::string(argv[1]) == "null";
  const auto result =
      null ? stitch::emu::launch(null_write, dim3(1), dim3(32), 0, static_cast<float*>(nullptr))
           : stitch::emu::launch(out_of_bounds_write, dim3(1), dim3(32), 0, out.data(), n);
  std::printf("launch returned: %s %s\n", stitch::emu::failure_name(result.failure), result.message);
  return 0;  // reaching here means the sanitizer missed the write
}
