#!/usr/bin/env bash
# The linters CI runs (scripts/test-all.sh, threadsafety variant); each can be run on its own:
#   scripts/lint.sh format        clang-format --dry-run -Werror over every tracked C/C++ file
#   scripts/lint.sh tidy BUILD    clang-tidy (the checks in .clang-tidy) over the library sources,
#                                 with BUILD's compile_commands.json (configure BUILD with clang and
#                                 -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
#   scripts/lint.sh all BUILD     both
# Each names the files that fail and exits 1 if any does.
set -euo pipefail
cd "$(dirname "$0")/.."

check_format() {
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "lint: format needs a git checkout (it checks the tracked files)"; return 2; }
  local files=() bad=()
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.c')
  # One run over all of them; each violation is reported as FILE:LINE:COL: error: ...
  mapfile -t bad < <(printf '%s\0' "${files[@]}" |
    xargs -0 clang-format --dry-run -Werror 2>&1 |
    sed -n -E 's/^(.+):[0-9]+:[0-9]+: error: code should be clang-formatted.*/\1/p' | sort -u)
  if ((${#bad[@]})); then
    echo "lint: ${#bad[@]} of ${#files[@]} files are not clang-formatted (run clang-format -i on them):"
    printf '  %s\n' "${bad[@]}"
    return 1
  fi
  echo "lint: all ${#files[@]} C/C++ files are clang-formatted"
}

check_tidy() {
  local build=$1
  [ -f "$build/compile_commands.json" ] ||
    { echo "lint: no $build/compile_commands.json (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)"; return 2; }
  # The four libraries' own sources; tests, tools and examples are not checked.
  local regex="$PWD/(runtime|channels|netpoll|tls)/src/.*\\.cpp\$"
  local log
  log=$(mktemp)
  # run-clang-tidy always asks for colour: strip the escapes.
  if run-clang-tidy -p "$build" -quiet -j"$(nproc)" "$regex" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >"$log"; then  # pipefail: fails if clang-tidy did
    echo "lint: clang-tidy found nothing (.clang-tidy's checks, the library sources)"
    rm -f "$log"
    return 0
  fi
  # run-clang-tidy prints each file's command and clang's "N warnings generated" (warnings in
  # system headers, filtered out): keep the findings.
  grep -E -A 3 '(warning|error): ' "$log" | grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated' || cat "$log"
  echo "lint: clang-tidy failed; the files:"
  grep -E -o '^[^ :]+\.(cpp|hpp|h):[0-9]+:[0-9]+: (warning|error)' "$log" | cut -d: -f1 | sort -u |
    sed 's/^/  /'
  rm -f "$log"
  return 1
}

case ${1:-} in
  format) check_format ;;
  tidy) check_tidy "${2:?usage: scripts/lint.sh tidy BUILD_DIR}" ;;
  all)
    rc=0
    check_format || rc=1
    check_tidy "${2:?usage: scripts/lint.sh all BUILD_DIR}" || rc=1
    exit $rc
    ;;
  *) echo "usage: scripts/lint.sh format | tidy BUILD_DIR | all BUILD_DIR"; exit 2 ;;
esac
