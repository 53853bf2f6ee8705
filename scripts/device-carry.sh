#!/usr/bin/env bash
# Prepare .devcarry/ (ignored) for scripts/device-train.sh: what the two device calls carry.
#
#   .devcarry/a/  smollm2-135m.gguf.part-a (the first half of the GGUF) and wheels/: the
#                 packages deeprepo's train, eval and export paths need that the device
#                 image lacks (trl, datasets, pydantic, gguf, ...), for Python 3.12 x86-64
#   .devcarry/b/  smollm2-135m.gguf.part-b (the rest)
#
# Each folder has a SHA256SUMS; the script ends with `device-train.sh --check
# --require-carry`, which also measures what each call sends against the 64 MiB limit.
# Needs the registry (pip download) once, and the weights from `deeprepo local setup --model
# smollm2-135m --no-runtime` (or a GGUF path as the first argument).
#
#   bash scripts/device-carry.sh [GGUF]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CARRY="$ROOT/.devcarry"
GGUF=${1:-${DEEPREPO_HOME:-$HOME/.local/share/deeprepo}/models/smollm2-135m.gguf}
NAME=smollm2-135m.gguf
if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi

# The versions deeprepo's own environment runs (pyproject's train extra); the device has
# torch, transformers, peft and accelerate (KINDS.md) and takes these beside them.
PINS="trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 pydantic==2.14.4
pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing_extensions==4.16.0
platformdirs==4.14.8 gguf==0.19.0"

[ -f "$GGUF" ] || {
    echo "no weights at $GGUF: run \`deeprepo local setup --model smollm2-135m --no-runtime\`" >&2
    exit 2
}
rm -rf "$CARRY"
mkdir -p "$CARRY/a/wheels" "$CARRY/b"

# Half and half: each call then sends ~47 MiB of weights, the tree (~5 MiB) and, in call A,
# the wheels (~5 MiB); neither part alone is a loadable file.
size=$(stat -c %s "$GGUF")
half=$((size / 2))
head -c "$half" "$GGUF" >"$CARRY/a/$NAME.part-a"
tail -c +$((half + 1)) "$GGUF" >"$CARRY/b/$NAME.part-b"

# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$CARRY/a/wheels" $PINS

(cd "$CARRY/a" && sha256sum "$NAME.part-a" wheels/*.whl >SHA256SUMS)
(cd "$CARRY/b" && sha256sum "$NAME.part-b" >SHA256SUMS)
echo "prepared $CARRY: a $(du -sh "$CARRY/a" | cut -f1), b $(du -sh "$CARRY/b" | cut -f1)"
PYTHON="$PY" bash "$ROOT/scripts/device-train.sh" --check --require-carry
