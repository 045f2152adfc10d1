#!/bin/sh
# A stand-in for a TAO training (a Lightning network such as DINO) on the local test clusters and for
# users trying the campaign verbs: it writes what TAO 6.x writes, in TAO's order, and nothing more.
#   fake_tao_train.sh --results DIR (--epochs N | --replay FILE) [--sleep S] [--epoch-time S] [--fail-at EPOCH] [--action NAME]
#                     [--network NAME] [--val-interval K] [--checkpoints-per-epoch K] [KEY=VALUE...]
# Where: DIR/ACTION (TAO's results folder of an action; --action defaults to train): status.json, one
# checkpoint model_epoch_EEE_step_SSSSS.pth per epoch (EEE the 0-based epoch, SSSSS the global step; K per
# epoch with --checkpoints-per-epoch) and the relative link NETWORK_model_latest.pth to the last one.
# status.json: JSON Lines as TAO's StatusLogger writes them (date M/D/YYYY and time H:M:S, not zero-padded;
# eta and time_per_epoch as Python's str(timedelta)), in TAO's order:
#   STARTED "Starting DINO train." / STARTED "Starting Training Loop." / per epoch (0-based):
#   "Eval metrics generated." (kpi: val_mAP as a string, val_loss; no epoch key; every K-th epoch with
#   --val-interval K), the epoch line (epoch, step, max_epoch = N-1, max_step, times, eta; it repeats the KPI
#   dict in effect), "Train metrics generated." (kpi: train_loss) / "Training loop complete." /
#   "Train finished successfully." (status RUNNING: TAO writes no SUCCESS for a training).
# --sleep: whole seconds slept per epoch (default 0). --epoch-time: the time_per_epoch written (default:
# --sleep; a test can claim days without waiting). --fail-at E: at epoch E (0-based; epochs before it
# complete) write FAILURE and exit 1; a resumed run ignores it (a crash does not recur: continue then finishes).
# train.resume_training_checkpoint_path=CKPT (TAO's override): carry on after the epoch CKPT's name carries
# (model_epoch_007_step_00080.pth -> epoch 8), appending to status.json as TAO does; an empty value or null
# resumes from the NETWORK_model_latest.pth link, as TAO does.
# Other trailing KEY=VALUE arguments (what a sweep trial adds; train.num_gpus=N) are printed; -e FILE is
# accepted as TAO's spec file. fake.best_val=N (thousandths) is the lowest val_loss written (default 400);
# fake.nan_at=E writes train_loss NaN at epoch E (a diverged loss, as TAO writes it: a bare NaN).
# fake.lr_optimum=LR (for trying a search, references/search.md; needs python3 or an awk with log()): the lowest val_loss becomes a known function of
# train.optim.lr: 0.4 + 0.25 * log10(lr / LR)^2 (fake.best_val is then ignored), every epoch's val_loss with a
# noise of at most 0.01 drawn from lr and the epoch (the same lr gives the same curve).
# --replay FILE: instead, replay what TAO's own code wrote (tests/support/tao_oracle.py write_replay, made on the
# host by nvidia-tao-core's StatusLogger and Lightning's ModelCheckpoint): its JSON lines appended to
# status.json as they are, "#checkpoint NAME" writes that checkpoint and points the latest link at it (then
# --sleep), "#exit N" is the exit code at the end (TAO exits 0 after an interrupt it wrote FAILURE for).
# POSIX sh (runs under busybox sh); needs only date, mkdir, sleep, sed, ln.
set -eu

usage() {
  echo "usage: $0 --results DIR (--epochs N | --replay FILE) [--sleep S] [--epoch-time S] [--fail-at EPOCH] [--action NAME] [--network NAME] [--val-interval K] [--checkpoints-per-epoch K] [KEY=VALUE...]" >&2
  exit 2
}
number() { case $2 in '' | *[!0-9]*) echo "$0: $1 must be a whole number, got '$2'" >&2; exit 2 ;; esac; }

results='' epochs='' pause=0 epoch_time='' fail_at='' action=train network=dino resume='' resuming=false
best_val=400 nan_at='' val_every=1 per_epoch=1 replay='' lr_opt='' lr=0.001 noise_seed=''
while [ $# -gt 0 ]; do
  case $1 in
    train.resume_training_checkpoint_path=*) resume=${1#*=}; resuming=true; shift; continue ;;
    *=*)
      echo "override $1"
      case $1 in
        fake.best_val=*) best_val=${1#*=}; number fake.best_val "$best_val" ;;
        fake.nan_at=*) nan_at=${1#*=}; number fake.nan_at "$nan_at" ;;
        fake.lr_optimum=*) lr_opt=${1#*=} ;;
        train.optim.lr=*) lr=${1#*=} ;;
      esac
      shift
      continue ;;
  esac
  [ $# -ge 2 ] || usage
  case $1 in
    --results) results=$2 ;;
    --epochs) epochs=$2 ;;
    --sleep) pause=$2 ;;
    --epoch-time) epoch_time=$2 ;;
    --fail-at) fail_at=$2 ;;
    --action) action=$2 ;;
    --network) network=$2 ;;
    --val-interval) val_every=$2 ;;
    --checkpoints-per-epoch) per_epoch=$2 ;;
    --replay) replay=$2 ;;
    -e) echo "spec file $2" ;;
    *) usage ;;
  esac
  shift 2
