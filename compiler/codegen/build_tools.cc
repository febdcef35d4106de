#include "codegen/build_tools.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "codegen/embedded_headers.h"
#include "support/check.h"

namespace stitch::codegen {
namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace

int run_command(const std::vector<std::string>& argv, std::string* output) {
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && executable(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  return "";
}

std::string tool_identity(const std::string& tool) {
  std::string id = tool;
  std::error_code ec;
  if (const fs::path resolved = fs::canonical(tool, ec); !ec) {
    const auto size = fs::file_size(resolved, ec);
    const auto time = fs::last_write_time(resolved, ec).time_since_epoch().count();
    id += fmt::format(" {} {} {}", resolved.string(), size, time);
  }
  return id;
}

bool take_from_cache(const fs::path& dir, const std::string& key,
                     const std::vector<std::pair<std::string, fs::path>>& files) {
  std::error_code ec;
  for (const auto& [suffix, to] : files)
    if (!fs::is_regular_file(dir / (key + suffix), ec)) return false;
  for (const auto& [suffix, to] : files)
    if (!fs::copy_file(dir / (key + suffix), to, fs::copy_options::overwrite_existing, ec)) return false;
  for (const auto& [suffix, to] : files)  // used now: the last to go when the cache is pruned
    fs::last_write_time(dir / (key + suffix), fs::file_time_type::clock::now(), ec);
  return true;
}

uint64_t prune_build_cache(const fs::path& root, uint64_t max_bytes) {
  struct Entry {
    fs::file_time_type used = fs::file_time_type::min();  // its clock's zero is not the earliest
    uint64_t bytes = 0;
    std::vector<fs::path> files;
  };
  std::map<std::string, Entry> entries;  // by directory and key (a file's name up to its first dot)
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string name = it->path().filename().string();
    Entry& e = entries[(it->path().parent_path() / name.substr(0, name.find('.'))).string()];
    const uint64_t bytes = it->file_size(ec);
    e.bytes += bytes;
    total += bytes;
    e.used = std::max(e.used, it->last_write_time(ec));
    e.files.push_back(it->path());
  }
  if (total <= max_bytes) return 0;
  std::vector<const Entry*> order;
  for (const auto& [key, e] : entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](const Entry* a, const Entry* b) { return a->used < b->used; });
  uint64_t removed = 0;
  for (const Entry* e : order) {
    if (total - removed <= max_bytes) break;
    for (const fs::path& f : e->files) fs::remove(f, ec);
    removed += e->bytes;
  }
  return removed;
}

void put_in_cache(const fs::path& dir, const std::string& key,
                  const std::vector<std::pair<std::string, fs::path>>& files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const auto& [suffix, from] : files) {
    const fs::path entry = dir / (key + suffix);
    const fs::path part = entry.string() + fmt::format(".{}", getpid());
    if (fs::copy_file(from, part, fs::copy_options::overwrite_existing, ec)) fs::rename(part, entry, ec);
    if (ec) fs::remove(part, ec);
  }
}

int run_nvcc_by_content(std::vector<std::string> argv, const fs::path& sources, const std::string& unity,
                        const fs::path& fatbin, const std::string& key, std::string* log) {
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec) / fmt::format("stitch-nvcc-{}-{}", getuid(), key);
  // Another build of the same key holds the directory while it runs; one left by a build that died
  // is taken back after an hour.
  if (!ec && fs::exists(dir, ec)) {
    const auto age = fs::file_time_type::clock::now() - fs::last_write_time(dir, ec);
    if (!ec && age > std::chrono::hours(1)) fs::remove_all(dir, ec);
  }
  const bool own = !ec && fs::create_directory(dir, ec) && !ec;
  bool copied = own;
  if (own) {
    for (const auto& e : fs::directory_iterator(sources, ec)) {
      std::error_code fe;
      if (e.is_regular_file(fe) && !fs::copy_file(e.path(), dir / e.path().filename(), fe)) copied = false;
      if (fe) copied = false;
    }
    if (ec) copied = false;
  }
  const fs::path from = copied ? dir : sources;
  argv.insert(argv.end(), {"-o", (copied ? dir / "out.fatbin" : fatbin).string(), (from / unity).string()});
  std::string out;
  int rc = run_command(argv, &out);
  if (copied && rc == 0 &&
      !fs::copy_file(dir / "out.fatbin", fatbin, fs::copy_options::overwrite_existing, ec))
    rc = -1, out += fmt::format("could not copy the fatbin to {}: {}\n", fatbin.string(), ec.message());
  if (copied)  // the log names the artifact's files, not the copies
    for (size_t at = out.find(dir.string()); at != std::string::npos; at = out.find(dir.string(), at))
      out.replace(at, dir.string().size(), sources.string()), at += sources.string().size();
  if (own) fs::remove_all(dir, ec);
  *log += out;
  return rc;
}

Status write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  f.close();
  if (!f)
    return Status::user(fmt::format("cannot write '{}': check the output directory is writable", p.string()));
  return Status::ok();
}

Status write_headers(const fs::path& dir, std::string_view prefix) {
  bool wrote = false;
  for (const EmbeddedFile& h : embedded_headers()) {
    if (h.path.substr(0, prefix.size()) != prefix) continue;
    const fs::path to = dir / h.path.substr(prefix.size());
    std::error_code ec;
    fs::create_directories(to.parent_path(), ec);
    RETURN_IF_ERROR(write_file(to, std::string(h.text)));
    wrote = true;
  }
  STITCH_CHECK(wrote, "stitchc was built without the headers under '{}'", prefix);
  return Status::ok();
}

}  // namespace stitch::codegen
