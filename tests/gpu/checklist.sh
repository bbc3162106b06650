# The GPU checklist as one command on a lent GPU machine (no network there):
#
#   bash tests/gpu/checklist.sh [SECONDS]        # carry .device_wheels; SECONDS: the budget (default 540)
#
# Device time is scarce (15 minutes a session, the start included), so the
# steps run in order of value, each under a timeout cut to what is left of the
# budget, and a step that no longer fits is skipped with a line saying so. Every
# step's output goes to its own log in $OUT (which comes back), and a summary
# line per step (rc, seconds) goes to stdout and $OUT/summary.txt.
set -u
BUDGET=${1:-540}
START=$(date +%s)
OUT=${OUT:-/tmp/wd_gpu_out}; mkdir -p "$OUT"
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() {  # step NAME MAX_SECONDS COMMAND...
  local name=$1 max=$2; shift 2
  local t=$(left); [ "$t" -gt "$max" ] && t=$max
  if [ "$t" -lt 20 ]; then echo "SKIPPED $name (budget spent)" | tee -a "$OUT/summary.txt"; return; fi
  local t0=$(date +%s)
  timeout -k 5 "$t" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s (limit ${t}s): $(tail -1 "$OUT/$name.log")" | tee -a "$OUT/summary.txt"
}

. tests/gpu/device_setup.sh > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
tail -2 "$OUT/setup.log"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/summary.txt"

# 1. The gpu tier (8 processes share the GPU; the build cache is shared on disk).
step gpu_tests 200 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 150 -o addopts="" -rfE -n 8
# 2. The paper's third workload on both executors of this host (the README's GPU table).
step bench_pandemic 90 python3 -m benchmarks.envs --backends cpu,pycuda --only PandemicEconomy --out "$OUT"
# 3. compute-sanitizer over every built-in env's kernels (no --report-api-errors no: the
#    executor no longer probes the driver past a kernel's last parameter).
step memcheck 90 compute-sanitizer --error-exitcode 9 --tool memcheck python3 tests/gpu/sanitize_envs.py --backend pycuda
step racecheck 70 compute-sanitizer --error-exitcode 9 --tool racecheck python3 tests/gpu/sanitize_envs.py --backend pycuda --no-training
step synccheck 50 compute-sanitizer --error-exitcode 9 --tool synccheck python3 tests/gpu/sanitize_envs.py --backend pycuda --no-training
# 4. Training throughput (the update reads its metrics once per update since 024712c).
step bench_training 90 python3 -m benchmarks.training --backends pycuda --skip-solve --quick --out "$OUT"
echo "checklist done in $(( $(date +%s) - START )) s"
