# Sourced by the lease scripts: the device's CUDA libraries, the carried binary, a log folder
# ($W, archived into $OUT by the script's last line, or after every step with ARCHIVE set:
# see `keep`), `gpu_tests`, `probe_latency`, `traced NAME [ARGS]`, `rung NAME TUNE [TIMEOUT]`
# (one ablated build's persistent step, unchecked), `ab NAME [ARGS]` (one A/B round against
# the previous kernels: tools/leases/prev.sh) and `b NAME [ARGS]`, one interleaved
# `mkc bench MODEL --targets $TARGETS --trials 2 ARGS` (TARGETS: persistent unless set) whose
# log is $W/NAME.log and whose summary lines are printed. No bench starts after $LIMIT s
# (480 unless set), so that the archive comes back within the call; each bench within $BT s
# (80 unless set).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc; T=models/llama1b_tuned.ron; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name --format=csv,noheader | tee $W/gpu.txt
b() {
    local n=$1; shift
    [ $SECONDS -gt ${LIMIT:-480} ] && { echo "$n skipped (time)"; return; }
    timeout ${BT:-80} $M bench $T --targets ${TARGETS:-persistent} --trials 2 "$@" > $W/$n.log 2>&1; echo "$n rc=$? t=$SECONDS"
    grep -E "floor|^  persistent|^  pdl|FAIL|rror|stall" $W/$n.log | sed 's/.*read bandwidth/bw/'
    keep
}
# The persistent step of the build `TUNE` selects (an ablated one: unchecked), two trials within
# TIMEOUT s (80 unless given), its log $W/NAME.log and its summary line printed.
rung() {
    [ $SECONDS -gt ${LIMIT:-480} ] && { echo "$1 skipped (time)"; return; }
    timeout ${3:-80} $M bench $T --targets persistent --trials 2 --no-check --tune $2 > $W/$1.log 2>&1; echo "$1 rc=$? t=$SECONDS"
    grep -E "^  persistent" $W/$1.log | head -1; keep
}
# `mkc probe latency`, its log $W/probe_latency.log and its profile terms printed.
probe_latency() {
    [ $SECONDS -gt ${LIMIT:-480} ] && { echo "probe latency skipped (time)"; return; }
    timeout 60 $M probe latency > $W/probe_latency.log 2>&1; echo "probe latency rc=$? t=$SECONDS"
    tail -8 $W/probe_latency.log; keep
}
# One traced persistent step (`--timeline $W/NAME.json`, one trial, ARGS added), its log
# $W/NAME.log, its summary line and per-SM table printed.
traced() {
    local n=$1; shift
    [ $SECONDS -gt ${LIMIT:-480} ] && { echo "$n skipped (time)"; return; }
    timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/$n.json "$@" > $W/$n.log 2>&1; echo "$n traced rc=$? t=$SECONDS"
    grep -E "^  persistent" $W/$n.log | head -1; grep -A12 'us per SM' $W/$n.log | head -14; keep
}
# The GPU tests (.device/gpu_test, README), their log $W/gpu_test.log and its summary printed.
gpu_tests() {
    timeout ${GT:-240} .device/gpu_test --test-threads 1 > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"
    grep -E "test result|FAILED|panicked" $W/gpu_test.log | head -5
    keep
}
# With ARCHIVE set, the logs so far into $OUT/$ARCHIVE (a call cut short still brings them back).
keep() { [ -n "$ARCHIVE" ] && tar czf "$OUT/$ARCHIVE" -C $W .; }
# One round of an A/B in one process each: `b NAME ARGS`, then `b NAMEprev ARGS` on the
# previous kernels (--tune $PREV: .device/prev.ron unless set, as tools/leases/prev.sh writes).
ab() {
    local n=$1; shift
    b "$n" "$@"
    b "${n}prev" "$@" --tune "${PREV:-.device/prev.ron}"
}
