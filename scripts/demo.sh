#!/usr/bin/env bash
# demo.sh: the README's first command. Fetches Go if the machine has none,
# builds walkstage and runs `walkstage demo`: an in-process Kafka-protocol
# broker, a file:// store under ./walkstage-demo, a generated graph, one
# seed batch per algorithm; it prints the completion events and the files.
# Extra arguments go to `walkstage demo` (see `walkstage demo -h`).
set -euo pipefail

usage() {
	cat <<'USAGE'
usage: scripts/demo.sh [--dir ./walkstage-demo] [--fresh] [--scale 16] [--engine auto|cpu|gpu] [--timeout 2m] [-v]

Builds bin/walkstage (fetching Go first if this machine has none) and runs
`walkstage demo`: an in-process Kafka-protocol broker on a loopback port, a
file:// store under --dir, a generated R-MAT graph, one seed batch per
algorithm and one malformed request. Prints the completion events and where
the Parquet files are. Run again in the same --dir, the stage finds the
earlier output and reports those batches from their manifests without
walking them again, and says so; --fresh removes <dir>/walks first. The
arguments go to `walkstage demo` unchanged:

  --dir DIR        working folder for the graph and the Parquet output (default ./walkstage-demo)
  --fresh          remove the output of an earlier run in DIR first
  --scale N        R-MAT scale of the generated graph, 2^N vertices (default 16, 4..26)
  --engine E       auto (GPU when built with CUDA and present), cpu or gpu (default auto)
  --timeout D      give up after this long (default 2m)
  -v               show the stage's info logs on stderr
USAGE
}

# Help needs no Go and no build.
for a in "$@"; do
	case "$a" in
	-h | -help | --help) usage; exit 0 ;;
	esac
done

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
ensure_go
cd "$WALKSTAGE_ROOT"
mkdir -p bin
# The version the Makefile stamps, so the output's metadata names the build.
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
CGO_ENABLED=0 quiet_build "bin/walkstage (the first build downloads modules: a minute or two)" \
	-ldflags "-X main.Version=$version" -o bin/walkstage ./cmd/walkstage
exec bin/walkstage demo "$@"