done
if [ -n "$replay" ] && [ -n "$results" ]; then
  case $action in '' | */* | .. | .) echo "$0: --action must be a folder name" >&2; exit 2 ;; esac
  number --sleep "$pause"
  [ -f "$replay" ] || { echo "$0: replay file $replay does not exist" >&2; exit 2; }
  out=$results/$action rc=0
  mkdir -p -- "$out"
  while IFS= read -r l || [ -n "$l" ]; do
    case $l in
      '#checkpoint '*)
        name=${l#'#checkpoint '}
        case $name in '' | */* | .*) echo "$0: bad checkpoint name in $replay" >&2; exit 2 ;; esac
        printf 'checkpoint %s (replayed)\n' "$name" > "$out/$name"
        ln -sfn "$name" "$out/${network}_model_latest.pth"
        echo "saved $name"
        sleep "$pause" ;;
      '#exit '*) rc=${l#'#exit '}; number '#exit' "$rc" ;;
      '{'*) printf '%s\n' "$l" >> "$out/status.json" ;;
    esac
  done < "$replay"
  [ "$rc" -eq 0 ] || echo "replayed training failed (exit $rc)" >&2
  exit "$rc"
fi
[ -n "$results" ] && [ -n "$epochs" ] || usage
number --epochs "$epochs"
number --sleep "$pause"
[ -z "$fail_at" ] || number --fail-at "$fail_at"
if [ "$resuming" = true ]; then fail_at=''; fi
number --val-interval "$val_every"
number --checkpoints-per-epoch "$per_epoch"
epoch_time=${epoch_time:-$pause}
number --epoch-time "$epoch_time"
case $action in '' | */* | .. | .) echo "$0: --action must be a folder name" >&2; exit 2 ;; esac
case $network in '' | *[!a-z0-9_]*) echo "$0: --network must be a TAO network name such as dino" >&2; exit 2 ;; esac
epochs=$((epochs + 0)) pause=$((pause + 0)) epoch_time=$((epoch_time + 0)) val_every=$((val_every + 0))
per_epoch=$((per_epoch + 0))
[ "$epochs" -ge 1 ] || { echo "$0: --epochs must be at least 1" >&2; exit 2; }
[ "$val_every" -ge 1 ] && [ "$per_epoch" -ge 1 ] || { echo "$0: intervals must be at least 1" >&2; exit 2; }

if [ -n "$lr_opt" ]; then  # best_val (thousandths) and the noise's seed from train.optim.lr
  # python3 where there is one (a search trial's runner needs it anyway), else an awk with log() (busybox's has none)
  if command -v python3 > /dev/null; then
    # shellcheck disable=SC2046 # the two numbers printed are the point
    set -- $(python3 -c 'import math, sys
lr, opt = float(sys.argv[1]), float(sys.argv[2])
if lr <= 0 or opt <= 0: sys.exit("bad")
d = math.log(lr / opt) / math.log(10)
print(int(400 + 250 * d * d + 0.5), abs(int(math.log(lr) * 100003)) % 9973)' "$lr" "$lr_opt" 2>/dev/null)
  else
    for awk in gawk mawk awk; do command -v "$awk" > /dev/null && break; done
    # shellcheck disable=SC2046 # the two numbers awk prints are the point
    set -- $("$awk" -v lr="$lr" -v opt="$lr_opt" 'BEGIN {
      if (lr + 0 <= 0 || opt + 0 <= 0) { print "bad"; exit }
      d = log(lr / opt) / log(10); printf "%d %d\n", 400 + 250 * d * d + 0.5, (log(lr) < 0 ? -1 : 1) * int(log(lr) * 100003) % 9973 }')
  fi
  [ $# -eq 2 ] || { echo "$0: train.optim.lr and fake.lr_optimum must be numbers above 0" >&2; exit 2; }
  best_val=$1 noise_seed=$2
fi

out=$results/$action
mkdir -p -- "$out"
status=$out/status.json
latest=${network}_model_latest.pth
steps_per_epoch=10
[ $((steps_per_epoch % per_epoch)) -eq 0 ] || { echo "$0: --checkpoints-per-epoch must divide $steps_per_epoch" >&2; exit 2; }
upper=$(printf '%s' "$network" | tr '[:lower:]' '[:upper:]')

# TAO writes "3/7/2025" and "9:5:3": date's padded fields with one leading zero dropped
# (no %-m, which not every date supports). FAKE_TAO_NOW="MM DD YYYY HH MM SS" stands in for
# the clock in tests (busybox sh runs its own date applet whatever PATH says).
stamp() {
  # shellcheck disable=SC2046,SC2086 # word splitting of the six fields is the point
  set -- ${FAKE_TAO_NOW:-$(date '+%m %d %Y %H %M %S')}
  printf '"date": "%s/%s/%s", "time": "%s:%s:%s"' "${1#0}" "${2#0}" "$3" "${4#0}" "${5#0}" "${6#0}"
}

# Python's str(timedelta(seconds=N)) for whole seconds: "0:01:05", "1 day, 2:03:04", "2 days, 0:00:00".
timedelta() {
  s=$1 days=$(($1 / 86400)) prefix=''
  s=$((s % 86400))
  if [ "$days" -eq 1 ]; then prefix='1 day, '; elif [ "$days" -gt 1 ]; then prefix="$days days, "; fi
  printf '%s%d:%02d:%02d' "$prefix" $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
}

# Thousandths as Python's repr of the float writes them (json.dumps, str): 412 -> 0.412, 420 -> 0.42, 1000 -> 1.0.
thousandths() {
  frac=$(printf '%03d' $(($1 % 1000)) | sed 's/0*$//')
  printf '%d.%s' $(($1 / 1000)) "${frac:-0}"
}

# TAO's StatusLogger.write: the caller's keys, then date, time, status, verbosity, message, and the KPI
# dict in effect (TAO replaces the dict, then every later line repeats it).
kpi=''
line() {  # $1 status, $2 message, $3 the caller's keys ("" or '"epoch": 0, ...')
  printf '{%s%s, "status": "%s", "verbosity": "%s", "message": "%s"%s}\n' "${3:+$3, }" "$(stamp)" "$1" \
    "$([ "$1" = FAILURE ] && echo ERROR || echo INFO)" "$2" "${kpi:+, \"kpi\": {$kpi\}}" >> "$status"
}

e=0
if $resuming; then
  if [ -z "$resume" ] || [ "$resume" = null ] || [ "$resume" = None ]; then
    resume=$out/$latest  # TAO: no path given, resume from the latest link of the results folder
  fi
  [ -f "$resume" ] || { echo "$0: checkpoint $resume does not exist" >&2; exit 1; }
  done_epoch=$(printf '%s\n' "${resume##*/}" | sed -n 's/.*epoch_0*\([0-9][0-9]*\).*/\1/p')
  if [ -z "$done_epoch" ] && [ -L "$resume" ]; then
    done_epoch=$(readlink -- "$resume" | sed -n 's/.*epoch_0*\([0-9][0-9]*\).*/\1/p')
  fi
  [ -n "$done_epoch" ] || { echo "$0: $resume names no epoch" >&2; exit 1; }
  e=$((done_epoch + 1))
  echo "resumed from checkpoint $resume at epoch $done_epoch"
  line STARTED "Starting $upper $action."
  line RUNNING "Resuming training from checkpoint: $(readlink -f -- "$resume" 2>/dev/null || printf '%s' "$resume")"
