// cu_to_cpp IN.cu OUT.cpp: rewrites the two CUDA constructs plain C++ cannot express so
// that a portable kernel source compiles for the CPU emulation (warp_emu.h):
//   name<T...><<<grid, block, smem, stream>>>(args...);
//     -> ::msa_emu::launch(MSA_WARP_SIZE, ::msa_emu::LaunchCfg(grid, block, smem, stream),
//                          [&](auto&&... a) { name<T...>(a...); }, args...);
//   extern __shared__ [alignas(N)] T name[];
//     -> T* name = ::msa_emu::dyn_smem<T>();
// Everything else (qualifiers, intrinsics, runtime calls) is mapped by the emulation's
// vendor.h. Comments and literals are copied untouched; line numbers are preserved and a
// #line directive points diagnostics at the original file.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

[[noreturn]] void fail(const std::string& file, const std::string& text, size_t pos, const std::string& what) {
  int line = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) line += text[i] == '\n';
  std::cerr << file << ":" << line << ": cu_to_cpp: " << what << "\n";
  std::exit(1);
}

// Start of the kernel expression that ends at out.size() (an identifier path with an
// optional template argument list), scanning backwards.
size_t kernel_start(const std::string& out) {
  size_t j = out.size();
  while (j > 0 && std::isspace(static_cast<unsigned char>(out[j - 1]))) --j;
  if (j > 0 && out[j - 1] == '>') {
    int depth = 0;
    while (j > 0) {
      const char c = out[--j];
      if (c == '>') ++depth;
      if (c == '<' && --depth == 0) break;
    }
    while (j > 0 && std::isspace(static_cast<unsigned char>(out[j - 1]))) --j;
  }
  while (j > 0 && (ident_char(out[j - 1]) || out[j - 1] == ':')) --j;
  return j;
}

// Copies a comment or literal starting at i into out; returns the index after it, or i.
size_t skip_opaque(const std::string& s, size_t i, std::string& out) {
  const size_t n = s.size();
  size_t e = i;
  if (s.compare(i, 2, "//") == 0) {
    e = s.find('\n', i);
    if (e == std::string::npos) e = n;
  } else if (s.compare(i, 2, "/*") == 0) {
    e = s.find("*/", i + 2);
    e = e == std::string::npos ? n : e + 2;
  } else if (s[i] == '"' || (s[i] == '\'' && (i == 0 || !std::isxdigit(static_cast<unsigned char>(s[i - 1]))))) {
    const char q = s[i];
    e = i + 1;
    while (e < n && s[e] != q) e += s[e] == '\\' ? 2 : 1;
    e = std::min(n, e + 1);
  } else {
    return i;
  }
  out.append(s, i, e - i);
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cu_to_cpp IN.cu OUT.cpp\n";
    return 2;
  }
  const std::string in = argv[1];
  std::ifstream f(in);
  if (!f) {
    std::cerr << "cu_to_cpp: cannot read " << in << "\n";
    return 1;
  }
  std::stringstream buf;
  buf << f.rdbuf();
  const std::string s = buf.str();
  std::string out = "#line 1 \"" + in + "\"\n";
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (const size_t e = skip_opaque(s, i, out); e != i) {
      i = e;
      continue;
    }
    if (s.compare(i, 3, "<<<") == 0) {
      const size_t start = kernel_start(out);
      const std::string name = out.substr(start);
      if (name.find_first_not_of(" \t\n") == std::string::npos) fail(in, s, i, "no kernel name before <<<");
      out.resize(start);
      const size_t close = s.find(">>>", i + 3);
      if (close == std::string::npos) fail(in, s, i, "<<< without >>>");
      const std::string cfg = s.substr(i + 3, close - i - 3);
      size_t p = close + 3;
      while (p < n && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
      if (p >= n || s[p] != '(') fail(in, s, i, "expected ( after >>>");
      size_t q = p + 1;
      while (q < n && std::isspace(static_cast<unsigned char>(s[q]))) ++q;
      const bool no_args = q < n && s[q] == ')';
      out += "::msa_emu::launch(MSA_WARP_SIZE, ::msa_emu::LaunchCfg(" + cfg + "), [&](auto&&... msa_a_) { " + name +
             "(msa_a_...); }" + (no_args ? "" : ", ");
      i = p + 1;
      continue;
    }
    if (s.compare(i, 6, "extern") == 0 && (i == 0 || !ident_char(s[i - 1])) && i + 6 < n && !ident_char(s[i + 6])) {
      size_t p = i + 6;
      while (p < n && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
      if (s.compare(p, 10, "__shared__") == 0) {
        const size_t semi = s.find(';', p);
        if (semi == std::string::npos) fail(in, s, i, "extern __shared__ without ;");
        std::string decl = s.substr(p + 10, semi - p - 10);
        for (const char* attr : {"alignas", "__align__"}) {
          if (size_t a = decl.find(attr); a != std::string::npos) {
            const size_t r = decl.find(')', a);
            decl.erase(a, r - a + 1);
          }
        }
        const size_t br = decl.find('[');
        if (br == std::string::npos) fail(in, s, i, "extern __shared__ must declare an array T name[]");
        size_t ne = br;
        while (ne > 0 && std::isspace(static_cast<unsigned char>(decl[ne - 1]))) --ne;
        size_t nb = ne;
        while (nb > 0 && ident_char(decl[nb - 1])) --nb;
        const std::string var = decl.substr(nb, ne - nb);
        std::string type = decl.substr(0, nb);
        while (!type.empty() && std::isspace(static_cast<unsigned char>(type.back()))) type.pop_back();
        while (!type.empty() && std::isspace(static_cast<unsigned char>(type.front()))) type.erase(0, 1);
        out += type + "* " + var + " = ::msa_emu::dyn_smem<" + type + ">();";
        for (size_t k = i; k < semi; ++k)
          if (s[k] == '\n') out += '\n';  // keep line numbers
        i = semi + 1;
        continue;
      }
    }
    out += s[i++];
  }
  std::ofstream o(argv[2]);
  o << out;
  return o ? 0 : 1;
}
