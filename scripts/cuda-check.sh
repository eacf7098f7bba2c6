#!/usr/bin/env bash
# cuda-check.sh: run on a GPU machine from the repository root, with the
# test binary built here by `make -f Makefile.cuda test-cuda-bin` (.dev/).
#   scripts/cuda-check.sh [tests] [memcheck] [racecheck] [bench=SCALE]
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