else
  : > "$status"
  line STARTED "Starting $upper $action."
fi
line STARTED "Starting Training Loop."
best=$(((2 * epochs + 2) / 3 - 1))  # val_loss is lowest here (0-based), then rises (overfitting)
last=$((epochs - 1))
while [ "$e" -lt "$epochs" ]; do
  sleep "$pause"
  if [ -n "$fail_at" ] && [ "$e" -eq "$fail_at" ]; then
    line FAILURE "Parameter validation error: simulated failure at epoch $e"
    echo "fake training failed at epoch $e" >&2
    exit 1
  fi
  step=$(((e + 1) * steps_per_epoch)) said_val=''
  if [ $(((e + 1) % val_every)) -eq 0 ]; then
    gap=$((e - best))
    val=$((best_val + 20 * gap * gap))
    [ -z "$noise_seed" ] || val=$((val + (noise_seed * 37 + e * 101 + noise_seed * e) % 21 - 10))
    said_val=$(thousandths "$val")
    kpi="\"val_mAP\": \"$(thousandths $((1000 - val)))\", \"val_loss\": $said_val"
    line RUNNING "Eval metrics generated."
  fi
  line RUNNING "Training loop in progress" "\"epoch\": $e, \"step\": $step, \"max_epoch\": $last, \
\"max_step\": $((epochs * steps_per_epoch)), \"time_per_epoch\": \"$(timedelta "$epoch_time")\", \
\"time_per_step\": \"$(timedelta $((epoch_time / steps_per_epoch)))\", \
\"eta\": \"$(timedelta $(((last - e) * epoch_time)))\""
  train=$((1000 / (e + 2)))
  if [ "$e" = "$nan_at" ]; then kpi='"train_loss": NaN'; else kpi="\"train_loss\": $(thousandths "$train")"; fi
  line RUNNING "Train metrics generated."
  k=1
  while [ "$k" -le "$per_epoch" ]; do
    at=$((e * steps_per_epoch + k * steps_per_epoch / per_epoch))
    name=$(printf 'model_epoch_%03d_step_%05d.pth' "$e" "$at")
    printf 'fake checkpoint of epoch %d step %d\n' "$e" "$at" > "$out/$name"
    ln -sfn "$name" "$out/$latest"
    k=$((k + 1))
  done
  echo "Epoch $e: train_loss=$(thousandths "$train")${said_val:+ val_loss=$said_val}"
  e=$((e + 1))
done
line RUNNING "Training loop complete."
line RUNNING "Train finished successfully."
