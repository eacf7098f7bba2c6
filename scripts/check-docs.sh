#!/usr/bin/env bash
# check-docs.sh: the README is for users. Measurements live in
# docs/benchmarks/ with their environment and command, so the README holds no
# dated run, commit hash or machine nickname (issue 34). Exits 1 naming each
# offending line.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
check() { # PATTERN WHAT
  local hits
  if hits=$(grep -nE "$1" README.md); then
    printf 'README.md has %s (move it to docs/benchmarks/):\n%s\n' "$2" "$hits" >&2
    bad=1
  fi
}
check '\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b' 'a dated measurement'
# 7-40 hex digits with both a digit and a letter: a commit hash.
if hits=$(grep -noE '\b[0-9a-f]{7,40}\b' README.md | grep -E ':[0-9a-f]*([0-9][0-9a-f]*[a-f]|[a-f][0-9a-f]*[0-9])'); then
  printf 'README.md has a commit hash (move it to docs/benchmarks/):\n%s\n' "$hits" >&2
  bad=1
fi
check '\b(host [A-Z]|call [0-9]+|calls [0-9]+)\b' 'a machine nickname or device call'
# stage/config/config.go's comments are `walkstage run -h`: what a setting means
# and why, not what it measured on a given day.
if hits=$(grep -nE '\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b|M walk vertices/s|M steps/s|H[12]00 host|\bhost [A-Z]\b' stage/config/config.go); then
  printf 'stage/config/config.go (walkstage run -h) quotes a measurement (move it to docs/benchmarks/):\n%s\n' "$hits" >&2
  bad=1
fi
# Code comments and help text (Go and CUDA sources outside tests, the
# scripts) say what a thing means and why; a dated run, a commit hash or a
# machine nickname belongs to docs/benchmarks/ (issue 34).
srcs=$(git ls-files '*.go' '*.cu' '*.cuh' '*.sh' | grep -v '_test\.go$')
# shellcheck disable=SC2086 # one file name a word
if hits=$(grep -nE '\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b|\b(host [A-Z]|call [0-9]+|calls [0-9]+)\b' $srcs | grep -v '^scripts/check-docs\.sh:'); then
  printf 'source comments or help text quote a dated run or a machine nickname (move it to docs/benchmarks/):\n%s\n' "$hits" >&2
  bad=1
fi
# Every relative link in the Markdown files names a file that exists (docs
# move between reference/, design/ and benchmarks/).
if command -v python3 >/dev/null 2>&1; then
  if ! git ls-files -z '*.md' | python3 -c '
import os, re, sys
bad = 0
for f in sys.stdin.read().split("\0"):
    if not f or "node_modules" in f:
        continue
    for m in re.finditer(r"\]\(([^)\s]+)\)", open(f, encoding="utf-8").read()):
        t = m.group(1).split("#")[0]
        if not t or t.startswith(("http://", "https://", "mailto:")):
            continue
        if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(f), t))):
            print(f"{f}: broken link {m.group(1)}", file=sys.stderr)
            bad = 1
sys.exit(bad)
'; then
    bad=1
  fi
fi
[ "$(wc -l < README.md)" -le 250 ] || { echo "README.md is over 250 lines" >&2; bad=1; }
exit "$bad"
