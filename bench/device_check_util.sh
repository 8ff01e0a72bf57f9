# Shared by bench/cuda_device_check.sh and the device kit's run.sh (sourced, not run):
# items run under a time budget, and their statuses. The sourcing script defines
# result ITEM STATUS DETAIL... and sets budget (seconds, counted on its SECONDS) and
# out (the folder of the logs).

# Runs an item under a time limit that fits the budget; its output goes to $out/LOG.
# Usage: run_item ITEM NEED_S LIMIT_S LOG command...   (sets $rc: 124 timed out, 200
# skipped for the budget; and $elapsed)
run_item() {
  local item=$1 need=$2 limit=$3 log=$4
  shift 4
  local left=$((budget - SECONDS))
  if [ "$left" -lt "$need" ]; then
    result "$item" SKIP "not enough of the time budget left (${left} s, needs ${need} s)"
    rc=200
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout --signal=KILL "$limit" "$@" > "$out/$log" 2>&1
  rc=$?
  [ "$rc" -eq 137 ] && rc=124
  elapsed=$((SECONDS - t0))
}

# Status word of a test's exit code.
status_of() {
  case "$1" in 0) echo PASS ;; 77) echo SKIP ;; 124) echo TIMEOUT ;; *) echo FAIL ;; esac
}

# A test program's last summary line ("...: N checks passed", or why it skipped).
summary_of() {
  grep -E 'checks (passed|failed)|skipp|not run' "$out/$1" | tail -n 1
}
