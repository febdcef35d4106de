// remove_noops: drops nodes that copy their input unchanged.
//
// The op table says when a node is a no-op (Identity, inference Dropout, a
// Cast to the same type, a Reshape/Squeeze/Expand to the same shape, an
// identity Transpose, a full Slice, a zero Pad...). Readers of the output
// then read the input. When the output is a graph output, its name must
// survive: the input's producer is made to write the output value instead,
// unless the input is itself a graph input or output, or a constant, in
// which case the node stays.
#include "ir/op_table.h"
#include "passes/pass.h"

namespace stitch {

StatusOr<bool> remove_noops(Graph& g, PassContext&) {
  auto users = g.users();
  std::vector<Node*> dead;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (!n.def->is_noop || !n.def->is_noop(n)) continue;
    bool extra_used = false;
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (n.outputs[i] && (users.count(n.outputs[i]) || g.is_graph_output(n.outputs[i]))) extra_used = true;
    if (extra_used) continue;
    Value* in = n.inputs[0];
    Value* out = n.outputs[0];
    if (!g.is_graph_output(out)) {
      g.replace_uses(out, in);
      dead.push_back(&n);
      continue;
    }
    bool in_pinned = !in->producer || g.is_graph_output(in) ||
                     std::find(g.inputs.begin(), g.inputs.end(), in) != g.inputs.end();
    if (in_pinned) continue;
    // Rename: the producer of `in` now writes `out`; readers of `in` read `out`.
    Node* p = in->producer;
    for (Value*& o : p->outputs)
      if (o == in) o = out;
    out->producer = p;
    in->producer = nullptr;
    g.replace_uses(in, out);
    dead.push_back(&n);
  }
  g.remove_nodes(dead);
  // Producers that now write a graph output may sit after its readers.
  if (!dead.empty()) RETURN_IF_ERROR(g.topo_sort());
  return !dead.empty();
}

}  // namespace stitch
