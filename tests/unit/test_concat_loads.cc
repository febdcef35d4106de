// A Concat of many values read from outside its kernel loads only the input each element comes
// from (inside the select), where a Concat of a few loads each input as a vector and selects per
// lane; both against the reference on emu.
#include <fmt/format.h>

#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// Relu over the Concat along axis 1 of `inputs` inputs [2, 3, 8], each seen through a Reshape.
std::string concat_graph(int inputs) {
  std::string decl, views, args;
  for (int i = 0; i < inputs; ++i) {
    decl += fmt::format("  input %x{}: f32[6,8]\n", i);
    views += fmt::format("  %v{0} = Reshape(%x{0}, %shape) @\"view{0}\"\n", i);
    args += fmt::format("{}%v{}", i ? ", " : "", i);
  }
  return fmt::format(R"(graph "g" opset 18 {{
{}  const %shape: i64[3] = [2, 3, 8]
{}  %c = Concat({}) {{axis = 1}} @"cat"
  %y = Relu(%c) @"relu"
  output %y
}}
)",
                     decl, views, args);
}

// The number of times `what` occurs in `s`.
size_t occurrences(const std::string& s, const std::string& what) {
  size_t hits = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++hits;
  return hits;
}

}  // namespace

TEST_CASE("a Concat of many outside values loads only the input an element comes from", "[stitch][emu]") {
  for (int inputs : {3, 12}) {
    INFO(inputs << " inputs");
    auto g = parse_or_die(concat_graph(inputs));
    run_frontend_or_die(*g);
    const codegen::Kernel k = lower_whole_graph(*g);
    INFO(k.source);
    // Many: the selects hold the loads (`? x5[...] :`), and no statement loads an input alone.
    // Few: each input loads once as a float4 (the vector path), before the select.
    if (inputs > 4) {
      CHECK(occurrences(k.source, "reinterpret_cast<const float4*>") == 0);
      CHECK(occurrences(k.source, "? x5[") > 0);
    } else {
      CHECK(occurrences(k.source, "reinterpret_cast<const float4*>") == static_cast<size_t>(inputs));
    }
    CHECK(one_group_matches_reference(*g, 11));
  }
}
