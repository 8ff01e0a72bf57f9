#!/bin/sh
# The in-situ surrogate kept and reloaded: examples/insitu/heat_surrogate trains on 2
# ranks and saves (--save-dir, --save-every 20), and heat_predict (C) and
# heat_predict_f (Fortran, when built) load the checkpoint with gaaw_model_load on 1
# and on 2 ranks and predict from the timestep it came from:
#  - the saves: checkpoints at timesteps 20, 40 and 50 (the last, always), the
#    newest named by `latest`, its timestep and time saved as entries and in the
#    file `timestep`; the predictor prints "saved at timestep 50 (t = 10.000000)";
#  - in the layout of the training (tp 2 from the C trainer, dp 2 from the Fortran
#    one) the first predictions are the trainer's own after its training, bit for
#    bit, and so are the error figures it prints; in another layout (1 rank; dp 2
#    from a tp 2 training and back) they are within 1e-5 of the largest prediction;
#  - the C and Fortran predictors give the same predictions to the bit;
#  - a directory with no checkpoint: one message, and every rank exits non-zero.
# Each run is under a timeout, so a hang fails. Skips (77) only without mpiexec.
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
dir=./examples/insitu
work=`mktemp -d "${TMPDIR:-/tmp}/heat-predict.XXXXXX"` || exit 1
trap 'rm -rf "$work"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }

# run NAME NP PROGRAM ARGS...: runs PROGRAM on NP ranks, output in $work/NAME.out;
# false (and a FAIL) when it does not exit 0
run() {
  name=$1 np=$2
  shift 2
  timeout -k 5 120 $MPIEXEC -n $np "$@" >"$work/$name.out" 2>&1
  rc=$?
  cat "$work/$name.out"
  test $rc -eq 0 || { err "$name: $* on $np ranks exited with $rc"; return 1; }
}

# figures NAME: the lines of the surrogate's errors that trainer and predictor both
# print, blanks squeezed (Fortran pads its numbers)
figures() { sed -n 's/  */ /g; /^after /p; /^surrogate error/p' "$work/$1.out"; }

# compare A B TOL: predictions files A and B (one number a line) agree to TOL times
# the largest |B| (TOL 0: the same numbers, though printed by C or by Fortran)
compare() {
  paste "$work/$1" "$work/$2" | awk -v tol=$3 -v what="$1 and $2" '
    { a[NR] = $1 + 0; b[NR] = $2 + 0; v = b[NR] < 0 ? -b[NR] : b[NR]; if (v > m) m = v
      if (NF != 2) bad = 1 }
    END {
      if (NR != 4096 || bad) { printf "FAIL: %s: %d lines, not 4096 pairs\n", what, NR; exit 1 }
      for (i = 1; i <= NR; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > worst) { worst = d; at = i } }
      if (worst == 0) printf "%s: the same %d numbers\n", what, NR
      else printf "%s: largest difference %.3g (point %d) of largest |prediction| %.3g\n", what, worst, at - 1, m
      exit !(worst <= tol * m) }' || err "$1 and $2 differ by more than $3 of the largest prediction"
}

# 1. the C trainer with tp 2, saving every 20 timesteps
ck=$work/ck
run train 2 $dir/heat_surrogate --tp 2 --save-dir "$ck" --save-every 20 --predictions "$work/train.pred" ||
  exit 1
for step in 00000040 00000080 00000100; do
  test -f "$ck/step-$step/meta.json" || err "no checkpoint $ck/step-$step (timesteps 20, 40, 50: every 20 and the last)"
done
test "`cat "$ck/latest"`" = step-00000100 || err "latest is '`cat "$ck/latest"`', not step-00000100"
test "`cat "$ck/timestep"`" = "50 10.000000" || err "$ck/timestep is '`cat "$ck/timestep"`', not '50 10.000000'"
grep '"timestep": *"50"' "$ck/step-00000100/meta.json" >/dev/null &&
  grep '"time": *"10.000000"' "$ck/step-00000100/meta.json" >/dev/null ||
  err "the newest checkpoint's entries are not timestep 50, time 10.000000"

