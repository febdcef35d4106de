// The C ABI over the C++ API: exceptions become status codes plus a thread-local message.
#include <new>
#include <string>

#include "stitch/runtime.h"
#include "stitch/runtime.hpp"

struct stitch_model {
  std::shared_ptr<const stitch::rt::Model> m;
};
struct stitch_session {
  std::unique_ptr<stitch::rt::Session> s;
};

namespace {
thread_local std::string t_error;

template <typename F>
stitch_status guarded(F&& f) {
  try {
    f();
    t_error.clear();
    return STITCH_OK;
  } catch (const stitch::rt::Error& e) {
    t_error = e.what();
    return e.code() == 2 ? STITCH_ERROR_USER : STITCH_ERROR_INTERNAL;
  } catch (const std::bad_alloc&) {
    t_error = "out of memory";
    return STITCH_ERROR_USER;
  } catch (const std::exception& e) {
    t_error = e.what();
    return STITCH_ERROR_INTERNAL;
  }
}

const stitch::rt::TensorInfo* info(const stitch_model* m, int i, bool input) {
  if (!m) return nullptr;
  const auto& list = input ? m->m->inputs() : m->m->outputs();
  return i >= 0 && static_cast<size_t>(i) < list.size() ? &list[i] : nullptr;
}
}  // namespace

extern "C" {

const char* stitch_last_error(void) { return t_error.c_str(); }

stitch_status stitch_model_load(const char* dir, stitch_model** out) {
  return guarded([&] {
    if (!dir || !out) throw stitch::rt::Error(2, "stitch_model_load: null argument");
    *out = new stitch_model{stitch::rt::Model::load(dir)};
  });
}
void stitch_model_free(stitch_model* m) { delete m; }
int stitch_model_num_inputs(const stitch_model* m) { return m ? static_cast<int>(m->m->inputs().size()) : -1; }
int stitch_model_num_outputs(const stitch_model* m) { return m ? static_cast<int>(m->m->outputs().size()) : -1; }
const char* stitch_model_input_name(const stitch_model* m, int i) { auto t = info(m, i, true); return t ? t->name.c_str() : nullptr; }
const char* stitch_model_output_name(const stitch_model* m, int i) { auto t = info(m, i, false); return t ? t->name.c_str() : nullptr; }
const char* stitch_model_input_dtype(const stitch_model* m, int i) { auto t = info(m, i, true); return t ? t->dtype.c_str() : nullptr; }
const char* stitch_model_output_dtype(const stitch_model* m, int i) { auto t = info(m, i, false); return t ? t->dtype.c_str() : nullptr; }
int stitch_model_input_rank(const stitch_model* m, int i) { auto t = info(m, i, true); return t ? static_cast<int>(t->dims.size()) : -1; }
int stitch_model_output_rank(const stitch_model* m, int i) { auto t = info(m, i, false); return t ? static_cast<int>(t->dims.size()) : -1; }
const int64_t* stitch_model_input_dims(const stitch_model* m, int i) { auto t = info(m, i, true); return t ? t->dims.data() : nullptr; }
const int64_t* stitch_model_output_dims(const stitch_model* m, int i) { auto t = info(m, i, false); return t ? t->dims.data() : nullptr; }

stitch_status stitch_session_create(const stitch_model* m, const char* backend, stitch_session** out) {
  return guarded([&] {
    if (!m || !backend || !out) throw stitch::rt::Error(2, "stitch_session_create: null argument");
    *out = new stitch_session{std::make_unique<stitch::rt::Session>(m->m, stitch::rt::parse_backend(backend))};
  });
}
void stitch_session_free(stitch_session* s) { delete s; }

stitch_status stitch_session_set_input(stitch_session* s, const char* name, const char* dtype, const int64_t* dims,
                                       int rank, const void* data, size_t bytes) {
  return guarded([&] {
    if (!s || !name || !dtype || (rank > 0 && !dims) || rank < 0 || (bytes > 0 && !data))
      throw stitch::rt::Error(2, "stitch_session_set_input: null or negative argument");
    s->s->set_input(name, dtype, std::vector<int64_t>(dims, dims + rank), data, bytes);
  });
}
stitch_status stitch_session_run(stitch_session* s) {
  return guarded([&] {
    if (!s) throw stitch::rt::Error(2, "stitch_session_run: null session");
    s->s->run();
  });
}
stitch_status stitch_session_get_output(stitch_session* s, const char* name, void* data, size_t bytes) {
  return guarded([&] {
    if (!s || !name || (bytes > 0 && !data)) throw stitch::rt::Error(2, "stitch_session_get_output: null argument");
    s->s->get_output(name, data, bytes);
  });
}

stitch_status stitch_session_carry(stitch_session* s, const char* output, const char* input) {
  return guarded([&] {
    if (!s || !output || !input) throw stitch::rt::Error(2, "stitch_session_carry: null argument");
    s->s->carry(output, input);
  });
}

}  // extern "C"
