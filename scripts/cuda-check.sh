#!/usr/bin/env bash
# cuda-check.sh: run on a GPU machine from the repository root, with the
# test binary built here by `make -f Makefile.cuda test-cuda-bin` (.dev/).
#   scripts/cuda-check.sh [tests] [memcheck] [faults] [racecheck] [image] [bench=SCALE]
# faults runs memcheck (leak check) over the failure-injection tests; image
# needs `make build build-cuda-bin` too (bin/): it lays out the GPU image's
# files, runs the CUDA build's gpu-probe and the demo through the entrypoint.
# Logs go to $OUT (or ./out) so they come back from the device tool.
set -u
out=${OUT:-out}
mkdir -p "$out"
bin=.dev/gpu.test
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1 | tee "$out/gpu.txt"
for step in "$@"; do
  case $step in
    tests)
      timeout 300 $bin -test.v -test.count=1 -test.run 'Test[^B]' 2>&1 | tee "$out/tests.log" | grep -E '^(=== RUN|--- |FAIL|ok|PASS|panic)|chi-square|differs' | grep -v '=== RUN' | tail -60 ;;
    memcheck)
      WALKSTAGE_GPU_SMALL=1 timeout 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
        $bin -test.count=1 -test.run 'AliasTables|WalksMatchCPU|MixedJobs|TransitionsExact/(node2vec|metapath|deepwalk-weighted)' 2>&1 | tee "$out/memcheck.log" | tail -8 ;;
    faults)
      WALKSTAGE_GPU_SMALL=1 timeout 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
        $bin -test.count=1 -test.v -test.run 'NewFailure|AllocationFailure|CopyFailure|InjectedSticky|DoesNotFit|EmitError|CloseReleases' 2>&1 \
        | tee "$out/faults.log" | grep -E '^(--- |FAIL|ok|PASS)|a first Run makes|a Run makes|=========' ;;
    image)
      root=$(mktemp -d)
      mkdir -p "$root/usr/local/bin" "$root/usr/local/lib/walkstage"
      cp bin/walkstage-entrypoint "$root/usr/local/bin/walkstage"
      cp bin/walkstage-cuda "$root/usr/local/lib/walkstage/walkstage-cuda"
      # The CPU build is not run where the probe passes; carry it or not.
      cp bin/walkstage "$root/usr/local/lib/walkstage/walkstage-cpu" 2>/dev/null || echo "no bin/walkstage: a GPU-less run would fail"
      "$root/usr/local/lib/walkstage/walkstage-cuda" gpu-probe; echo "gpu-probe rc=$?"
      WALKSTAGE_LOG_FORMAT=text timeout 300 "$root/usr/local/bin/walkstage" demo --dir "$root/demo" --scale 12 >"$out/image-demo.log" 2>&1
      echo "demo through the entrypoint rc=$?"; grep -E 'CUDA build|GPU engine|engine (gpu|cpu)|done in' "$out/image-demo.log" ;;
    racecheck)
      WALKSTAGE_GPU_SMALL=1 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 3 \
        $bin -test.count=1 -test.run 'MixedJobs|TransitionsExact/(deepwalk-weighted-zprs|deepwalk-weighted-dprs|metapath-zprs)' 2>&1 | tee "$out/racecheck.log" | tail -8 ;;
    initcheck|synccheck)
      WALKSTAGE_GPU_SMALL=1 timeout 300 compute-sanitizer --tool "$step" --error-exitcode 3 \
        $bin -test.count=1 -test.run 'MixedJobs|TransitionsExact/(deepwalk-weighted-zprs|deepwalk-weighted-dprs|metapath)' 2>&1 | tee "$out/$step.log" | tail -8 ;;
    bench=*)
      WALKSTAGE_GPU_BENCH=${step#bench=} timeout 400 $bin -test.v -test.count=1 -test.run BenchRMAT 2>&1 | tee "$out/bench.log" | grep -vE '^=== RUN' | tail -30 ;;
    ncu=*)
      # ncu=KERNEL_REGEX:BENCH_ROW profiles one launch of the bench row.
      spec=${step#ncu=}
      WALKSTAGE_GPU_BENCH=22 WALKSTAGE_GPU_BENCH_ONLY=${spec#*:} timeout 300 ncu --kernel-name "regex:${spec%%:*}" \
        --launch-skip 1 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        --section SchedulerStats --section WarpStateStats $bin -test.run BenchRMAT 2>&1 | tee "$out/ncu.log" | grep -vE '^(=== RUN|    bench)' | tail -90 ;;
  esac
  echo "== $step rc=$?"
done
