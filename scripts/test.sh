#!/usr/bin/env bash
# test.sh: the test suite, as CI runs it. Fetches Go if the machine has
# none, installs the integration-test servers and tools (versitygw, SeaweedFS, helm)
# into ./bin and the Parquet readers of the conformance test (DuckDB and
# hyparquet, from npm) into conformance/node_modules, then runs every
# package's tests with the integration tests required rather than skipped.
# Extra arguments go to `go test`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
ensure_go
cd "$WALKSTAGE_ROOT"
ensure_tools
ensure_readers
export WALKSTAGE_INTEGRATION=1 WALKSTAGE_REQUIRE_HELM=1
go version
"$WALKSTAGE_ROOT/scripts/check-docs.sh"
"$WALKSTAGE_ROOT/scripts/check-imports.sh"
"$WALKSTAGE_ROOT/scripts/check-sizes.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
go test -count=1 -timeout 20m "$@" ./... 2>&1 | tee "$log" || rc=$?
if [ "$rc" -ne 0 ]; then
  # A crash prints every goroutine, which buries its cause far above the
  # end of the log: repeat the cause and the failed tests last.
  echo "== failure digest"
  grep -E -m 12 -A 3 '^(panic:|fatal error:|unexpected fault|SIG[A-Z]+:|runtime: )' "$log" || true
  grep -E '^(--- FAIL|FAIL|ok )' "$log" | grep -v '^ok ' | tail -n 12 || true
  exit "$rc"
fi
