#!/bin/sh
# The GPU engine's checks on a machine with a CUDA device and no Go
# toolchain. Build here first (make test-cuda-bin; make build-cuda-bin build
# build-entrypoint for the image checks), copy .dev/gpu.test, this script and
# the binaries into one folder DIR, and run there:
#
#   scripts/gpu-device-check.sh DIR [LOGDIR]
#
# 1. every cuda test (the failure-injection tests included);
# 2. compute-sanitizer memcheck (with leak checking) on the failure tests;
# 3. when DIR holds the image's binaries, the entrypoint's choice on a host
#    with a GPU: `walkstage gpu-probe` and `walkstage demo` on the GPU engine.
# Full logs go to LOGDIR (default DIR); a summary is printed last.
set -u
dir=${1:?usage: gpu-device-check.sh DIR [LOGDIR]}
logs=${2:-$dir}
cd "$dir" || exit 2
mkdir -p "$logs"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

echo "== cuda tests"
t0=$(date +%s)
WALKSTAGE_GPU_SMALL= ./gpu.test -test.v -test.count=1 -test.timeout 8m >"$logs/gpu-test.log" 2>&1 || status=1
grep -E '^(--- |PASS|FAIL|ok|panic)|a first Run makes|a Run makes|broken as expected|needs .* of device memory' "$logs/gpu-test.log" | grep -v '^    --- PASS' | tail -n 60
echo "cuda tests: $(( $(date +%s) - t0 )) s, status $status"

echo "== compute-sanitizer memcheck on the failure tests"
t0=$(date +%s)
WALKSTAGE_GPU_SMALL=1 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
  ./gpu.test -test.run 'AllocationFailure|CopyFailure|InjectedSticky|DoesNotFit|EmitError|CloseReleases' -test.count=1 -test.v \
  >"$logs/sanitizer.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || status=1
grep -E '^(--- |PASS|FAIL|ok)|ERROR SUMMARY|LEAK SUMMARY|=========' "$logs/sanitizer.log" | tail -n 40
echo "sanitizer: rc $rc, $(( $(date +%s) - t0 )) s"

if [ -x ./walkstage ] && [ -x ./lib/walkstage-cuda ]; then
  echo "== image entrypoint on a GPU host"
  ./lib/walkstage-cuda gpu-probe; echo "gpu-probe: rc $?"
  WALKSTAGE_BIN_DIR=$PWD/lib ./walkstage demo --dir "$logs/demo" --scale 12 >"$logs/demo.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || status=1
  tail -n 15 "$logs/demo.log"
  echo "demo through the entrypoint: rc $rc"
fi
exit $status
