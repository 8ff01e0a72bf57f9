# What the benchmark driver scripts share (sourced by bench/*.sh).

# measure TAG COMMAND...: runs the command and prints its result line (the line that
# starts with "TAG "); a launch that yields none (a crash) is retried once, loudly.
measure() {
  local tag=$1 out
  shift
  for attempt in 1 2; do
    if out=$("$@" | grep "^$tag "); then
      echo "$out"
      return 0
    fi
    echo "$(basename "$0"): '$*' gave no $tag line (attempt $attempt)" >&2
  done
  return 1
}
# field KEY LINE: the value of " KEY=value" in a result line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
# median NUMBER...: the median of the arguments
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

# with_wait WAIT CMD...: runs CMD with OMP_WAIT_POLICY unset (WAIT = default) or set to
# WAIT, killed after RUN_TIMEOUT seconds (a PyTorch DDP process was once seen waiting
# forever for a peer that had gone; measure then retries)
with_wait() {
  local wait=$1
  shift
  if [ "$wait" = default ]; then
    timeout "${RUN_TIMEOUT:-300}" env -u OMP_WAIT_POLICY "$@"
  else
    OMP_WAIT_POLICY=$wait timeout "${RUN_TIMEOUT:-300}" "$@"
  fi
}
