#!/bin/sh
# gaaw-train's options that test_train_cli.sh does not run, from the outside (it
# launches mpiexec itself), on 2 ranks (dp 2, ZeRO 1, host backend), 20 steps of a
# tiny GPT on the shipped corpus:
#  - --dtype bf16 and --dtype f16: exit 0, the loss falls by 1 as in f32, the first
#    step's loss (the f32 initial weights rounded once) within 2^-7 (bf16) and 2^-10
#    (f16) relative of f32's; the model state per DESIGN.md section 10 (2-byte
#    parameters and gradients, 12 bytes of f32 master, m and v per parameter sharded
#    over dp: optimizer_bytes x dp = 6 params_bytes; in f32 m and v only: 2
#    params_bytes); loss_scale 1 in bf16, 65536 (the initial scale) at f16's first
#    step and a power of two on every step; the f16 run twice gives identical metrics;
#  - --accum 2: the header and every step count 2 microbatches (512 tokens per step,
#    tokens_per_s x ms = 512 within the printed digits), the loss falls, the metrics
#    differ from --accum 1's;
#  - --offload-optimizer nvme --nvme-path DIR: the losses of the state on the device,
#    no optimizer bytes on the device, DIR empty afterwards; a missing DIR: exit 2;
#  - --optimizer sgd: the header says sgd, the loss falls, one f32 momentum per
#    parameter sharded over dp (optimizer_bytes x dp = params_bytes), the first step's
#    loss (before any update) equals AdamW's and later ones do not;
#  - exit status 1 for a failure while running (the model does not fit a 3 GB address
#    space: GAAW_ERR_NO_MEMORY), reported once, no step run;
#  - a diverging run (--lr 1e30 --clip 0) writes `null` for the non-finite loss,
#    grad_norm and val_loss, never nan or inf, marks those steps skipped, and every
#    line is JSON (checked with python3's json module when /usr/bin/python3 exists);
#  - data by global row: dp 2 x batch 4, 1 rank x batch 8 and 1 rank x batch 4 x
#    accum 2 (the same global batch of 8 rows) give the same training and validation
#    losses at every step within 1e-5 relative;
#  - --experts 4 --top-k 2 with every expert on each rank and with --ep 2: the same
#    losses within 1e-5 relative, moe_aux_loss in the metrics; --experts 3 --ep 2:
#    exit 2 naming --ep.
# GAAW_TRAIN overrides the program (default ./examples/gaaw-train in the build tree).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_train_options.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
tiny="--backend host --zero 1 --steps 20 --layers 1 --heads 2 --dim 32 --seq 32 --batch 4 --lr 0.005 --warmup 2
      --eval-every 10 --eval-batches 2 --sample 0 --seed 7"
# train NAME ARGS...: 2 ranks of gaaw-train with the tiny options and ARGS; metrics in
# $tmp/NAME.jsonl, stdout in $tmp/NAME.out, stderr in $tmp/NAME.err, status in $rc.
train() {
  name=$1
  shift
  timeout -k 5 120 $MPIEXEC -n 2 $prog $tiny "$@" --metrics "$tmp/$name.jsonl" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
}
# values KEY NAME: KEY of every metrics line of run NAME
values() { sed -n "s/.*\"$1\":\([-0-9.e+]*\|null\).*/\1/p" "$tmp/$2.jsonl"; }
# trained NAME: exit 0, 20 steps, the training loss fell by 1
trained() {
  test $rc -eq 0 || { err "$1: exit $rc"; cat "$tmp/$1.err"; return 1; }
  n=`grep -c '^{"step":' "$tmp/$1.jsonl"`
  test "$n" -eq 20 || err "$1: $n steps in the metrics, expected 20"
  first=`values loss $1 | head -1`
  last5=`values loss $1 | tail -5 | awk '{ s += $1 } END { print s / NR }'`
  awk -v a="$first" -v b="$last5" 'BEGIN { exit !(b < a - 1.0) }' ||
    err "$1: the training loss did not fall by 1: first $first, mean of the last 5 $last5"
}
# first KEY NAME: KEY at the first step of run NAME
first() { values $1 $2 | head -1; }
# state NAME RATIO: optimizer_bytes x dp (2) = RATIO x params_bytes, grads_bytes = params_bytes (ZeRO 1)
state() {
  sed -n 's/.*"params_bytes":\([0-9]*\),"grads_bytes":\([0-9]*\),"optimizer_bytes":\([0-9]*\).*/\1 \2 \3/p' \
    "$tmp/$1.jsonl" | awk -v r=$2 '!($3 * 2 == r * $1 && $2 == $1) { bad = 1; print "  " $0 } END { exit bad }' ||
    err "$1: params, grads, optimizer bytes above are not 2-byte/4-byte state with optimizer x dp = $2 x params"
}
# strip NAME: the metrics of run NAME without the timings
strip() { sed 's/,"ms":[0-9.]*,"tokens_per_s":[0-9.]*,"tflops":[-0-9.e+]*\(,"mfu":[-0-9.e+]*\)\{0,1\}//' "$tmp/$1.jsonl"; }

