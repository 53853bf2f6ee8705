"""scripts/device-train.sh, the prepared GPU run for the lent device, checked without one.

CI has no GPU and no device: the script's own ``--check`` is what can be checked here (the
config through the real loader and against the script's paths, the phase budget, every
command it calls, the evaluation and compare as the run calls them on the offline expert).
The carried weights and wheels (``.devcarry/``, ignored) are checked only where
``scripts/device-carry.sh`` has prepared them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from clihelp import ROOT

SCRIPT = ROOT / "scripts" / "device-train.sh"
CARRY_SCRIPT = ROOT / "scripts" / "device-carry.sh"
CONFIG = ROOT / "configs" / "device-smollm2.toml"


def _bash(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    # The shell's python3 may not be the one with deeprepo's dependencies.
    full["PYTHON"] = sys.executable
    full.update(env or {})
    return subprocess.run(
        ["bash", *args], capture_output=True, text=True, timeout=300, env=full, cwd=ROOT
    )


def _copy_with_config(tmp_path: Path, config_text: str) -> Path:
    """The script in a copy of the layout it expects (scripts/, configs/, src/ beside)."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "configs").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / SCRIPT.name)
    (tmp_path / "configs" / CONFIG.name).write_text(config_text)
    (tmp_path / "src").symlink_to(ROOT / "src")
    return tmp_path / "scripts" / SCRIPT.name


@pytest.mark.parametrize("script", [SCRIPT, CARRY_SCRIPT], ids=lambda p: p.name)
def test_the_scripts_parse(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_device_config_runs_without_vllm_and_within_the_budget() -> None:
    config = tomllib.loads(CONFIG.read_text())
    grpo = config["grpo"]
    assert config["device"] == "cuda" and grpo["use_vllm"] is False
    assert config["model"]["lora"] is True and config["sft"]["expert"] == "scripted/compact"
    assert config["episode"]["sandbox"] == "process"
    assert 0 < grpo["max_seconds"] <= 180


@pytest.mark.e2e
def test_check_mode_passes_on_the_repository() -> None:
    result = _bash(str(SCRIPT), "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "config: device-smollm2.toml loads" in out
    assert "eval + compare ran on scripted/compact" in out
    assert out.rstrip().endswith("check: ok")
    if not (ROOT / ".devcarry").is_dir():
        assert "carry: .devcarry/ not prepared here" in out


@pytest.mark.e2e
def test_check_mode_refuses_what_cannot_run_on_the_device(tmp_path: Path) -> None:
    """One check of a copy holding four mistakes: each is named, and the check fails."""
    text = CONFIG.read_text()
    text = text.replace("use_vllm = false", "use_vllm = true").replace(
        'sandbox = "process"', 'sandbox = "auto"'
    )
    # Training on the evaluation's first tasks.
    tasks = '[tasks]\nsize = "small"\nlang = "python"\nseed = '
    assert tasks + "0\n" in text
    text = text.replace(tasks + "0\n", tasks + "9000\n")
    script = _copy_with_config(tmp_path, text)
    # No .devcarry/ in the copy: --require-carry must say what to run, not pass.
    result = _bash(str(script), "--check", "--require-carry", env={"DEVICE_BUDGET_S": "590"})
    assert result.returncode == 1
    out = result.stdout
    assert "config: use_vllm must be false" in out
    assert "config: episode.sandbox must be process" in out
    assert "the evaluation's tasks (seeds 9000+) overlap the training's" in out
    assert "590 s does not fit a 600 s call" in out
    assert "run scripts/device-carry.sh" in out
    assert out.rstrip().endswith("check: FAILED")


def test_the_run_without_call_a_says_so(tmp_path: Path) -> None:
    """Call B on a machine that was not warm from call A stops at once, naming the cause."""
    script = _copy_with_config(tmp_path, CONFIG.read_text())
    (tmp_path / ".devcarry" / "b").mkdir(parents=True)
    result = _bash(
        str(script),
        env={
            "DEVICE_STAGE": str(tmp_path / "stage"),
            "DEVICE_SITE": str(tmp_path / "site"),
            "OUT": str(tmp_path / "out"),
        },
    )
    assert result.returncode == 2
    assert "the machine was not warm from call A" in result.stdout
    phases = (tmp_path / "out" / "phases.jsonl").read_text()
    assert '"phase": "setup"' in phases and '"rc": 3' in phases
    assert (tmp_path / "out" / "device-train.log").is_file()
