#!/usr/bin/env bash
# check-sizes.sh: a package holds one idea, and past about 3,000 lines of
# non-test Go it usually holds several (issue 34). A package over the limit
# must say why in its package doc, in a paragraph that starts "Size:", so
# the exception is a decision a reader can weigh, not drift. Exits 1 naming
# each package over the limit without one.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${WALKSTAGE_PACKAGE_LINES:-3000}
bad=0
# -e: the cuda files count too, and listing them must not need the kernels
# built (go:embed of gpu/*.fatbin), or the check would pass on an error.
count=0
while IFS='|' read -r dir files; do
  [ -n "$files" ] || continue
  count=$((count + 1))
  n=0
  for f in $files; do
    n=$((n + $(wc -l <"$dir/$f")))
  done
  [ "$n" -gt "$limit" ] || continue
  # The package doc is the comment above a package clause; "Size:" in any
  # of the package's non-test files counts.
  # shellcheck disable=SC2086 # one file name a word
  if ! (cd "$dir" && grep -lE '^// Size:' $files >/dev/null); then
    printf '%s: %d non-test lines (limit %d) and no "// Size:" paragraph in its package doc saying why\n' \
      "${dir#"$PWD"/}" "$n" "$limit" >&2
    bad=1
  fi
done < <(go list -e -tags cuda -f '{{.Dir}}|{{join .GoFiles " "}} {{join .CgoFiles " "}} {{join .IgnoredGoFiles " "}}' ./...)
if [ "$count" -lt 10 ]; then
  echo "check-sizes: go list found only $count packages" >&2
  exit 1
fi
exit "$bad"