# 2. predictions from it: C and Fortran, on the training's layout and on others
for prog in heat_predict heat_predict_f; do
  test -x $dir/$prog || { echo "no $prog: not run"; continue; }
  run $prog-tp2 2 $dir/$prog --tp 2 "$ck" --predictions "$work/$prog-tp2.pred" || continue
  grep 'saved at timestep 50 (t = 10.000000)' "$work/$prog-tp2.out" >/dev/null ||
    err "$prog does not say it predicts from timestep 50"
  cmp "$work/$prog-tp2.pred" "$work/train.pred" >/dev/null 2>&1 || compare $prog-tp2.pred train.pred 0
  run $prog-np1 1 $dir/$prog "$ck" --predictions "$work/$prog-np1.pred" &&
    compare $prog-np1.pred train.pred 1e-5
  run $prog-dp2 2 $dir/$prog "$ck" --predictions "$work/$prog-dp2.pred" &&
    compare $prog-dp2.pred train.pred 1e-5
done
test "`figures heat_predict-tp2`" = "`figures train`" || err "heat_predict with tp 2 prints other errors than the trainer"
if test -x $dir/heat_predict_f; then
  for layout in tp2 np1 dp2; do
    test -f "$work/heat_predict_f-$layout.pred" && compare heat_predict_f-$layout.pred heat_predict-$layout.pred 0
  done
fi

# 3. the Fortran trainer with dp 2 (the last save only): the Fortran predictor on its
# layout (its predictions and figures), the C one on 1 rank and with tp 2
if test -x $dir/heat_surrogate_f && test -x $dir/heat_predict_f; then
  ckf=$work/ck_f
  if run train_f 2 $dir/heat_surrogate_f --save-dir "$ckf" --predictions "$work/train_f.pred"; then
    test "`ls -d "$ckf"/step-* | wc -l`" -eq 1 || err "without --save-every, $ckf has other checkpoints than the last"
    if run predict_f-dp2 2 $dir/heat_predict_f "$ckf" --predictions "$work/predict_f-dp2.pred"; then
      cmp "$work/predict_f-dp2.pred" "$work/train_f.pred" || err "heat_predict_f with dp 2 predicts otherwise than its trainer"
      test "`figures predict_f-dp2`" = "`figures train_f`" || err "heat_predict_f with dp 2 prints other errors than its trainer"
    fi
    run predict-np1-f 1 $dir/heat_predict "$ckf" --predictions "$work/predict-np1-f.pred" &&
      compare predict-np1-f.pred train_f.pred 1e-5
    run predict-tp2-f 2 $dir/heat_predict --tp 2 "$ckf" --predictions "$work/predict-tp2-f.pred" &&
      compare predict-tp2-f.pred train_f.pred 1e-5
  fi
fi

# 4. no checkpoint: one message, and each of the 2 ranks exits non-zero
mkdir "$work/empty" || exit 1
for prog in heat_predict heat_predict_f; do
  test -x $dir/$prog || continue
  timeout -k 5 60 $MPIEXEC -n 2 sh -c "$dir/$prog \"$work/empty\"; echo \"exit status \$?\"" >"$work/empty.out" 2>&1
  rc=$?
  cat "$work/empty.out"
  test $rc -ne 124 && test $rc -ne 137 || err "$prog on a directory with no checkpoint hangs"
  test "`grep -c 'no checkpoint in' "$work/empty.out"`" -eq 1 ||
    err "$prog on a directory with no checkpoint does not say so once"
  test "`grep -c '^exit status [1-9]' "$work/empty.out"`" -eq 2 ||
    err "$prog on a directory with no checkpoint: not every rank exits non-zero"
done
exit $fail
