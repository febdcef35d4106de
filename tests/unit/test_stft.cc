// STFT, the window functions and MelWeightMatrix (ops/signal.cc): an STFT written out by expand_dft
// (a Gather of its frames and one MatMul by its windowed DFT weights) computes what the op's own
// evaluation computes, on emu; the windows and the mel matrix fold to constants with the values
// ONNX defines; the errors name the node. ONNX's node tests (test_stft, test_stft_with_window, the
// windows' and test_melweightmatrix) check both against ONNX's expected outputs.
#include "fusion_test_util.h"

using namespace stitch;
using namespace stitch::test;

namespace {

// A graph of one STFT (node 'stft') of `signal`, its frame_step 4; `extra`: constants and inputs,
// `operands`: the inputs after frame_step (", %w, %len").
std::string stft_graph(const std::string& signal, const std::string& attrs, const std::string& extra = "",
                       const std::string& operands = "") {
  return fmt::format(R"(graph "g" opset 17 {{
  input %x: {}
  const %step: i64[] = [4]
{}  %y = STFT(%x, %step{}) {{{}}} @"stft"
  output %y
}})",
                     signal, extra, operands, attrs);
}

std::vector<double> folded(const std::string& text) {
  auto g = parse_or_die(text);
  run_frontend_or_die(*g);
  REQUIRE(g->nodes().empty());
  REQUIRE(g->outputs[0]->constant);
  return g->outputs[0]->constant->to_f64();
}

}  // namespace

TEST_CASE("an STFT is a Gather of its frames and one MatMul, and matches the op on emu", "[stft][emu]") {
  uint32_t state = 5;
  const std::string window = "  const %w: f32[16] = " + lcg_values(state, 16, 0.0) + "\n";
  const std::vector<std::string> cases = {
      stft_graph("f32[2,50,1]", "", window, ", %w"),              // real, windowed, one-sided
      stft_graph("f32[2,50]", "", window, ", %w"),                // PyTorch's 2-D signal
      stft_graph("f32[2,50,2]", "onesided = 0", window, ", %w"),  // complex
      stft_graph("f32[3,37,1]", "onesided = 0", "  const %len: i64[] = [9]\n", ", _, %len"),  // no window
      stft_graph("f32[2,50,1]", "", "  input %w: f32[16]\n", ", %w"),  // a run-time window
  };
  uint32_t seed = 1;
  for (const std::string& text : cases) {
    auto g = parse_or_die(text);
    run_frontend_or_die(*g);
    CHECK(count_op(*g, "STFT") == 0);
    CHECK(count_op(*g, "MatMul") == 1);
    CHECK(count_op(*g, "Gather") == 1);
    written_out_matches_op(text, {"STFT"}, seed);
    seed += 7;
  }
  // Without a window or frame_length the frame is the whole signal: one frame.
  auto whole = parse_or_die(stft_graph("f32[1,12,1]", ""));
  run_frontend_or_die(*whole);
  CHECK(*whole->outputs[0]->dims == Dims{1, 1, 7, 2});
}

TEST_CASE("STFT errors name the node and what to change", "[stft]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {stft_graph("f32[2,50,3]", ""), "its signal 2x50x3 must be [batch, length, 1] (real values) or"},
      {stft_graph("f32[2,50,2]", "", "  const %len: i64[] = [8]\n", ", _, %len"),
       "onesided=1 takes a real signal (a last axis of 1)"},
      {stft_graph("f32[2,50,1]", "", "  const %w: f32[3] = [1.0, 1.0, 1.0]\n  const %len: i64[] = [8]\n",
                  ", %w, %len"),
       "its window has 3 values, but frame_length is 8"},
      {stft_graph("f32[2,50,1]", "", "  const %len: i64[] = [51]\n", ", _, %len"),
       "frame_length is 51; it must be between 1 and the signal's length 50"},
      {stft_graph("f32[2,50,1]", "", "  input %len: i64[]\n", ", _, %len"),
       "its frame_length (input 3 'len') is computed at run time"},
      {stft_graph("i32[2,50,1]", ""), "its signal is i32; STFT takes floating-point values"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    const std::string msg = frontend_error(text);
    INFO(msg);
    CHECK(msg.find("node 'stft' (STFT)") != std::string::npos);
    CHECK(msg.find(message) != std::string::npos);
  }
  CHECK(frontend_error(R"(graph "g" opset 17 {
  input %x: f32[2,50,1]
  const %step: i64[] = [0]
  %y = STFT(%x, %step) @"stft"
  output %y
})") == "node 'stft' (STFT): frame_step is 0; it must be positive");
}