train f32
trained f32
state f32 2
f32_params=`first params_bytes f32`

# --dtype bf16 and f16
for dt in bf16 f16; do
  train $dt --dtype $dt
  trained $dt || continue
  grep "^model: GPT .*, $dt, " "$tmp/$dt.out" >/dev/null || err "$dt: the header does not name $dt"
  state $dt 6
  p=`first params_bytes $dt`
  test "$p" -eq $((f32_params / 2)) || err "$dt: params_bytes $p, expected half of f32's $f32_params"
  rel=`test $dt = bf16 && echo 0.0078125 || echo 0.0009765625`
  awk -v a="`first loss $dt`" -v b="`first loss f32`" -v r=$rel 'BEGIN { d = a - b; exit !(d <= r * b && -d <= r * b) }' ||
    err "$dt: the first step's loss `first loss $dt` is not within $rel relative of f32's `first loss f32`"
done
values loss_scale bf16 | grep -v '^1$' >/dev/null && err "bf16: a loss_scale other than 1: `values loss_scale bf16 | sort -u`"
test "`first loss_scale f16`" = 65536 || err "f16: the first step's loss_scale is `first loss_scale f16`, expected 65536"
values loss_scale f16 | awk '{ x = $1; while (x > 1 && x % 2 == 0) x /= 2; if (x != 1) { print "  " $1; bad = 1 } }
                             END { exit bad }' || err "f16: a loss_scale above is not a power of two"
cp "$tmp/f16.jsonl" "$tmp/f16-first.jsonl"
train f16-again --dtype f16
strip f16-first >"$tmp/a"
strip f16-again >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || { err "the same f16 run twice gave different metrics:"; diff "$tmp/a" "$tmp/b" | head -4; }

# --accum 2
train accum --accum 2
if trained accum; then
  grep '^steps 20 x (2 microbatches x 4 sequences x dp 2) = 512 tokens per step' "$tmp/accum.out" >/dev/null ||
    err "--accum 2: the header does not count 2 microbatches, 512 tokens per step: `grep '^steps' "$tmp/accum.out"`"
  for run in f32:256 accum:512; do
    sed -n 's/.*"ms":\([0-9.]*\),"tokens_per_s":\([0-9.]*\).*/\1 \2/p' "$tmp/${run%:*}.jsonl" |
      awk -v want=${run#*:} '{ t = $1 * $2 / 1000; r = 0.0005 / $1 + 0.05 / $2 + 1e-6 # the printed digits
                               if (t < (1 - r) * want || t > (1 + r) * want) { print "  " t; bad = 1 } }
                             END { exit bad }' || err "${run%:*}: tokens_per_s x ms above is not ${run#*:} tokens per step"
  done
  strip f32 >"$tmp/a"
  strip accum >"$tmp/b"
  cmp -s "$tmp/a" "$tmp/b" && err "--accum 2 gave the metrics of --accum 1"
fi

# --offload-optimizer nvme: the same losses as the state on the device, bit for bit,
# no optimizer state on the device, nothing left in --nvme-path; a --nvme-path that
# is not a directory stops before training with exit 2
mkdir "$tmp/nvme"
train nvme --offload-optimizer nvme --nvme-path "$tmp/nvme"
if trained nvme; then
  test "`values loss nvme`" = "`values loss f32`" || err "nvme: the losses differ from the state on the device's"
  test "`first optimizer_bytes nvme`" = 0 || err "nvme: `first optimizer_bytes nvme` bytes of optimizer state on the device"
  test -z "`ls -A "$tmp/nvme"`" || err "nvme: files left in --nvme-path: `ls -A "$tmp/nvme"`"
fi
train nvme-missing --offload-optimizer nvme --nvme-path "$tmp/not-there"
test $rc -eq 2 && grep -q -- "--nvme-path $tmp/not-there: not a directory" "$tmp/nvme-missing.err" ||
  err "--nvme-path missing: exit $rc, `cat "$tmp/nvme-missing.err"`"

# --optimizer sgd
train sgd --optimizer sgd --lr 0.5
if trained sgd; then
  grep '^gaaw-train: world 2 = dp 2 x tp 1, backend host, ZeRO 1, sgd$' "$tmp/sgd.out" >/dev/null ||
    err "sgd: the header does not say sgd: `grep '^gaaw-train' "$tmp/sgd.out"`"
  state sgd 1
  test "`first loss sgd`" = "`first loss f32`" || err "sgd: the first loss `first loss sgd` is not AdamW's `first loss f32`"
  test "`values loss sgd | sed -n 5p`" != "`values loss f32 | sed -n 5p`" || err "sgd: step 5 has AdamW's loss"
fi

# exit status 1: a failure while running (a model that fits the node's physical
# memory, so that gaaw-train's own estimate lets it through, but not a 2 GB address
# space per rank: its parameters, gradients and their initial values, 0.8 GB each,
# already do not, whatever the MPI's own address space; at 3 GB Open MPI, which
# reserves less than MPICH, got through to initialising 200 M parameters, too slow
# for the time limit on a loaded machine)
(ulimit -v 2000000; timeout -k 5 120 $MPIEXEC -n 2 $prog --backend host --layers 1 --heads 2 --dim 4096 --seq 16 \
  --batch 2 --steps 2 --sample 0 >"$tmp/oom.out" 2>"$tmp/oom.err")
