/* The runtime's C ABI from C: load an artifact (bert_tiny compiled at 2x16), check the model's
 * metadata, each misuse's status and message, then a run whose outputs are finite and stable.
 *   c_api_test ARTIFACT_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stitch/runtime.h"

static int failures = 0;
#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, stitch_last_error()); \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  stitch_model* m = NULL;
  EXPECT(stitch_model_load("/nonexistent/dir", &m) == STITCH_ERROR_USER);
  EXPECT(strstr(stitch_last_error(), "not an artifact directory") != NULL);
  EXPECT(stitch_model_load(argv[1], &m) == STITCH_OK);
  if (!m) return 1;
  EXPECT(stitch_model_num_inputs(m) == 2);
  EXPECT(stitch_model_num_outputs(m) == 2);
  EXPECT(strcmp(stitch_model_input_name(m, 0), "input_ids") == 0);
  EXPECT(strcmp(stitch_model_input_dtype(m, 0), "i64") == 0);
  EXPECT(stitch_model_input_rank(m, 0) == 2);
  EXPECT(stitch_model_input_dims(m, 0)[0] == 2 && stitch_model_input_dims(m, 0)[1] == 16);
  EXPECT(stitch_model_input_name(m, 5) == NULL);
  EXPECT(stitch_model_output_rank(m, 0) == 3);

  stitch_session* s = NULL;
  EXPECT(stitch_session_create(m, "tpu", &s) == STITCH_ERROR_USER);
  EXPECT(stitch_session_create(m, "emu", &s) == STITCH_OK);
  if (!s) return 1;
  int64_t ids[32], mask[32];
  for (int i = 0; i < 32; ++i) ids[i] = 1 + i % 40, mask[i] = 1;
  const int64_t dims[2] = {2, 16}, wrong[2] = {1, 32};
  EXPECT(stitch_session_run(s) == STITCH_ERROR_USER); /* inputs not set */
  EXPECT(strstr(stitch_last_error(), "was not set") != NULL);
  EXPECT(stitch_session_set_input(s, "nosuch", "i64", dims, 2, ids, sizeof ids) == STITCH_ERROR_USER);
  EXPECT(strstr(stitch_last_error(), "no input named 'nosuch'") != NULL);
  EXPECT(stitch_session_set_input(s, "input_ids", "i64", wrong, 2, ids, sizeof ids) == STITCH_ERROR_USER);
  EXPECT(stitch_session_set_input(s, "input_ids", "f32", dims, 2, ids, sizeof ids) == STITCH_ERROR_USER);
  EXPECT(stitch_session_set_input(s, "input_ids", "i64", dims, 2, NULL, sizeof ids) == STITCH_ERROR_USER);
  EXPECT(stitch_session_set_input(s, "input_ids", "i64", dims, 2, ids, sizeof ids) == STITCH_OK);
  EXPECT(stitch_session_set_input(s, "attention_mask", "i64", dims, 2, mask, sizeof mask) == STITCH_OK);
  EXPECT(stitch_session_run(s) == STITCH_OK);
  static float out1[2 * 16 * 64], out2[2 * 16 * 64];
  EXPECT(stitch_session_get_output(s, "last_hidden_state", out1, 7) == STITCH_ERROR_USER);
  EXPECT(stitch_session_get_output(s, "last_hidden_state", out1, sizeof out1) == STITCH_OK);
  EXPECT(stitch_session_run(s) == STITCH_OK); /* a second run gives the same result */
  EXPECT(stitch_session_get_output(s, "last_hidden_state", out2, sizeof out2) == STITCH_OK);
  int finite = 1;
  for (size_t i = 0; i < sizeof out1 / sizeof out1[0]; ++i) finite &= isfinite(out1[i]) != 0;
  EXPECT(finite);
  EXPECT(memcmp(out1, out2, sizeof out1) == 0);
  /* carry: names checked, null refused, an output of another dtype or shape refused */
  EXPECT(stitch_session_carry(s, NULL, "input_ids") == STITCH_ERROR_USER);
  EXPECT(stitch_session_carry(s, "nosuch", "input_ids") == STITCH_ERROR_USER);
  EXPECT(stitch_session_carry(s, "last_hidden_state", "input_ids") == STITCH_ERROR_USER);
  EXPECT(strstr(stitch_last_error(), "dtype and shape must match") != NULL);
  stitch_session_free(s);
  stitch_model_free(m);
  printf("c-api: %s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
