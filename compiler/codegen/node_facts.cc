#include "codegen/node_facts.h"

#include <unordered_map>

#include "codegen/stitch.h"

namespace stitch::codegen {

struct NodeFactsScope::Facts {
  std::unordered_map<const Node*, StitchRole> role;
  std::unordered_map<const Node*, int> instructions;
};

namespace {

thread_local NodeFactsScope::Facts* open_facts = nullptr;

// The remembered value of `table` for n, computed first when it is not there. compute may ask for
// other nodes' facts (a role looks at producers), so the table is written after it returns.
template <class T>
T remembered(std::unordered_map<const Node*, T>& table, const Node& n, T (*compute)(const Node&)) {
  if (auto it = table.find(&n); it != table.end()) return it->second;
  const T v = compute(n);
  table.emplace(&n, v);
  return v;
}

}  // namespace

NodeFactsScope::NodeFactsScope() {
  if (open_facts) return;
  facts_ = std::make_unique<Facts>();
  open_facts = facts_.get();
}

NodeFactsScope::~NodeFactsScope() {
  if (facts_) open_facts = nullptr;
}

StitchRole remembered_role(const Node& n, StitchRole (*compute)(const Node&)) {
  return open_facts ? remembered(open_facts->role, n, compute) : compute(n);
}

int remembered_instructions(const Node& n, int (*compute)(const Node&)) {
  return open_facts ? remembered(open_facts->instructions, n, compute) : compute(n);
}

}  // namespace stitch::codegen
