#!/usr/bin/env bash
# CI for the verifiers environment package (environments/deeprepo_orchestration).
#
# verifiers is an optional, heavy dependency (~100 packages), so it lives in its own
# virtualenv (.venv-vf, or $DEEPREPO_VF_VENV) and never in the main one. This script
# creates that venv if needed, installs deeprepo and the env package (which pulls
# verifiers>=0.4; with uv when it can be had, else pip), runs tests/test_verifiers_env.py there, then runs `vf-eval` on the
# env offline: the root model is deeprepo's loopback server on 127.0.0.1 playing
# scripted/expert, the sub-model is the oracle worker. It checks that every rollout
# finished and recorded a reward that is a number in [0, 1].
#
# Installing needs a package index; the eval itself needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

venv=${DEEPREPO_VF_VENV:-.venv-vf}
py="$venv/bin/python"

echo "== verifiers venv ($venv)"
if [ ! -x "$py" ]; then
  python3 -m venv "$venv"
fi
# uv resolves and installs the ~100 packages in well under a minute where pip takes several;
# pip stays the fallback (and the choice with DEEPREPO_VF_INSTALLER=pip).
pkgs=(-e '.[dev]' -e environments/deeprepo_orchestration)
if [ "${DEEPREPO_VF_INSTALLER:-uv}" = uv ] \
  && "$py" -m pip install -q uv >/dev/null 2>&1 \
  && "$venv/bin/uv" pip install -q --python "$py" "${pkgs[@]}"; then
  echo "installed with uv"
else
  echo "installing with pip"
  "$py" -m pip install -q "${pkgs[@]}"
fi
"$py" -c 'import verifiers, deeprepo_orchestration; print("verifiers", verifiers.__version__)'

echo "== verifiers env tests"
"$py" -m pytest -p no:cacheprovider tests/test_verifiers_env.py

echo "== vf-eval against the loopback server (scripted/expert root, oracle sub)"
work=$(mktemp -d)
lb_pid=""
cleanup() {
  if [ -n "$lb_pid" ]; then kill "$lb_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$py" -m deeprepo_orchestration.scripted --policy expert "$work/script.json"
# The server exits by itself after its ttl, whatever happens to this script.
"$py" -m deeprepo.testing.loopback --port 0 --ttl 600 --script "$work/script.json" \
  >"$work/loopback.out" 2>&1 &
lb_pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^PORT \([0-9][0-9]*\)$/\1/p' "$work/loopback.out" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$lb_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "the loopback server did not start:" >&2
  cat "$work/loopback.out" >&2
  exit 1
fi

export DEEPREPO_LOOPBACK_KEY=loopback
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
if ! timeout 300 "$venv/bin/vf-eval" deeprepo-orchestration -n 2 -r 1 \
  -m loopback/scripted-expert \
  --client.base-url "http://127.0.0.1:$port/v1" \
  --client.api-key-var DEEPREPO_LOOPBACK_KEY \
  --env.taskset.size small --env.taskset.seed 7 \
  --no-push --no-rich -o "$work/out" --run.name deeprepo-ci \
  >"$work/traces.json" 2>"$work/eval.log"; then
  echo "vf-eval failed; its log:" >&2
  tail -n 60 "$work/eval.log" >&2
  exit 1
fi
grep -E "rollout done" "$work/eval.log" || true

"$py" - "$work/out/deeprepo-ci/traces.jsonl" <<'PY'
import json
import math
import sys

from deeprepo_orchestration.env import REWARD_NAME

traces = []
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        if line.strip():
            episode = json.loads(line)
            traces.extend(episode.get("traces", []))
if len(traces) != 2:
    sys.exit(f"expected 2 rollouts (-n 2 -r 1), found {len(traces)}")
for t in traces:
    reward = (t.get("rewards") or {}).get(REWARD_NAME) or {}
    score = reward.get("score")
    name = t["task"]["data"].get("id")
    if not t.get("ok") or t.get("errors"):
        sys.exit(f"{name}: rollout failed: {t.get('errors')}")
    if not isinstance(score, (int, float)) or not math.isfinite(score) or not 0.0 <= score <= 1.0:
        sys.exit(f"{name}: reward {score!r} is not a number in [0, 1]")
    m = t.get("metrics", {})
    print(
        f"{name}: reward {score:.3f}, stop {t.get('stop_condition')}, "
        f"turns {m.get('num_turns', 0):.0f}, sub_calls {m.get('sub_calls', 0):.0f}, "
        f"coverage {m.get('coverage_reward', 0):.3f}"
    )
print("vf-eval: 2 rollouts, every reward in [0, 1]")
PY

echo "== verifiers ci done in $(( $(date +%s) - start ))s"
