// plan_memory: in-place groups first, then greedy-by-size placement. See memory_plan.h.
#include "codegen/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "ir/op_table.h"
#include "support/check.h"

namespace stitch {
namespace {

int64_t align_up(int64_t v) { return (v + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

struct Storage {
  int64_t bytes = 0;
  int first = 0;
  int last = 0;
  int tail = -1;  // the member whose storage the next in-place writer takes
  int64_t offset = -1;
};

bool live_together(int a_first, int a_last, int b_first, int b_last) {
  return a_first <= b_last && b_first <= a_last;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests) {
  const int n = static_cast<int>(requests.size());
  MemoryPlan plan;
  plan.offsets.assign(n, -1);
  plan.storage.assign(n, -1);

  // In-place groups, in order of the writing step: a writer takes its input's storage only if
  // the input is the storage's latest member, dies exactly at the writer's step, and is at
  // least as large (one storage never grows).
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return requests[a].first < requests[b].first; });
  std::vector<Storage> storages;
  for (int i : order) {
    const BufferRequest& r = requests[i];
    STITCH_CHECK(r.bytes > 0 && r.first <= r.last, "bad buffer request {}", r.name);
    const int j = r.reuse_of;
    if (j >= 0 && j < n && plan.storage[j] >= 0) {
      Storage& s = storages[plan.storage[j]];
      if (s.tail == j && requests[j].last == r.first && s.last == r.first && r.bytes <= s.bytes) {
        plan.storage[i] = plan.storage[j];
        s.last = std::max(s.last, r.last);
        s.tail = i;
        ++plan.in_place;
        continue;
      }
    }
    plan.storage[i] = static_cast<int>(storages.size());
    storages.push_back(Storage{align_up(r.bytes), r.first, r.last, i, -1});
  }

  // Greedy by size: largest storages first; ties by first step, then creation order.
  std::vector<int> by_size(storages.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(), [&](int a, int b) {
    if (storages[a].bytes != storages[b].bytes) return storages[a].bytes > storages[b].bytes;
    return storages[a].first < storages[b].first;
  });
  std::vector<int> placed;
  for (int s : by_size) {
    Storage& st = storages[s];
    std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of storages live with st
    for (int p : placed)
      if (live_together(st.first, st.last, storages[p].first, storages[p].last))
        busy.emplace_back(storages[p].offset, storages[p].offset + storages[p].bytes);
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (begin - offset >= st.bytes) break;
      offset = std::max(offset, end);
    }
    st.offset = offset;
    placed.push_back(s);
    plan.arena_bytes = std::max(plan.arena_bytes, offset + st.bytes);
  }

  for (int i = 0; i < n; ++i) {
    plan.offsets[i] = storages[plan.storage[i]].offset;
    plan.total_bytes += align_up(requests[i].bytes);
  }
  // Lower bound: bytes of storages live at each step (in-place partners count once).
  std::map<int, int64_t> delta;
  for (const Storage& st : storages) {
    delta[st.first] += st.bytes;
    delta[st.last + 1] -= st.bytes;
  }
  int64_t live = 0;
  for (const auto& [step, d] : delta) {
    live += d;
    plan.peak_live_bytes = std::max(plan.peak_live_bytes, live);
  }
  return plan;
}

Status verify_memory_plan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  const size_t n = requests.size();
  if (plan.offsets.size() != n || plan.storage.size() != n)
    return Status::internal("memory plan covers " + std::to_string(plan.offsets.size()) + " of " +
                            std::to_string(n) + " buffers");
  for (size_t i = 0; i < n; ++i) {
    const int64_t off = plan.offsets[i];
    if (off < 0 || off % kArenaAlignment != 0 || off + requests[i].bytes > plan.arena_bytes)
      return Status::internal("buffer '" + requests[i].name + "' at offset " + std::to_string(off) +
                              " is misaligned or outside the " + std::to_string(plan.arena_bytes) +
                              "-byte arena");
  }
  for (size_t a = 0; a < n; ++a) {
    const BufferRequest& ra = requests[a];
    for (size_t b = a + 1; b < n; ++b) {
      const BufferRequest& rb = requests[b];
      if (!live_together(ra.first, ra.last, rb.first, rb.last)) continue;
      const bool overlap =
          plan.offsets[a] < plan.offsets[b] + rb.bytes && plan.offsets[b] < plan.offsets[a] + ra.bytes;
      if (!overlap) continue;
      // Legal only as an in-place handoff: same storage, lifetimes touching at one step.
      const bool handoff = plan.storage[a] == plan.storage[b] && (ra.last == rb.first || rb.last == ra.first);
      if (!handoff)
        return Status::internal("buffers '" + ra.name + "' (steps " + std::to_string(ra.first) + "-" +
                                std::to_string(ra.last) + ") and '" + rb.name + "' (steps " +
                                std::to_string(rb.first) + "-" + std::to_string(rb.last) +
                                ") are live together and overlap in the arena");
    }
  }
  return Status::ok();
}

std::vector<BufferRequest> graph_buffer_requests(const Graph& g) {
  std::map<const Value*, int> index;
  std::vector<BufferRequest> requests;
  std::set<const Value*> outputs(g.outputs.begin(), g.outputs.end());
  const int end = static_cast<int>(g.nodes().size());
  for (int step = 0; step < end; ++step) {
    const Node& node = *g.nodes()[step];
    for (Value* v : node.inputs)
      if (v != nullptr && index.count(v)) requests[index[v]].last = std::max(requests[index[v]].last, step);
    for (Value* v : node.outputs) {
      if (v == nullptr || v->is_constant() || !v->has_static_shape()) continue;
      BufferRequest r;
      r.name = v->name;
      int64_t elems = 1;
      for (int64_t d : *v->dims) elems *= d;
      r.bytes = std::max<int64_t>(1, elems * dtype_size(v->dtype));
      r.first = r.last = step;
      if (outputs.count(v)) r.last = end;
      index[v] = static_cast<int>(requests.size());
      requests.push_back(r);
    }
  }
  // In-place hints: elementwise writers over a same-sized input that dies here.
  for (int step = 0; step < end; ++step) {
    const Node& node = *g.nodes()[step];
    if (node.def == nullptr || node.def->category != OpCategory::kElementwise) continue;
    const Value* out = node.output(0);
    if (out == nullptr || !index.count(out)) continue;
    BufferRequest& w = requests[index[out]];
    for (const Value* in : node.inputs) {
      if (in == nullptr || !index.count(in) || outputs.count(in)) continue;
      const BufferRequest& r = requests[index[in]];
      if (r.last == step && r.bytes == w.bytes) {
        w.reuse_of = index[in];
        break;
      }
    }
  }
  return requests;
}

}  // namespace stitch
