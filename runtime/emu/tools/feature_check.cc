// stitch_emu_feature_check: keeps kernel sources and the emulation layer's supported-feature
// list (runtime/emu/SUPPORTED.md) in agreement.
//
//   stitch_emu_feature_check --list SUPPORTED.md --header NAME=PATH... FILE.cu...
//
// 1. Every identifier the list says a header of ours provides (emu.h, cooperative_groups.h,
//    compat.cuh) must appear in that header.
// 2. Every CUDA identifier a kernel file uses (double-underscore names, atomic*, the builtin
//    variables, device-only math, cooperative_groups members, pragmas) must be in the list,
//    and none of the known-unsupported constructs (extern __shared__, <<<>>>, inline asm) may
//    appear. Prints each violation as FILE:LINE and exits 1 when there is any.
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "error: cannot read " << path << "\n";
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Row {
  std::vector<std::string> names;
  std::string provider;
};

// Table rows: | `a`, `b` | provider | notes |
std::vector<Row> parse_list(const std::string& text) {
  std::vector<Row> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `", 0) != 0 && line.rfind("| C math", 0) != 0 && line.rfind("| templates", 0) != 0)
      continue;
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|') {
        cells.push_back(cell);
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    if (cells.size() < 2) continue;
    Row row;
    for (std::size_t b = cells[0].find('`'); b != std::string::npos; b = cells[0].find('`', b + 1)) {
      const std::size_t e = cells[0].find('`', b + 1);
      if (e == std::string::npos) break;
      row.names.push_back(cells[0].substr(b + 1, e - b - 1));
      b = e;
    }
    std::string p = cells[1];
    p.erase(0, p.find_first_not_of(' '));
    p.erase(p.find_last_not_of(' ') + 1);
    row.provider = p;
    rows.push_back(row);
  }
  return rows;
}

// Replaces comments and string/char literals with spaces, keeping line breaks.
std::string strip(const std::string& s) {
  std::string out = s;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out.compare(i, 2, "//") == 0) {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (out.compare(i, 2, "/*") == 0) {
      std::size_t j = out.find("*/", i + 2);
      j = j == std::string::npos ? out.size() : j + 2;
      for (; i < j; ++i)
        if (out[i] != '\n') out[i] = ' ';
      --i;
    } else if (out[i] == '"' || out[i] == '\'') {
      const char q = out[i];
      // #include "..." keeps its text: not a CUDA identifier either way.
      for (++i; i < out.size() && out[i] != q && out[i] != '\n'; ++i) {
        if (out[i] == '\\') out[i++] = ' ';
        out[i] = ' ';
      }
    }
  }
  return out;
}

bool word_in(const std::string& text, const std::string& word) {
  for (std::size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1)) {
    const bool left =
        p == 0 || !(std::isalnum(static_cast<unsigned char>(text[p - 1])) || text[p - 1] == '_');
    const std::size_t e = p + word.size();
    const bool right =
        e >= text.size() || !(std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_');
    if (left && right) return true;
  }
  return false;
}

const std::set<std::string> kIgnoredDunder = {"__FILE__",    "__LINE__",      "__func__",      "__VA_ARGS__",
                                              "__cplusplus", "__attribute__", "__STITCH_EMU__"};
const std::set<std::string> kCudaOnlyMath = {
    "rsqrtf",   "rsqrt",   "rcbrtf",    "rcbrt",    "normcdff", "normcdf", "normcdfinvf", "normcdfinv",
    "erfinvf",  "erfinv",  "erfcinvf",  "erfcinv",  "erfcxf",   "erfcx",   "sinpif",      "sinpi",
    "cospif",   "cospi",   "sincospif", "sincospi", "rhypotf",  "rhypot",  "rnormf",      "norm3df",
    "rnorm3df", "norm4df", "fdividef",  "clock64",  "min",      "max"};
const std::regex kIdentifier(R"([A-Za-z_][A-Za-z_0-9]*)");
const std::regex kCgAlias(R"(namespace\s+(\w+)\s*=\s*cooperative_groups\s*;)");
const std::regex kSpaces(R"(\s+)");
const std::regex kExternShared(R"(extern\s+__shared__)");
const std::regex kInlineAsm(R"(\basm\b|\b__asm__\b)");
const std::regex kAtomic("atomic[A-Z]\\w*");
const std::regex kHalfMath(
    "h2?(exp|exp2|exp10|log|log2|log10|sqrt|rsqrt|rcp|tanh|sin|cos|floor|ceil|trunc|rint)");

}  // namespace

