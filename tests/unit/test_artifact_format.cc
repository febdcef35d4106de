// The artifact format's checksum is FNV-1a (64 bits), as docs/artifact-format.md says: checked
// against the test vectors published with FNV (Fowler, Noll, Vo; draft-eastlake-fnv).
#include <catch2/catch.hpp>
#include <string>

#include "stitch/artifact_format.h"

using stitch::artifact::fnv1a;

TEST_CASE("the artifact checksum is FNV-1a 64 with its published values", "[artifact]") {
  auto h = [](const std::string& s) { return fnv1a(s.data(), s.size()); };
  CHECK(h("") == 0xcbf29ce484222325ull);
  CHECK(h("a") == 0xaf63dc4c8601ec8cull);
  CHECK(h("foobar") == 0x85944171f73967e8ull);
}
