#!/bin/sh
# gaaw-train from the outside (it launches mpiexec itself):
#  - --help exits 0 and lists every option (read independently from
#    examples/train/options.h and backends/runtime/tunables.h) with its default;
#  - bad options, a missing or empty data file, a bad config file and layouts that
#    do not fit the world (tp 3 on 4 ranks, heads not divisible by tp) exit 2 with one
#    message before any training, on every rank, without hanging;
#  - before the data file is read (a missing --data would be reported otherwise),
#    with a message naming the option: bad library options (backend, threads, log,
#    device, comm_timeout, rank_order; from the command line, GAAW_* or the config
#    file), inf and nan for any real option, a config file that is a directory,
#    cannot be opened or holds a NUL byte, an integer beyond int, and a model or
#    batch too big for the node's memory (the estimate in the message, a pipeline
#    stage's share with --pp); the prompt
#    is not checked with --sample 0; a device gaaw_init cannot find exits 2 too;
#  - precedence: default < config file < environment < command line;
#  - layouts with cp: cp 3 on 4 ranks, a --seq that 2 x cp does not divide (exit 2);
#    cp 2 x tp 2 gives tp 2's losses;
#  - 20 steps of a tiny GPT on the shipped corpus (np 2 and np 4, tp 2, ZeRO 1):
#    on the host backend: exit 0, the training and validation losses fall, one JSON object per step, a
#    sample and a summary; the metrics hold the memory by category and the dp
#    traffic (2 Psi per step); the np 4 run twice gives identical metrics (all but
#    the timings ms, tokens_per_s and tflops).
# GAAW_TRAIN overrides the program (default ./examples/gaaw-train in the build tree).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
src=${GAAW_TOP_SRCDIR:-.}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_train_cli.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
# run NP ARGS...: runs gaaw-train under a time limit; stdout in $tmp/out, stderr in
# $tmp/err, status in $rc.
run() {
  np=$1
  shift
  timeout -k 5 120 $MPIEXEC -n $np $prog "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
# expect_usage WHAT PATTERN NP ARGS...: exit 2, PATTERN once on stderr, no training.
expect_usage() {
  what=$1 pattern=$2
  shift 2
  run "$@"
  test $rc -eq 2 || { err "$what: exit $rc, expected 2"; cat "$tmp/err"; }
  n=`grep -c -- "$pattern" "$tmp/err"`
  test "$n" -eq 1 || err "$what: '$pattern' appears $n times on stderr, expected once: `cat $tmp/err`"
  grep '^step ' "$tmp/out" >/dev/null && err "$what: training started"
}

# --help
run 1 --help
test $rc -eq 0 || err "--help exited with $rc"
names=`sed -n 's/^ *X(\([a-z_0-9]*\), *\(INT\|DOUBLE\|STRING\),.*/\1/p' "$src/examples/train/options.h"`
tunables=`sed -n 's/^ *X(\([a-z_0-9]*\), *\(INT\|DOUBLE\|STRING\|BOOL\),.*/\1/p' "$src/backends/runtime/tunables.h"`
test -n "$names" || err "no options read from $src/examples/train/options.h"
for name in $names $tunables data tp zero dtype layers heads dim seq vocab batch accum steps lr warmup clip seed \
            backend metrics eval_every config; do
  flag=--`echo $name | tr _ -`
  grep -- "^  $flag .*\[.*\]" "$tmp/out" >/dev/null || err "--help does not list $flag with its default"
done

# bad options and arguments
expect_usage "unknown option" "unknown option '--no-such-option'" 1 --no-such-option 3
expect_usage "non-numeric --steps" "--steps needs an integer, got 'many'" 1 --steps many
expect_usage "--zero 7" "--zero must be 0, 1, 2 or 3, got 7" 1 --zero 7
expect_usage "--dtype f64" "--dtype must be f32, bf16 or f16, got 'f64'" 1 --dtype f64
expect_usage "--batch 0" "--batch must be >= 1, got 0" 2 --batch 0
expect_usage "missing value" "option --steps needs a value" 1 --steps
expect_usage "positional argument" "unexpected argument 'extra'" 1 extra
expect_usage "bad library option" "tp" 1 --tp two

# data that cannot be trained on, on 2 ranks
: >"$tmp/empty.txt"
printf 'too short for one sequence\n' >"$tmp/short.txt"
expect_usage "empty data file" "$tmp/empty.txt (byte offset 0): the file is empty" 2 --data "$tmp/empty.txt"
expect_usage "missing data file" "cannot open $tmp/missing.txt" 2 --data "$tmp/missing.txt"
expect_usage "short data file" "holds 27 tokens: too few for seq 64" 2 --data "$tmp/short.txt" --seq 64
expect_usage "--data-path of odd words" "--data-path takes one path, or weights and paths in pairs" 2 \
  --data-path "0.5 $tmp/short.txt 0.5"
expect_usage "--data-path weight" "'-1' is not a weight > 0" 2 --data-path "-1 $tmp/short.txt 2 $tmp/short.txt"
# a byte >= vocab is found when a window holding it is read: that step fails on
# every rank (exit 1), the message once, and the step's loss is never printed
printf 'caf\303\251 with a byte above 127, long enough for eight bytes of context\n' >"$tmp/utf8.txt"
run 2 --data "$tmp/utf8.txt" --vocab 128 --seq 4 --steps 100 --layers 1 --dim 16 --heads 2 --sample 0
test $rc -eq 1 || { err "byte >= vocab: exit $rc, expected 1"; cat "$tmp/err"; }
n=`grep -c "utf8.txt: token 195 at byte offset 3 is outside the vocabulary of 128" "$tmp/err"`
test "$n" -eq 1 || err "byte >= vocab: the message appears $n times on stderr: `cat $tmp/err`"
grep '^step *100/' "$tmp/out" >/dev/null && err "byte >= vocab: training went on to the end"

# layouts that do not fit the world, on 4 ranks: one message, no hang
expect_usage "tp 3 on 4 ranks" "--tp 3 does not divide the world size 4" 4 --tp 3
expect_usage "heads % tp" "--heads (3) must be divisible by --tp (2)" 4 --tp 2 --heads 3 --dim 96
expect_usage "cp 3 on 4 ranks" "--cp 3 x --tp 1 does not divide the world size 4" 4 --cp 3
expect_usage "seq % (2 cp)" "--seq 30 must divide by 2 x --cp = 4" 4 --cp 2 --seq 30
expect_usage "a2a heads" "--heads 2 / --tp 2 = 1 do not divide by --cp 2" 4 --cp 2 --tp 2 --heads 2 --cp-kind a2a --sample 0

# precedence: default < config file < environment < command line. A missing data
# file stops a run right after its options were accepted.
missing="--data $tmp/missing.txt"
printf '# a comment\n\n  zero = 9\n' >"$tmp/bad.cfg"
expect_usage "config file value" "--zero must be 0, 1, 2 or 3, got 9" 1 --config "$tmp/bad.cfg" $missing
GAAW_CONFIG="$tmp/bad.cfg" expect_usage "GAAW_CONFIG" "--zero must be 0, 1, 2 or 3, got 9" 1 $missing
GAAW_ZERO=1 expect_usage "environment over config file" "cannot open $tmp/missing.txt" 1 --config "$tmp/bad.cfg" $missing
GAAW_ZERO=9 expect_usage "environment" "--zero must be 0, 1, 2 or 3, got 9" 1 $missing
GAAW_ZERO=9 expect_usage "command line over environment" "cannot open $tmp/missing.txt" 1 --zero 2 $missing
printf 'tp = 3\n' >"$tmp/tp.cfg"
expect_usage "library option in config file" "--tp 3 does not divide the world size 4" 4 --config "$tmp/tp.cfg" $missing
GAAW_TP=2 expect_usage "GAAW_TP over config file" "cannot open $tmp/missing.txt" 4 --config "$tmp/tp.cfg" $missing
expect_usage "--tp over config file" "cannot open $tmp/missing.txt" 4 --config "$tmp/tp.cfg" --tp 4 $missing
printf 'steps = 3\nno_such_key = 1\n' >"$tmp/unknown.cfg"
expect_usage "unknown config key" "$tmp/unknown.cfg:2: unknown option 'no_such_key'" 1 --config "$tmp/unknown.cfg"
expect_usage "missing config file" "cannot read the config file '$tmp/none.cfg'" 1 --config "$tmp/none.cfg"

# library options, checked with the trainer's before the data file is read
expect_usage "--backend bogus" "option backend must be auto, host, opencl or cuda (built: .*), got 'bogus'" \
  2 --backend bogus $missing
expect_usage "--threads -3" "option threads must be in 0..4096, got -3\$" 2 --threads -3 $missing
GAAW_THREADS=-3 expect_usage "GAAW_THREADS=-3" "option threads must be in 0..4096, got -3 (from GAAW_THREADS)" \
  2 $missing
printf 'threads = 5000\n' >"$tmp/threads.cfg"
expect_usage "threads in the config file" "option threads must be in 0..4096, got 5000" 1 --config "$tmp/threads.cfg" \
  $missing
expect_usage "--log chatty" "option log must be none, error, warn, info, debug or trace, got 'chatty'" \
  1 --log chatty $missing
expect_usage "--device -2" "option device must be in -1..2147483647, got -2" 1 --device -2 $missing
expect_usage "--comm-timeout -1" "option comm_timeout must be >= 0, got -1" 1 --comm-timeout -1 $missing
expect_usage "--rank-order tp-tp-pp" "option rank_order must name tp, cp, dp and pp once each" \
  1 --rank-order tp-tp-pp $missing
# on one rank only (MPMD): every rank exits 2, the message once, naming the rank
timeout -k 5 120 $MPIEXEC -n 1 $prog $missing : -n 1 $prog --threads -3 $missing >"$tmp/out" 2>"$tmp/err"
rc=$?
test $rc -eq 2 || { err "--threads -3 on rank 1 only: exit $rc, expected 2"; cat "$tmp/err"; }
n=`grep -c "rank 1: .*option threads must be in 0..4096, got -3" "$tmp/err"`
test "$n" -eq 1 || err "--threads -3 on rank 1 only: the message appears $n times, expected once: `cat $tmp/err`"
# ranks started with different model or optimizer options (MPMD) all exit 2 before
# training, the message naming the field and each rank's value
for pair in "--dim 32:--dim 64:dim: 32 on rank 0, 64 on rank 1" \
            "--dtype f32:--dtype bf16:dtype: f32 on rank 0, bf16 on rank 1" \
            "--zero 0:--zero 1:zero_stage: 0 on rank 0, 1 on rank 1"; do
  a=`echo "$pair" | cut -d: -f1` b=`echo "$pair" | cut -d: -f2` want=`echo "$pair" | cut -d: -f3-`
  timeout -k 5 120 $MPIEXEC -n 1 $prog --backend host --steps 2 $a : -n 1 $prog --backend host --steps 2 $b \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  test $rc -eq 2 || { err "$a / $b (MPMD): exit $rc, expected 2"; cat "$tmp/err"; }
  grep -q -- "$want" "$tmp/err" || err "$a / $b (MPMD): '$want' not in: `cat $tmp/err`"
  if grep -q '^step' "$tmp/out"; then err "$a / $b (MPMD): a step was trained"; fi
done
# a device that only gaaw_init can find missing: exit 2 too (after the data, before training)
expect_usage "--device 7" "device 7 does not exist" 1 --backend host --device 7 --steps 1

# inf and nan where a finite number is meant: every real option
for opt in lr min-lr weight-decay clip temperature; do
  for value in inf nan -inf; do
    expect_usage "--$opt $value" "command line: --$opt needs a finite number, got '$value'" 1 --$opt $value $missing
  done
done
printf 'lr = nan\n' >"$tmp/nan.cfg"
expect_usage "nan in the config file" "$tmp/nan.cfg:1: --lr needs a finite number, got 'nan'" 1 --config "$tmp/nan.cfg" \
  $missing
GAAW_CLIP=inf expect_usage "GAAW_CLIP=inf" "GAAW_CLIP: --clip needs a finite number, got 'inf'" 1 $missing
expect_usage "--lr 1e300" "--lr 1e+300 is beyond the range of a float" 1 --lr 1e300 $missing

# config files that are not text files (as root, chmod 000 does not stop a read:
# a path below a plain file cannot be opened by anyone)
expect_usage "--config DIR" "the config file '$tmp' is a directory" 2 --config "$tmp" $missing
GAAW_CONFIG="$tmp" expect_usage "GAAW_CONFIG=DIR" "the config file '$tmp' is a directory" 1 $missing
printf 'x\n' >"$tmp/plain"
expect_usage "unreadable config file" "cannot read the config file '$tmp/plain/x.cfg': Not a directory" \
  1 --config "$tmp/plain/x.cfg" $missing
printf 'steps = 3\nzero = 1\0 # hidden\n' >"$tmp/nul.cfg"
expect_usage "NUL byte in the config file" "$tmp/nul.cfg:2: holds a NUL byte" 1 --config "$tmp/nul.cfg" $missing

# sizes: 64-bit arithmetic, and the memory estimate against the node's memory
expect_usage "--dim 600000000" "the model and batch do not fit this node's memory: each rank needs at least .* EiB" \
  2 --dim 600000000 $missing
expect_usage "a batch too big" "do not fit this node's memory: .* + activations .* TiB, at tp 1, pp 1, dp 1, ZeRO 0" \
  1 --batch 100000 --seq 1024 --layers 8 --dim 1024 $missing
acts() { sed -n 's/.* + activations \([0-9.]*\) TiB, .*/\1/p' "$tmp/err"; }
whole=`acts`
# a pipeline stage holds its share: 4 of the 8 blocks, one microbatch in flight (1f1b, m 1)
expect_usage "a batch too big, pp 2" "do not fit this node's memory: .* + activations .* TiB, at tp 1, pp 2, dp 1, ZeRO 0" \
  2 --pp 2 --batch 100000 --seq 1024 --layers 8 --dim 1024 $missing
half=`acts`
awk -v w="$whole" -v h="$half" 'BEGIN { exit !(w > 0 && h / w > 0.45 && h / w < 0.55) }' ||
  err "the activation estimate at pp 2 ($half TiB) is not about half of pp 1's ($whole TiB)"
expect_usage "--dim beyond int" "command line: --dim 3000000000 is out of range" 1 --dim 3000000000 $missing

# the prompt only matters when sampling
high=`printf '\310'`
expect_usage "bad prompt, --sample 0" "cannot open $tmp/missing.txt" 1 --sample 0 --prompt "x${high}" --vocab 128 $missing
expect_usage "bad prompt, --sample 4" "--prompt holds byte 200, outside --vocab 128" \
  1 --sample 4 --prompt "x${high}" --vocab 128 $missing

if test $fail -ne 0; then
  echo "the command-line checks failed; the training runs are not tried"
  exit 1
fi

# 20 steps of a tiny GPT on the shipped corpus. train NP NAME: runs it, keeps the
# metrics in $tmp/NAME.jsonl and the output in $tmp/NAME.out.
tiny="--backend host --tp 2 --zero 1 --steps 20 --layers 1 --heads 2 --dim 32 --seq 32 --batch 4 --lr 0.005 --warmup 2
      --eval-every 10 --eval-batches 2 --sample 24 --seed 7"
losses() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" "$2"; }
train() {
  run $1 $tiny --metrics "$tmp/$2.jsonl"
  cp "$tmp/out" "$tmp/$2.out"
  cat "$tmp/out"
  test $rc -eq 0 || { err "np $1: exit $rc"; cat "$tmp/err"; return; }
  test `grep -c '^{"step":' "$tmp/$2.jsonl"` -eq 20 || err "np $1: the metrics file does not hold 20 steps"
  for key in loss lr grad_norm loss_scale model_flops_per_token ms tokens_per_s tflops skipped params_bytes grads_bytes optimizer_bytes \
             activation_peak_bytes dp_comm_bytes; do
    test `grep -c "\"$key\":" "$tmp/$2.jsonl"` -eq 20 || err "np $1: '$key' is missing from some metrics lines"
  done
  test `grep -c '"val_loss":' "$tmp/$2.jsonl"` -eq 2 || err "np $1: expected val_loss at steps 10 and 20"
  # ZeRO 1 in f32 over dp = np / 2: the gradient reduce-scatter and parameter
  # all-gather move 2 Psi (here 2 params_bytes; the trainer averages its losses on a
  # communicator of its own); nothing at dp 1
  sed -n 's/.*"params_bytes":\([0-9]*\).*"dp_comm_bytes":\([0-9]*\).*/\1 \2/p' "$tmp/$2.jsonl" |
    awk -v dp=$(($1 / 2)) '{ ok = dp == 1 ? $2 == 0 : $2 >= 2 * $1 && $2 <= 2 * $1 + 64 }
                           !ok { bad = 1; print "  params " $1 " bytes, dp traffic " $2 " bytes" }
                           END { exit bad }' ||
    err "np $1: the step's dp traffic is not 2 Psi (DESIGN.md section 10)"
  first=`losses loss "$tmp/$2.jsonl" | head -1`
  last5=`losses loss "$tmp/$2.jsonl" | tail -5 | awk '{ s += $1 } END { print s / NR }'`
  val0=`sed -n 's/^step  *0\/20 | val loss \([0-9.]*\)$/\1/p' "$tmp/$2.out"`
  val=`losses val_loss "$tmp/$2.jsonl" | tail -1`
  awk -v a="$first" -v b="$last5" 'BEGIN { exit !(b < a - 1.0) }' ||
    err "np $1: the training loss did not fall by 1: first $first, mean of the last 5 $last5"
  awk -v a="$val0" -v b="$val" 'BEGIN { exit !(a != "" && b < a - 1.0) }' ||
    err "np $1: the validation loss did not fall by 1: $val0 before, $val after"
  grep '^sample (24 bytes after a 4-byte prompt, greedy):$' "$tmp/$2.out" >/dev/null || err "np $1: no sample"
  grep '^done: 20 steps .* train loss .* val loss .* tok/s mean' "$tmp/$2.out" >/dev/null || err "np $1: no summary"
}
train 2 np2
train 4 np4
train 4 np4-again
strip() { sed 's/,"ms":[0-9.]*,"tokens_per_s":[0-9.]*,"tflops":[-0-9.e+]*\(,"mfu":[-0-9.e+]*\)\{0,1\}//' "$1"; }
strip "$tmp/np4.jsonl" >"$tmp/a"
strip "$tmp/np4-again.jsonl" >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || { err "the same np 4 run twice gave different metrics:"; diff "$tmp/a" "$tmp/b" | head; }
test -s "$tmp/a" || err "no metrics to compare"

# pipeline: the tiny GPT with 2 layers, pp 2 x tp 2 on np 4 with 2 microbatches per
# forward_backward, against tp 2 on np 2 with --accum 2: the same microbatches
# (dp 1 both), so the same losses within 1e-4 relative; the step line ends with
# every rank's idle fraction and activation peak
pp_run() {
  run $1 $tiny --layers 2 --steps 5 --eval-every 0 --sample 0 $2 --metrics "$tmp/$3.jsonl"
  test $rc -eq 0 || { err "$3: exit $rc"; cat "$tmp/err"; }
  cp "$tmp/out" "$tmp/$3.out"
}
pp_run 2 "--accum 2" accum
pp_run 4 "--pp 2 --microbatches 2 --pp-schedule 1f1b" pipeline
cat "$tmp/pipeline.out"
losses loss "$tmp/accum.jsonl" >"$tmp/a"
losses loss "$tmp/pipeline.jsonl" >"$tmp/b"
test `wc -l <"$tmp/b"` -eq 5 || err "pp 2: expected 5 steps of metrics"
paste "$tmp/a" "$tmp/b" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) { bad = 1; print "  " $0 } }
                              END { exit bad }' || err "pp 2 x tp 2 with 2 microbatches: losses differ from --accum 2"
grep -c '| idle [0-9]*%/[0-9]*%/[0-9]*%/[0-9]*% | act peaks [0-9.]*/[0-9.]*/[0-9.]*/[0-9.]* MiB$' "$tmp/pipeline.out" |
  grep -x 5 >/dev/null || err "pp 2: the step lines do not give 4 ranks' idle fractions and activation peaks"

# context parallelism: cp 2 x tp 2 on np 4 (each sequence of 32 tokens in 4 pieces of 8)
# against tp 2 on np 2, both --accum 2: the same sequences, so the same losses within
# 1e-4 relative
pp_run 4 "--cp 2 --accum 2" cp
grep -q '^gaaw-train: world 4 = dp 1 x cp 2 x tp 2,' "$tmp/cp.out" || err "cp 2: the header does not show cp 2"
losses loss "$tmp/cp.jsonl" >"$tmp/b"
test `wc -l <"$tmp/b"` -eq 5 || err "cp 2: expected 5 steps of metrics"
paste "$tmp/a" "$tmp/b" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) { bad = 1; print "  " $0 } }
                              END { exit bad }' || err "cp 2 x tp 2: losses differ from tp 2 on 2 ranks"
exit $fail