int main(int argc, char** argv) {
  std::string list_path;
  std::map<std::string, std::string> headers;  // provider name -> path
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list" && i + 1 < argc) {
      list_path = argv[++i];
    } else if (a == "--header" && i + 1 < argc) {
      const std::string h = argv[++i];
      const auto eq = h.find('=');
      if (eq == std::string::npos) {
        std::cerr << "error: --header wants NAME=PATH, got " << h << "\n";
        return 2;
      }
      headers[h.substr(0, eq)] = h.substr(eq + 1);
    } else {
      files.push_back(a);
    }
  }
  if (list_path.empty()) {
    std::cerr << "usage: stitch_emu_feature_check --list SUPPORTED.md --header NAME=PATH... FILE.cu...\n";
    return 2;
  }
  const std::vector<Row> rows = parse_list(read_file(list_path));
  std::set<std::string> listed;
  int problems = 0;

  std::map<std::string, std::string> header_text;
  for (const auto& [name, path] : headers) header_text[name] = strip(read_file(path));
  for (const Row& row : rows) {
    for (const std::string& name : row.names) {
      listed.insert(name);
      const auto h = header_text.find(row.provider);
      if (h == header_text.end()) continue;  // CUDA's own headers or the language
      const std::string word = name.rfind("cooperative_groups::", 0) == 0 ? name.substr(20) : name;
      if (!word_in(h->second, word)) {
        std::cout << list_path << ": `" << name << "` is listed as provided by " << row.provider
                  << " but that header does not define it\n";
        ++problems;
      }
    }
  }

  for (const std::string& path : files) {
    const std::string text = strip(read_file(path));
    std::set<std::string> cg_prefixes = {"cooperative_groups"};
    for (std::sregex_iterator it(text.begin(), text.end(), kCgAlias), end; it != end; ++it)
      cg_prefixes.insert((*it)[1]);
    std::istringstream in(text);
    std::string line;
    for (int lineno = 1; std::getline(in, line); ++lineno) {
      auto report = [&](const std::string& what) {
        std::cout << path << ":" << lineno << ": " << what << "\n";
        ++problems;
      };
      std::string trimmed = line.substr(std::min(line.size(), line.find_first_not_of(" \t")));
      if (trimmed.rfind("#pragma", 0) == 0) {
        std::string pragma = std::regex_replace(trimmed, kSpaces, " ");
        pragma = pragma.substr(0, pragma.find(' ', 8));
        if (!listed.count(pragma)) report("`" + pragma + "` is not in the supported-feature list");
        continue;
      }
      if (trimmed.rfind("#include", 0) == 0) continue;
      if (std::regex_search(line, kExternShared))
        report(
            "`extern __shared__` is not supported; declare dynamic shared memory with STITCH_DYNAMIC_SMEM");
      if (line.find("<<<") != std::string::npos)
        report("`<<<...>>>` launches are host code; kernel files hold kernels");
      if (std::regex_search(line, kInlineAsm)) report("inline assembly is not supported");
      for (std::sregex_iterator it(line.begin(), line.end(), kIdentifier), end; it != end; ++it) {
        const std::string tok = it->str();
        const std::size_t pos = static_cast<std::size_t>(it->position());
        std::string name;
        // prefix::member for cooperative groups
        for (const std::string& prefix : cg_prefixes) {
          const std::string lead = prefix + "::";
          if (pos >= lead.size() && line.compare(pos - lead.size(), lead.size(), lead) == 0) {
            name = "cooperative_groups::" + tok;
          }
        }
        if (name.empty()) {
          if (tok.rfind("__", 0) == 0 && tok.rfind("__builtin", 0) != 0 && !kIgnoredDunder.count(tok))
            name = tok;
          else if (std::regex_match(tok, kAtomic))
            name = tok;
          else if (tok == "threadIdx" || tok == "blockIdx" || tok == "blockDim" || tok == "gridDim" ||
                   tok == "warpSize")
            name = tok;
          else if (kCudaOnlyMath.count(tok) || std::regex_match(tok, kHalfMath))
            name = tok;
        }
        if (!name.empty() && !listed.count(name))
          report("`" + name + "` is not in the supported-feature list");
      }
    }
  }
  if (problems == 0) std::cout << "ok: " << files.size() << " files use only supported CUDA features\n";
  return problems == 0 ? 0 : 1;
}
