// The artifact checksum (stitch/artifact_format.h): xxHash's XXH3-64, its functions inlined here
// so that neither the compiler nor the runtime library needs libxxhash at run time.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <new>

#include "stitch/artifact_format.h"

namespace stitch::artifact {

Checksum::Checksum() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Checksum::~Checksum() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Checksum::update(const void* data, std::size_t n) {
  if (n > 0) XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, n);
}

std::uint64_t Checksum::digest() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

std::uint64_t checksum(const void* data, std::size_t n) { return XXH3_64bits(data, n); }

}  // namespace stitch::artifact
