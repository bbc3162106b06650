# The GPU checklist as one command on a lent GPU machine (no network there):
#
#   bash tests/gpu/checklist.sh [SECONDS [STEPS]]   # carry .device_wheels; SECONDS: the budget (default 540)
#
# STEPS, optional: an extended regular expression; only the steps whose names
# match it run (e.g. 'memcheck|initcheck', or '_cooperative$' for the four
# tools over the cooperative launch). Device time is scarce (15 minutes a
# session, the start included), so the steps run in order of value, each under
# a timeout cut to what is left of the budget, and a step that no longer fits
# is skipped with a row saying so.
#
# Output, all in $OUT (which comes back): one log per step (NAME.log), and ONE
# report, gpu_report.md: the device, the compute-sanitizer used, then a table
# row per step (step, tool, target, rc, seconds, limit, the tool's ERROR SUMMARY
# or RACECHECK SUMMARY line -- the last line of the log for other steps -- and
# what the workload says it ran), then a verdict. The rows go to stdout too.
# Exit status: 0 when every step that ran had rc 0, 1 otherwise.
#
# compute-sanitizer (memcheck, initcheck, racecheck, synccheck) runs over
# tests/gpu/sanitize_envs.py's three targets, one process per tool and target,
# so an error report names its target: a small TagContinuous step, a
# TagGridWorld step and one cooperative launch (a DummyEnv in 4 blocks per env;
# the workload fails if the launch was not cooperative).
#
# For the CPU-side test (tests/project/test_gpu_checklist.py) two variables
# replace the device parts: CHECKLIST_SETUP (a script to source instead of
# tests/gpu/device_setup.sh; "none" sources nothing) and CHECKLIST_BACKEND (the
# executor the workloads run on; default pycuda).
set -u
BUDGET=${1:-540}
ONLY=${2:-}
START=$(date +%s)
OUT=${OUT:-/tmp/wd_gpu_out}; mkdir -p "$OUT"
REPORT=$OUT/gpu_report.md
SETUP=${CHECKLIST_SETUP:-tests/gpu/device_setup.sh}
BACKEND=${CHECKLIST_BACKEND:-pycuda}
TOOLS="memcheck initcheck racecheck synccheck"
TARGETS="tag_continuous tag_gridworld cooperative"
FAILED=0; RAN=0; SKIPPED=0

left() { echo $(( BUDGET - ($(date +%s) - START) )); }
cell() { tr -d '\r' | tr '\n' ' ' | sed -e 's/|/\\|/g' -e 's/^=* *//' -e 's/ *$//' | cut -c1-240; }

# step NAME TOOL TARGET MAX_SECONDS COMMAND...: run COMMAND into $OUT/NAME.log under
# a timeout of at most MAX_SECONDS (less if the budget has less left), add a row.
step() {
  local name=$1 tool=$2 target=$3 max=$4; shift 4
  if [ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]]; then return; fi
  local t; t=$(left); [ "$t" -gt "$max" ] && t=$max
  if [ "$t" -lt 20 ]; then
    SKIPPED=$((SKIPPED + 1))
    echo "| $name | $tool | $target | - | - | - | SKIPPED: budget spent | |" | tee -a "$REPORT"
    return
  fi
  local t0; t0=$(date +%s)
  timeout -k 5 "$t" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local seconds=$(( $(date +%s) - t0 ))
  RAN=$((RAN + 1)); [ "$rc" -ne 0 ] && FAILED=$((FAILED + 1))
  local summary ran
  local last; last=$(grep -v '^[[:space:]]*$' "$OUT/$name.log" | tail -1 | cell)
  case $tool in
    memcheck|initcheck|racecheck|synccheck)  # the tool's own summary line
      summary=$(grep -E '^=+ (ERROR|RACECHECK) SUMMARY' "$OUT/$name.log" | tail -1 | cell)
      [ -n "$summary" ] || summary="no SUMMARY line (rc $rc): $last" ;;
    *) summary=$last ;;
  esac
  # what the workload says it ran (sanitize_envs.py's result line for its target)
  ran=$(grep -E '^target [a-z_]+: ' "$OUT/$name.log" | grep -v ': begin$' | tail -1 | sed 's/^target [a-z_]*: //' | cell)
  [ -z "$ran" ] && grep -q '^sanitizer driver: done' "$OUT/$name.log" && ran="sanitizer driver: done"
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && summary="TIMED OUT after ${t}s; $summary"
  echo "| $name | $tool | $target | $rc | $seconds | $t | $summary | $ran |" | tee -a "$REPORT"
}

