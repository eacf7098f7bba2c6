# shellcheck shell=bash
# lib.sh: shared set-up for scripts/demo.sh, scripts/test.sh and .ci/run.
# Sourced, not run. It makes sure a Go toolchain new enough for go.mod is on
# PATH, fetching one from the Go module proxy (the only download a
# fresh machine needs) when the machine has none.

WALKSTAGE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export WALKSTAGE_ROOT
# The toolchain go.mod asks for; a newer local Go is used as it is.
GO_WANT=1.26.8
GO_CACHE=${WALKSTAGE_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/walkstage}

# go_ok: the go on PATH is at least 1.26 (older ones cannot build the module).
go_ok() {
  command -v go >/dev/null 2>&1 || return 1
  local v
  v=$(go env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  local major=${v%%.*} rest=${v#*.}
  local minor=${rest%%.*}
  minor=${minor%%[!0-9]*}
  [ "$major" -gt 1 ] || { [ "$major" -eq 1 ] && [ "${minor:-0}" -ge 26 ]; }
}

# unpack_zip ZIP DIR with whatever this machine has.
unpack_zip() {
  if command -v unzip >/dev/null 2>&1; then unzip -q "$1" -d "$2"
  elif command -v bsdtar >/dev/null 2>&1; then bsdtar -xf "$1" -C "$2"
  elif command -v python3 >/dev/null 2>&1; then python3 -m zipfile -e "$1" "$2"
  else echo "need unzip, bsdtar or python3 to unpack Go (apt-get install unzip)" >&2; return 1
  fi
}

# fetch URL FILE with curl or wget.
fetch() {
  if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 3 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then wget -q -O "$2" "$1"
  else echo "need curl or wget to download Go (apt-get install curl)" >&2; return 1
  fi
}

ensure_go() {
  [ -d /usr/local/go/bin ] && PATH=$PATH:/usr/local/go/bin
  if go_ok; then return 0; fi
  local arch
  case $(uname -m) in
    x86_64) arch=amd64 ;; aarch64|arm64) arch=arm64 ;;
    *) echo "no Go toolchain for $(uname -m); install Go >= 1.26 by hand" >&2; return 1 ;;
  esac
  local ver=v0.0.1-go${GO_WANT}.linux-${arch}
  local dir=$GO_CACHE/golang.org/toolchain@$ver
  if [ ! -x "$dir/bin/go" ]; then
    echo "fetching Go $GO_WANT from the module proxy into $GO_CACHE" >&2
    mkdir -p "$GO_CACHE"
    local zip=$GO_CACHE/go.zip
    fetch "https://proxy.golang.org/golang.org/toolchain/@v/$ver.zip" "$zip" || return 1
    rm -rf "$GO_CACHE/golang.org"
    unpack_zip "$zip" "$GO_CACHE" || return 1
    rm -f "$zip"
    chmod +x "$dir/bin/"* "$dir/pkg/tool/"*/* 2>/dev/null || true
  fi
  export GOROOT=$dir
  PATH=$dir/bin:$PATH
  export PATH
  go_ok
}

# Test tools, installed into ./bin (ignored by git) at pinned versions.
VERSITYGW_VERSION=v1.8.0
HELM_VERSION=v3.22.0
# SeaweedFS (Apache 2.0): the second S3 server of the integration tests and
# scripts/stage-load.sh, pinned to a pseudo-version the module proxy serves.
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6

# quiet_install WHAT BIN PKG@VERSION: one line saying what is installed, the
# module download noise in a log that is shown only when the install fails.
quiet_install() {
  echo "installing $1 into $2 (once)" >&2
  local log
  log=$(mktemp)
  if ! GOBIN=$2 go install "$3" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# quiet_build WHAT ARGS...: go build with one line saying what it builds; the
# module downloads of a first build go to a log shown only on failure.
quiet_build() {
  local what=$1
  shift
  echo "building $what" >&2
  local log
  log=$(mktemp)
  if ! go build "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# install_weed BIN: SeaweedFS's weed command at SEAWEEDFS_VERSION into BIN,
# one line saying so. `go install weed@version` refuses it (its go.mod has a
# replace directive), so it is built inside its module, downloaded by the
# module proxy like any other.
install_weed() {
  echo "installing weed (SeaweedFS) $SEAWEEDFS_VERSION into $1 (once; a large build)" >&2
  local log dir
  log=$(mktemp)
  if dir=$(go mod download -json "github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION" 2>"$log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') &&
    [ -n "$dir" ] && (cd "$dir" && go build -ldflags '-s -w' -o "$1/weed" ./weed) >>"$log" 2>&1; then
    rm -f "$log"
    return 0
  fi
  cat "$log" >&2
  rm -f "$log"
  return 1
}

ensure_tools() {
  local bin=$WALKSTAGE_ROOT/bin
  mkdir -p "$bin"
  [ -x "$bin/versitygw" ] || quiet_install "versitygw $VERSITYGW_VERSION (S3 server for the integration tests)" \
    "$bin" "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
  [ -x "$bin/weed" ] || install_weed "$bin"
  [ -x "$bin/helm" ] || quiet_install "helm $HELM_VERSION (chart tests)" "$bin" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  PATH=$bin:$PATH
  export PATH
}

# Readers for the conformance test (conformance/): DuckDB and hyparquet
# from the npm registry at the versions conformance/package-lock.json pins,
# into conformance/node_modules (ignored by git). npm's cache keeps the
# packages between runs; a copy of the lock file installed last skips npm
# when it has not changed.
ensure_readers() {
  local dir=$WALKSTAGE_ROOT/conformance
  if ! command -v npm >/dev/null 2>&1; then
    # Debian's packages, where this user may install them (root or sudo).
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
      echo "installing Node.js and npm (Debian packages) for the reader conformance test"
      $sudo apt-get update -q >/dev/null && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >/dev/null
    fi
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "need Node.js and npm for the reader conformance test (apt-get install nodejs npm)" >&2
    return 1
  fi
  local stamp=$dir/node_modules/.walkstage-package-lock.json
  if ! cmp -s "$dir/package-lock.json" "$stamp"; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || return 1
    cp "$dir/package-lock.json" "$stamp"
  fi
}
