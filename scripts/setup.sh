#!/usr/bin/env bash
# Set deeprepo up on a fresh machine: system packages (bubblewrap and libseccomp for the
# kernel sandbox, git), a virtualenv in .venv, and the package with its dev extras
# (DEEPREPO_TRAIN=1 and DEEPREPO_RAY=1 add the train and ray extras).
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

want=()
command -v bwrap >/dev/null 2>&1 || want+=(bubblewrap)
command -v git >/dev/null 2>&1 || want+=(git)
# libseccomp builds the kernel's seccomp filter (loaded through ctypes; see docs/security.md).
libs=$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true)
[[ $libs == *libseccomp.so.2* ]] || want+=(libseccomp2)
if [ ${#want[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${want[*]} with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}" >/dev/null) \
      || echo "setup: warning: could not install ${want[*]}; without bubblewrap deeprepo runs" \
              "model-written code only with --sandbox process"
  else
    echo "setup: warning: ${want[*]} missing and not installable here (need root + apt-get);" \
         "without bubblewrap deeprepo runs model-written code only with --sandbox process"
  fi
fi

# The venv's interpreter is the grammar bandit parses Python with: a file written for a newer
# Python does not parse under it and a run names it as not analysed (exit 3). So take the newest
# Python 3.12+ there is (on PATH, or one uv manages) unless PYTHON names one; python3 otherwise.
newest_python() {
  local v found
  for v in 3.14 3.13 3.12; do
    # A pyenv shim answers command -v for versions it cannot run: ask it to run.
    if "python$v" -c "" >/dev/null 2>&1; then echo "python$v"; return; fi
  done
  if command -v uv >/dev/null 2>&1 && found=$(uv python find '>=3.12' 2>/dev/null); then
    echo "$found"; return
  fi
  echo python3
}
PY=${PYTHON:-$(newest_python)}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
venv_version=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
echo "setup: .venv runs Python $venv_version; deeprepo's analyzers parse Python with its grammar"
if .venv/bin/python -c 'import sys; sys.exit(sys.version_info >= (3, 12))'; then
  echo "setup: note: files using newer syntax (3.12 generics, type aliases, PEP 701 f-strings)" \
       "will be named as not analysed; PYTHON=python3.12 bash scripts/setup.sh (after removing" \
       ".venv) builds the venv on a newer Python"
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[dev,semgrep]"
# DEEPREPO_TRAIN=1: the train extra too (deeprepo train; docs/training.md). torch first, pinned,
# so pip takes the CPU build from the wheel cache rather than resolving a CUDA one for trl.
if [ "${DEEPREPO_TRAIN:-0}" = 1 ]; then
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[dev,semgrep,train]"
fi
# DEEPREPO_RAY=1: the ray extra too (eval / bench --executor ray; docs/performance.md). Plain
# ray, ~80 MB of wheel (~240 MB installed) and msgpack; not ray[default]'s dashboard stack.
if [ "${DEEPREPO_RAY:-0}" = 1 ]; then
  .venv/bin/python -m pip install -q -e ".[dev,semgrep,ray]"
fi
echo "setup: done (.venv ready; try .venv/bin/deeprepo --help)"