TEST_CASE("the window functions fold to ONNX's values", "[stft][windows]") {
  const auto window = [](const std::string& op, int64_t size, int periodic) {
    return fmt::format(R"(graph "g" opset 17 {{
  const %n: i64[] = [{}]
  %w = {}(%n) {{periodic = {}}} @"w"
  output %w
}})",
                       size, op, periodic);
  };
  const auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-6));
  };
  near(folded(window("HannWindow", 5, 0)), {0.0, 0.5, 1.0, 0.5, 0.0});
  near(folded(window("HannWindow", 4, 1)), {0.0, 0.5, 1.0, 0.5});
  // Hamming's alpha is 25/46 in ONNX's definition (not 0.54): 25/46 - 21/46 cos(2 pi n / 4).
  near(folded(window("HammingWindow", 4, 1)), {4.0 / 46, 25.0 / 46, 1.0, 25.0 / 46});
  near(folded(window("BlackmanWindow", 3, 0)), {0.0, 1.0, 0.0});
  CHECK(frontend_error(window("HannWindow", int64_t{1} << 40, 1)) ==
        "node 'w' (HannWindow): its size 1099511627776 is more than the 16777216 values stitch computes a "
        "window with");
  CHECK(frontend_error(window("HannWindow", 0, 1)) ==
        "node 'w' (HannWindow): its size must be one positive value");
  CHECK(frontend_error(R"(graph "g" opset 17 {
  const %n: i64[] = [4]
  %w = HannWindow(%n) {output_datatype = 9} @"w"
  output %w
})") == "node 'w' (HannWindow): output_datatype 9 is not a numeric ONNX type");
}

TEST_CASE("MelWeightMatrix folds to its triangles, and a band past Nyquist is refused", "[stft][mel]") {
  const auto mel = [](int bins, int dft, int rate, double lo, double hi) {
    return fmt::format(R"(graph "g" opset 17 {{
  const %b: i64[] = [{}]
  const %d: i64[] = [{}]
  const %r: i64[] = [{}]
  const %lo: f32[] = [{}]
  const %hi: f32[] = [{}]
  %m = MelWeightMatrix(%b, %d, %r, %lo, %hi) @"mel"
  output %m
}})",
                       bins, dft, rate, lo, hi);
  };
  const std::vector<double> w = folded(mel(4, 32, 8000, 100.0, 3800.0));
  REQUIRE(w.size() == 17 * 4);
  for (int i = 0; i < 4; ++i) {  // each band peaks at 1 once and is zero or rising then falling
    double peak = 0;
    for (int j = 0; j < 17; ++j) peak = std::max(peak, w[static_cast<size_t>(j * 4 + i)]);
    CHECK(peak == 1.0);
  }
  CHECK(frontend_error(mel(4, 32, 8000, 100.0, 9000.0))
            .find("node 'mel' (MelWeightMatrix): upper_edge_hertz 9000 lies past the 17 bins of a 32-point "
                  "DFT at 8000 Hz") == 0);
  CHECK(frontend_error(mel(4, 1 << 30, 8000, 100.0, 3800.0)) ==
        "node 'mel' (MelWeightMatrix): a 536870913 x 4 matrix is more than the 16777216 values stitch "
        "computes one "
        "with");
  CHECK(frontend_error(mel(0, 32, 8000, 100.0, 3800.0)) ==
        "node 'mel' (MelWeightMatrix): num_mel_bins 0, dft_length 32 and sample_rate 8000 must be positive");
}
