#!/usr/bin/env bash
# demo.sh: the README's first command. Fetches Go if the machine has none,
# builds walkstage and runs `walkstage demo`: an in-process Kafka-protocol
# broker, a file:// store under ./walkstage-demo, a generated graph, one
# seed batch per algorithm; it prints the completion events and the files.
# Extra arguments go to `walkstage demo` (see `walkstage demo -h`).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
ensure_go
cd "$WALKSTAGE_ROOT"
mkdir -p bin
CGO_ENABLED=0 go build -o bin/walkstage ./cmd/walkstage
exec bin/walkstage demo "$@"
