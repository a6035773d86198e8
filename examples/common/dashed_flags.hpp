// dashed_flags: lets a server take its flags spelt with dashes as well as underscores
// (--tls-cert=FILE and --tls_cert=FILE). Abseil flags are C++ identifiers; this rewrites the
// name part of each "--a-b[=v]" argument in place (same length) before absl::ParseCommandLine.
// Arguments after a lone "--" are left alone.
#pragma once

#include <cstring>

namespace examples {

inline void accept_dashed_flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* a = argv[i];
    if (std::strcmp(a, "--") == 0) return;
    if (a[0] != '-') continue;
    char* name = a + (a[1] == '-' ? 2 : 1);
    for (char* p = name; *p && *p != '='; ++p) {
      if (*p == '-' && p != name) *p = '_';
    }
  }
}

}  // namespace examples
