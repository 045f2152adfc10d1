#!/bin/sh
# A stand-in for a TAO training on the local test clusters: writes status.json lines in TAO's
# real format (JSON Lines; date M/D/YYYY and time H:M:S, not zero-padded; eta and
# time_per_epoch as Python's str(timedelta)) and one small checkpoint per epoch.
#   fake_tao_train.sh --results DIR --epochs N [--sleep S] [--epoch-time S] [--fail-at EPOCH] [--action NAME]
#                     [train.resume_training_checkpoint_path=CKPT]
# --sleep: whole seconds slept per epoch (default 0). --epoch-time: the time_per_epoch written (default:
# --sleep; a test can claim days without waiting). --fail-at: write FAILURE at that epoch and exit 1.
# --action: write DIR/NAME/status.json (TAO's per-action folder) instead of DIR/status.json.
# train.resume_training_checkpoint_path=CKPT (TAO's override form): carry on after the epoch CKPT's name
# carries (model_epoch_007.pth -> epoch 8), appending to status.json as TAO does, and say so on stdout.
# Other trailing KEY=VALUE arguments (what a sweep trial adds) are printed; -e FILE is accepted as TAO's
# spec file. fake.best_val=N (thousandths) is the lowest val_loss written (default 400).
# POSIX sh (runs under busybox sh); needs only date, mkdir, sleep, sed.
set -eu

usage() {
  echo "usage: $0 --results DIR --epochs N [--sleep S] [--epoch-time S] [--fail-at EPOCH] [--action NAME] [KEY=VALUE...]" >&2
  exit 2
}
number() { case $2 in '' | *[!0-9]*) echo "$0: $1 must be a whole number, got '$2'" >&2; exit 2 ;; esac; }

results='' epochs='' pause=0 epoch_time='' fail_at=0 action='' resume='' best_val=400
while [ $# -gt 0 ]; do
  case $1 in
    train.resume_training_checkpoint_path=*) resume=${1#*=}; shift; continue ;;
    *=*)
      echo "override $1"
      case $1 in fake.best_val=*) best_val=${1#*=}; number fake.best_val "$best_val" ;; esac
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
    -e) echo "spec file $2" ;;
    *) usage ;;
  esac
  shift 2
done
[ -n "$results" ] && [ -n "$epochs" ] || usage
number --epochs "$epochs"
number --sleep "$pause"
number --fail-at "$fail_at"
epoch_time=${epoch_time:-$pause}
number --epoch-time "$epoch_time"
case $action in */* | .. | .) echo "$0: --action must be a folder name" >&2; exit 2 ;; esac
epochs=$((epochs + 0)) pause=$((pause + 0)) epoch_time=$((epoch_time + 0)) fail_at=$((fail_at + 0))
[ "$epochs" -ge 1 ] || { echo "$0: --epochs must be at least 1" >&2; exit 2; }

status_dir=$results${action:+/$action}
mkdir -p -- "$results" "$status_dir"
status=$status_dir/status.json
steps_per_epoch=10

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

# A decimal of thousandths: 412 -> 0.412.
thousandths() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

line() { printf '{%s, %s}\n' "$(stamp)" "$1" >> "$status"; }

e=1
if [ -n "$resume" ]; then
  [ -f "$resume" ] || { echo "$0: checkpoint $resume does not exist" >&2; exit 1; }
  done_epochs=$(printf '%s\n' "${resume##*/}" | sed -n 's/.*epoch_0*\([0-9][0-9]*\).*/\1/p')
  [ -n "$done_epochs" ] || { echo "$0: $resume names no epoch" >&2; exit 1; }
  e=$((done_epochs + 1))
  echo "resumed from checkpoint $resume at epoch $done_epochs"
else
  : > "$status"
fi
line '"status": "STARTED", "verbosity": "INFO", "message": "Starting fake training"'
best=$(((2 * epochs + 2) / 3))  # val_loss is lowest here, then rises (overfitting)
while [ "$e" -le "$epochs" ]; do
  sleep "$pause"
  if [ "$e" -eq "$fail_at" ]; then
    line "\"status\": \"FAILURE\", \"verbosity\": \"ERROR\", \"message\": \"Simulated failure at epoch $e\""
    echo "fake training failed at epoch $e" >&2
    exit 1
  fi
  train=$((1000 / (e + 1)))
  gap=$((e - best))
  val=$((best_val + 20 * gap * gap))
  kpi="\"kpi\": {\"train_loss\": $(thousandths "$train"), \"val_loss\": $(thousandths "$val")}"
  line "\"status\": \"RUNNING\", \"verbosity\": \"INFO\", \"epoch\": $e, \"max_epoch\": $epochs, \
\"step\": $((e * steps_per_epoch)), \"max_step\": $((epochs * steps_per_epoch)), \
\"eta\": \"$(timedelta $(((epochs - e) * epoch_time)))\", \"time_per_epoch\": \"$(timedelta "$epoch_time")\", $kpi"
  printf 'fake checkpoint of epoch %d\n' "$e" > "$(printf '%s/model_epoch_%03d.pth' "$results" "$e")"
  echo "Epoch $e/$epochs: train_loss=$(thousandths "$train") val_loss=$(thousandths "$val")"
  e=$((e + 1))
done
line '"status": "SUCCESS", "verbosity": "INFO", "message": "Training finished successfully"'
