/* stitch runtime, C ABI: load an artifact directory compiled by stitchc and run it.
 *
 *   stitch_model* m; stitch_session* s;
 *   if (stitch_model_load("build/bert", &m) != STITCH_OK) puts(stitch_last_error());
 *   stitch_session_create(m, "cuda", &s);             // or "emu": the CPU emulation backend
 *   stitch_session_set_input(s, "input_ids", "i64", dims, 2, data, bytes);
 *   stitch_session_run(s);
 *   stitch_session_get_output(s, "last_hidden_state", out, out_bytes);
 *   stitch_session_free(s); stitch_model_free(m);
 *
 * A model is immutable and may be shared by threads; a session is used by one thread at a time.
 * Every call returns a status; stitch_last_error() gives the message of the calling thread's
 * last failure, naming the input, file or step at fault. */
#ifndef STITCH_RUNTIME_H_
#define STITCH_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  STITCH_OK = 0,
  STITCH_ERROR_USER = 2,     /* bad argument, bad or mismatched artifact, no GPU for "cuda" */
  STITCH_ERROR_INTERNAL = 3, /* a failed kernel, library call or CUDA call */
} stitch_status;

typedef struct stitch_model stitch_model;
typedef struct stitch_session stitch_session;

const char* stitch_last_error(void);

stitch_status stitch_model_load(const char* artifact_dir, stitch_model** out);
void stitch_model_free(stitch_model* model);
int stitch_model_num_inputs(const stitch_model* model);
int stitch_model_num_outputs(const stitch_model* model);
/* Name, dtype ("f32", "i64"...), rank and dims of input/output i; NULL/-1 when out of range. */
const char* stitch_model_input_name(const stitch_model* model, int i);
const char* stitch_model_output_name(const stitch_model* model, int i);
const char* stitch_model_input_dtype(const stitch_model* model, int i);
const char* stitch_model_output_dtype(const stitch_model* model, int i);
int stitch_model_input_rank(const stitch_model* model, int i);
int stitch_model_output_rank(const stitch_model* model, int i);
const int64_t* stitch_model_input_dims(const stitch_model* model, int i);
const int64_t* stitch_model_output_dims(const stitch_model* model, int i);

/* backend: "emu" or "cuda". */
stitch_status stitch_session_create(const stitch_model* model, const char* backend, stitch_session** out);
void stitch_session_free(stitch_session* session);
stitch_status stitch_session_set_input(stitch_session* session, const char* name, const char* dtype,
                                       const int64_t* dims, int rank, const void* data, size_t bytes);
stitch_status stitch_session_run(stitch_session* session);
stitch_status stitch_session_get_output(stitch_session* session, const char* name, void* data, size_t bytes);
/* Sets input `input` to output `output` of the last run, on the device (Session::carry). */
stitch_status stitch_session_carry(stitch_session* session, const char* output, const char* input);

#ifdef __cplusplus
}
#endif

#endif /* STITCH_RUNTIME_H_ */
