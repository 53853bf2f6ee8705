#!/usr/bin/env bash
# Install what the real-model test tier needs: the llama.cpp runtime (built from source
# unless pip's cache holds the wheel from an earlier run; see docs/local.md) and the
# smallest model's weights (SmolLM2-135M, 98 MB), into deeprepo's data directory
# ($DEEPREPO_HOME, else the user data directory). Run scripts/setup.sh first.
# Safe to run again: what is there and verified is not redone.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-smollm2-135m}
start=$(date +%s)
.venv/bin/deeprepo local setup --model "$model"
echo "setup-local: done in $(( $(date +%s) - start ))s"
