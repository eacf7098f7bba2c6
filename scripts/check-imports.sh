#!/usr/bin/env bash
# check-imports.sh: data flows one way (STYLE.md, issue 34). The library
# packages (the graph, the engines, the sink, the source, the stage, the
# catalog) never import a command or a tool built on them (cmd/..., the
# load generator, demo/, the chaos suite), with or without the cuda tag,
# tests included; and the walkstage command builds its engines through
# engines/, so only `walkstage run` (run.go) imports the stage (`walkstage
# load` reads the stage's variables for its defaults from stage/config);
# the catalog, which only needs buckets, reaches them through store/,
# not through the sink (the Parquet encoder and batch writer); sink/output,
# the output contract that readers of committed output import, reaches
# neither the batch writer nor the Parquet encoder; the graph core does not
# reach the importer (graph/edgelist), and the importer's external sort and
# graph-file writer no input format; and the message model (message/)
# knows no Kafka client and no package that moves or writes walks: Kafka
# is source's, output the sink's.
# Exits 1 naming each offending import.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
guarded=(./walk/... ./graphsample/... ./gpu/... ./graph/... ./sink/... ./store/... ./source/... ./message/... ./stage/... ./catalog/... ./engines/...)
# What the guarded packages must not reach: the commands and their tools.
forbidden="^$mod/(cmd|demo|chaos)(/|$)|/loadgen(/|$)"
bad=0