{
  echo "# GPU checklist report"
  echo
  echo "- started: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget ${BUDGET} s${ONLY:+, steps matching /$ONLY/}"
  if commit=$(git rev-parse --short HEAD 2>/dev/null); then
    git diff --quiet HEAD 2>/dev/null || commit="$commit + uncommitted changes"
  else
    commit="unknown (no git here)"
  fi
  echo "- commit: $commit"
  echo "- executor: $BACKEND"
} > "$REPORT"
if [ "$SETUP" != none ]; then
  . "$SETUP" > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; echo "- setup FAILED: see setup.log" >> "$REPORT"; exit 1; }
  tail -3 "$OUT/setup.log"
fi
{
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  echo "- compute-sanitizer: $(command -v compute-sanitizer || echo 'not found') $(compute-sanitizer --version 2>/dev/null | grep -i '^version' | head -1)"
  echo "- python: $(python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)' 2>&1 | tail -1)"
  echo
  echo "rc: 0 clean; 9 the sanitizer reported errors; 124/137 timed out; anything else a crash (see the step's log)."
  echo
  echo "| step | tool | target | rc | seconds | limit | summary | ran |"
  echo "|---|---|---|---|---|---|---|---|"
} >> "$REPORT"
cat "$REPORT"

# 1. The gpu tier (8 processes share the GPU; the build cache is shared on disk).
step gpu_tests pytest "-m gpu" 200 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 150 -o addopts="" -rfE -n 8
# 2. compute-sanitizer: each tool over each target, one process each (memcheck
#    first: the most valuable). No --report-api-errors no: the executor no longer
#    probes the driver past a kernel's last parameter.
for tool in $TOOLS; do
  for target in $TARGETS; do
    step "${tool}_$target" "$tool" "$target" 60 compute-sanitizer --error-exitcode 9 --tool "$tool" \
      python3 tests/gpu/sanitize_envs.py --backend "$BACKEND" --target "$target"
  done
done
# 3. The paper's third workload on both executors of this host (the README's GPU table).
step bench_pandemic benchmark PandemicEconomy 90 python3 -m benchmarks.envs --backends "cpu,$BACKEND" --only PandemicEconomy --out "$OUT"
# 4. Training throughput (the update reads its metrics once per update since 024712c).
step bench_training benchmark training 90 python3 -m benchmarks.training --backends "$BACKEND" --skip-solve --quick --out "$OUT"
# 5. memcheck over every built-in env and two training iterations (the broad run of the README).
step memcheck_all memcheck "every env + training" 90 compute-sanitizer --error-exitcode 9 --tool memcheck \
  python3 tests/gpu/sanitize_envs.py --backend "$BACKEND"

{
  echo
  if [ "$FAILED" -eq 0 ]; then
    echo "Verdict: PASS -- $RAN step(s) ran, all rc 0; $SKIPPED skipped for the budget."
  else
    echo "Verdict: FAIL -- $FAILED of $RAN step(s) had rc != 0; $SKIPPED skipped for the budget. See the steps' logs."
  fi
  echo
  echo "checklist done in $(( $(date +%s) - START )) s"
} | tee -a "$REPORT"
[ "$FAILED" -eq 0 ]