rc=$?
test $rc -eq 1 || { err "a model too large for memory: exit $rc, expected 1"; cat "$tmp/oom.err"; }
n=`grep -c 'failed: GAAW_ERR_NO_MEMORY' "$tmp/oom.err"`
test "$n" -eq 1 || err "a model too large for memory: 'failed: GAAW_ERR_NO_MEMORY' appears $n times on stderr, expected once"
grep '^step ' "$tmp/oom.out" >/dev/null && err "a model too large for memory: training started"

# null for what is not finite
train diverge --lr 1e30 --clip 0 --steps 4 --eval-every 2
test $rc -eq 0 || { err "a diverging run: exit $rc"; cat "$tmp/diverge.err"; }
grep -i 'nan\|inf' "$tmp/diverge.jsonl" >/dev/null && err "a diverging run wrote nan or inf: `grep -i 'nan\|inf' "$tmp/diverge.jsonl" | head -2`"
for key in loss grad_norm val_loss; do
  grep "\"$key\":null" "$tmp/diverge.jsonl" >/dev/null || err "a diverging run: no \"$key\":null in the metrics"
done
grep '"grad_norm":null' "$tmp/diverge.jsonl" | grep -v '"skipped":1' >/dev/null &&
  err "a diverging run: a step with a non-finite gradient norm was not skipped"
if test -x /usr/bin/python3; then
  /usr/bin/python3 -c '
import json, sys
def refuse(name):
    raise ValueError("non-JSON constant " + name)
for n, line in enumerate(open(sys.argv[1]), 1):
    json.loads(line, parse_constant=refuse)
' "$tmp/diverge.jsonl" || err "a diverging run: the metrics file is not JSON, line by line"
fi

# data by global row: three layouts of one global batch of 8 rows, 5 steps
layout() {
  name=$1
  np=$2
  shift 2
  timeout -k 5 120 $MPIEXEC -n $np $prog $tiny --steps 5 --eval-every 2 "$@" --metrics "$tmp/$name.jsonl" \
    >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  test $rc -eq 0 || { err "$name: exit $rc"; cat "$tmp/$name.err"; }
}
layout dp2 2 --batch 4
layout rank1 1 --batch 8
layout accum2 1 --batch 4 --accum 2
# losses NAME: "step loss val_loss" per step (- where there is no val_loss)
losses() {
  sed 's/^{"step":\([0-9]*\),"loss":\([^,]*\),\("val_loss":\([^,]*\),\)\{0,1\}.*/\1 \2 \4/' "$tmp/$1.jsonl" |
    awk '{ print $1, $2, (NF > 2 ? $3 : "-") }'
}
# same_losses REF RUN WHAT: RUN's losses and val_losses are REF's within 1e-5 relative
same_losses() {
  losses $1 >"$tmp/$1.loss"
  losses $2 | paste -d ' ' "$tmp/$1.loss" - | awk -v run=$2 -v ref=$1 '
    function far(a, b) { d = a - b; if (d < 0) d = -d; return d > 1e-5 * (b < 0 ? -b : b) }
    NF != 6 || $1 != $4 || $3 == "-" && $6 != "-" || $3 != "-" && $6 == "-" { print "  step lines differ: " $0; bad = 1; next }
    far($5, $2) { print "  step " $1 ": loss " $5 " (" run ") vs " $2 " (" ref ")"; bad = 1 }
    $3 != "-" && far($6, $3) { print "  step " $1 ": val_loss " $6 " (" run ") vs " $3 " (" ref ")"; bad = 1 }
    END { if (NR != 5) { print "  " NR " steps, expected 5"; bad = 1 }; exit bad }' ||
    err "$3: $2's losses above are not $1's within 1e-5 relative"
}
for run in rank1 accum2; do
  same_losses dp2 $run "data by global row"
done

# mixture of experts: 4 experts, top-2, every expert on each rank and split over
# ep 2 give the same losses; the metrics carry the aux loss; an --ep that does not
# divide --experts is a usage error (exit 2)
layout moe 2 --batch 4 --experts 4 --top-k 2
layout moe_ep2 2 --batch 4 --experts 4 --top-k 2 --ep 2
same_losses moe moe_ep2 "experts split over ep 2"
grep '"moe_aux_loss":[0-9]' "$tmp/moe_ep2.jsonl" >/dev/null || err "moe_ep2: no moe_aux_loss in the metrics"
timeout -k 5 60 $MPIEXEC -n 2 $prog $tiny --experts 3 --top-k 2 --ep 2 >"$tmp/ep3.out" 2>&1
rc=$?
test $rc -eq 2 && grep -e '--ep 2 splits the experts' "$tmp/ep3.out" >/dev/null ||
  { err "--experts 3 --ep 2: exit $rc, expected 2 naming --ep"; cat "$tmp/ep3.out"; }
exit $fail