# check_tools TAGS: every package the guarded ones need to build and test
# (go list -deps -test) with its imports; an import of a forbidden package
# by one that is not itself forbidden is the arrow to report.
check_tools() {
  local tags=$1 listing edges
  listing=$(go list -tags "$tags" -deps -test -f '{{.ImportPath}}|{{join .Imports " "}}' "${guarded[@]}")
  edges=$(while IFS='|' read -r pkg imports; do
    local in=""
    case $pkg in *" ["*) in=" in its tests" ;; esac # a test variant, "p [p.test]"
    pkg=${pkg%% *}
    case $pkg in "$mod"/*) ;; *) continue ;; esac
    [[ $pkg =~ $forbidden ]] && continue
    for imp in $imports; do
      if [[ $imp =~ $forbidden ]]; then echo "$pkg imports ${imp%% *}$in"; fi
    done
  done <<<"$listing" | sort -u)
  [ -z "$edges" ] && return 0
  printf 'check-imports: the library packages must not import a command or its tools (tags "%s"):\n' "$tags" >&2
  local edge pkg root deps
  while read -r edge; do
    pkg=${edge%% imports *}
    # Name the guarded packages that reach the importer, when it is not one.
    local via=()
    for root in $(go list -tags "$tags" "${guarded[@]}"); do
      [ "$root" = "$pkg" ] && { via=(); break; }
      deps=$(go list -tags "$tags" -deps -test "$root") # not piped: grep -q would cut go list off
      if grep -qxF "$pkg" <<<"$deps"; then via+=("${root#"$mod"/}"); fi
    done
    if [ "${#via[@]}" -gt 0 ]; then
      printf '  %s (needed by %s)\n' "$edge" "${via[*]}" >&2
    else
      printf '  %s\n' "$edge" >&2
    fi
  done <<<"$edges"
  bad=1
}
# The cuda-tagged files embed the kernels (gpu/*.fatbin, from make kernels,
# which .ci/run builds first): without them go list cannot load the gpu
# package under that tag, so a machine without nvcc checks the rest.
cuda=cuda
if ! ls gpu/*.fatbin >/dev/null 2>&1; then
  echo "check-imports: gpu/*.fatbin not built (make kernels): cuda-tagged imports not checked" >&2
  cuda=
fi
check_tools ""
[ -z "$cuda" ] || check_tools cuda

# check_unreached TAGS ROOTS REGEX HINT: the packages ROOTS and everything
# they need to build and test (go list -deps -test) import no package
# matching REGEX; each import of one, by a package that does not match it
# itself, is reported with HINT.
check_unreached() {
  local tags=$1 roots=$2 re=$3 hint=$4 listing edges
  # shellcheck disable=SC2086 # roots: one package pattern a word
  listing=$(go list -tags "$tags" -deps -test -f '{{.ImportPath}}|{{join .Imports " "}}' $roots)
  edges=$(while IFS='|' read -r pkg imports; do
    local in=""
    case $pkg in *" ["*) in=" in its tests" ;; esac
    pkg=${pkg%% *}
    case $pkg in "$mod"/*) ;; *) continue ;; esac
    [[ $pkg =~ $re ]] && continue
    for imp in $imports; do
      if [[ $imp =~ $re ]]; then echo "$pkg imports ${imp%% *}$in"; fi
    done
  done <<<"$listing" | sort -u)
  [ -z "$edges" ] && return 0
  printf 'check-imports: %s (tags "%s"):\n' "$hint" "$tags" >&2
  local edge
  while read -r edge; do printf '  %s\n' "$edge" >&2; done <<<"$edges"
  bad=1
}
# The catalog only needs buckets: it reaches them through store/, never
# through the sink (the batch writer, the Parquet encoder, the output
# contract).
catalog_hint="the catalog must not reach the sink (open buckets with $mod/store)"
# The output contract (layout, manifests, listings) is what readers of
# committed output import: it must not pull in the batch writer or the
# Parquet encoder.
output_hint="sink/output must not reach the batch writer ($mod/sink) or the Parquet encoder ($mod/sink/pages)"
# The importer sits beside the graph core, which never needs it; its
# external sort and its graph-file writer know nothing of the input
# formats (the decoders are graph/edgelist's).
graph_hint="the graph core must not reach the importer ($mod/graph/edgelist)"
sort_hint="graph/edgelist/extsort and csrfile must not reach the input formats' decoders (parquet-go)"
for tags in "" ${cuda:+"$cuda"}; do
  check_unreached "$tags" ./catalog/... "^$mod/sink(/|$)" "$catalog_hint"
  check_unreached "$tags" ./sink/output/... "^$mod/sink(/pages)?$" "$output_hint"
  check_unreached "$tags" ./graph "^$mod/graph/edgelist(/|$)" "$graph_hint"
  check_unreached "$tags" "./graph/edgelist/extsort/... ./graph/edgelist/csrfile/..." "^github.com/parquet-go/" "$sort_hint"
done

# check_message TAGS: the message model and everything it needs to build
# and test import no Kafka client (segmentio/kafka-go, franz-go) and none of
# walkstage's packages that read Kafka, write output or run engines.
check_message() {
  local tags=$1 listing edges
  local banned="^(github\.com/segmentio/kafka-go|github\.com/twmb/franz-go)(/|$)|^$mod/(source|sink|store|catalog|icetable|stage|engines|gpu)(/|$)"
  listing=$(go list -tags "$tags" -deps -test -f '{{.ImportPath}}|{{join .Imports " "}}' ./message/...)
  edges=$(while IFS='|' read -r pkg imports; do
    local in=""
    case $pkg in *" ["*) in=" in its tests" ;; esac
    pkg=${pkg%% *}
    case $pkg in "$mod"/*) ;; *) continue ;; esac
    [[ $pkg =~ $banned ]] && continue
    for imp in $imports; do
      if [[ $imp =~ $banned ]]; then echo "$pkg imports ${imp%% *}$in"; fi
    done
  done <<<"$listing" | sort -u)
  [ -z "$edges" ] && return 0
  printf 'check-imports: the message model must not reach a Kafka client, the sink or the engines (tags "%s"):\n' "$tags" >&2
  local edge
  while read -r edge; do printf '  %s\n' "$edge" >&2; done <<<"$edges"
  bad=1
}
check_message ""
[ -z "$cuda" ] || check_message cuda

# The walkstage command (package main and its command families under
# cmd/walkstage/internal/) builds its engines with engines/: per file, as
# go list sees them without and with the cuda tag, only run.go, which is
# `walkstage run`, imports the stage.
list_cmd_files() {
  # shellcheck disable=SC2016 # a Go template, not shell
  go list -tags "$1" -f '{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}' ./cmd/walkstage/...
}
for path in $({ list_cmd_files ""; [ -z "$cuda" ] || list_cmd_files cuda; } | sort -u); do
  f=${path#"$PWD"/}
  [ "$f" = cmd/walkstage/run.go ] && continue
  if grep -qF "\"$mod/stage\"" "$path"; then
    printf 'check-imports: %s imports %s/stage, which only walkstage run (cmd/walkstage/run.go) may: build engines with %s/engines\n' \
      "$f" "$mod" "$mod" >&2
    bad=1
  fi
done
exit "$bad"
