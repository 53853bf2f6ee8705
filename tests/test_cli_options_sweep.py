"""Every option of every command, given a bad value, is refused up front: one line on
stderr, exit code 2, no traceback. The commands and their options are read from the
typer app itself, so a new option is swept without touching this file.

The runs are in-process and the async work is stubbed out (``asyncio.run`` raises
:class:`Ran`): a value that reaches it was *accepted*, which is only right for the few
values in :data:`ACCEPTED`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from clihelp import EXAMPLE, EXAMPLE_TRUTH
from typer.core import TyperArgument, TyperOption

from deeprepo.cli.app import app, main

pytestmark = pytest.mark.e2e

BAD_VALUES = ("-5", "0", "abc", "nan", "{missing}", "{file}", "{dir}")

#: (command, option, value) that are valid requests: the sweep lets them through.
ACCEPTED = {
    *((cmd, "--seed", "0") for cmd in ("eval", "compare", "tasks generate")),
    ("compare", "--seed", "-5"),
    ("score", "--tolerance", "0"),
    # Folders a run creates: "-5", "0", "abc" are folder names like any other.
    *(
        (cmd, opt, v)
        for cmd, opt in (
            ("analyze", "--out"),
            ("single-call", "--out"),
            ("eval", "--out"),
            ("eval", "--cache-dir"),
            ("analyze", "--cache-dir"),
            ("single-call", "--cache-dir"),
            ("tasks generate", "OUT_DIR"),
            ("bench", "--out"),
        )
        for v in ("-5", "0", "abc", "nan", "{missing}", "{dir}")
    ),
    # An empty folder is a repository path; the loader refuses it (tests/test_cli_offline.py).
    ("analyze", "PATH", "{dir}"),
    ("single-call", "PATH", "{dir}"),
    # Free-form text checked where it is used (a revision exists or not in the repository).
    *(("analyze", "--rev", v) for v in BAD_VALUES),
    *(("analyze", "--since", v) for v in BAD_VALUES),
    *(("single-call", "--rev", v) for v in BAD_VALUES),
    ("compare", "--labels", "abc"),  # one label for one file... with two files: refused below
    # Thresholds that keep the base invocation's one rollout (reward 0.5, one finding).
    ("export sft", "--min-findings", "0"),
    ("export sft", "--min-reward", "-5"),
    ("export sft", "--min-reward", "0"),
    # deeprepo train: --out is a folder a run creates, like eval's.
    *(
        (cmd, "--out", v)
        for cmd in ("train sft", "train grpo")
        for v in ("-5", "0", "abc", "nan", "{missing}", "{dir}")
    ),
    # A name filter: text that matches some model names ("-5", "0") lists them.
    *(("models", "PATTERN", v) for v in BAD_VALUES),
    # The page's file name: any name in an existing folder (an existing file is rewritten).
    *(("view", "--output", v) for v in ("-5", "0", "abc", "nan", "{file}")),
    # analyze's result file (-o): the same, and a missing file in an existing folder.
    *(("analyze", "--output", v) for v in ("-5", "0", "abc", "nan", "{missing}", "{file}")),
    # A PNG goes where -o says, whatever its name (an existing file is replaced).
    *(
        (cmd, "--out", v)
        for cmd in ("plot bench", "plot training")
        for v in ("-5", "0", "abc", "nan", "{missing}", "{file}")
    ),
}


class Ran(Exception):
    """The command got past validation and started its real work."""


def _commands(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, cmd in group.commands.items():
        if getattr(cmd, "hidden", False):  # a deprecated alias: its command is swept
            continue
        full = f"{prefix}{name}"
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, full + " ")
        else:
            yield full, cmd


@pytest.fixture
def fixtures(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a-dir").mkdir()
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("not a directory\n")
    findings = tmp_path / "findings.json"
    findings.write_text("[]\n")
    results = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps({"example_id": "t1", "rollout": 0, "reward": 0.5}) + "\n")
        results.append(path)
    rollout = {
        "example_id": "t1",
        "reward": 0.5,
        "complete": True,
        "findings": 1,
        "system_prompt": "s",
        "first_user_message": "u",
        "trajectory": [{"index": 1, "reply": "r", "output": "o"}],
    }
    # A training config whose first heavy step is the expert's episodes (asyncio.run).
    (tmp_path / "train.toml").write_text("threads = 1\n[sft]\nsteps = 1\n[grpo]\nsteps = 1\n")
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "results.jsonl").write_text(json.dumps(rollout) + "\n")
    bench_toml = tmp_path / "bench.toml"
    bench_toml.write_text(
        f'[[repo]]\npath = "{EXAMPLE}"\n[[config]]\nname = "e"\nroot = "scripted/expert"\n'
        'sub = "static"\n'
    )
    bench_dir = tmp_path / "a-bench"
    bench_dir.mkdir()
    (bench_dir / "bench.json").write_text('{"configs": []}\n')
    train_log = tmp_path / "train.jsonl"
    train_log.write_text(
        "".join(
            json.dumps({"step": i, "reward_mean": 0.1 * i, "turns_mean": 5}) + "\n"
            for i in range(3)
        )
    )
    return {
        "eval": tmp_path / "eval",
        "train": tmp_path / "train.toml",
        "file": a_file,
        "dir": tmp_path / "a-dir",
        "missing": tmp_path / "no" / "such" / "thing",
        "findings": findings,
        "res_a": results[0],
        "res_b": results[1],
        "out": tmp_path / "out",
        "run": _run_folder(tmp_path / "run"),
        "bench_toml": bench_toml,
        "bench_dir": bench_dir,
        "train_log": train_log,
    }


def _run_folder(path: Path) -> Path:
    from deeprepo.testing.runfolder import write_run_folder

    write_run_folder(path)
    return path


def _base(command: str, fx: dict[str, Path]) -> tuple[list[str], list[str]]:
    """A valid invocation of ``command``: (positional arguments, options)."""
    return {
        "analyze": ([str(EXAMPLE)], ["--out", str(fx["out"])]),
        "single-call": ([str(EXAMPLE)], ["--model", "openai/x", "--out", str(fx["out"])]),
        "score": ([str(fx["findings"]), str(EXAMPLE_TRUTH)], []),
        "compare": ([str(fx["res_a"]), str(fx["res_b"])], []),
        "eval": ([], ["--generate", "small:seed=1", "--out", str(fx["out"])]),
        "tasks generate": ([str(fx["out"])], []),
        "export sft": ([str(fx["eval"]), str(fx["out"]) + ".jsonl"], []),
        # No checkpoint in the sweep: each value is refused before one would be loaded.
        "export checkpoint": ([str(fx["dir"]), str(fx["out"])], []),
        "train sft": ([str(fx["train"])], ["--out", str(fx["out"])]),
        "train grpo": ([str(fx["train"])], ["--out", str(fx["out"])]),
        "models": ([], []),
        # No run is logged in the test's home: a RUN is refused whatever the options say.
        "runs list": ([], []),
        "runs show": (["0123456789ab"], []),
        "runs export": (["0123456789ab"], []),
        "view": ([str(fx["run"])], []),
        "bench": ([str(fx["bench_toml"])], ["--out", str(fx["out"])]),
        "plot bench": ([str(fx["bench_dir"])], ["--out", str(fx["out"] / "b.png")]),
        "plot training": ([str(fx["train_log"])], ["--out", str(fx["out"] / "t.png")]),
        # --model is their only value: a bad one is refused before any download or server.
        "local setup": ([], []),
        "local serve": ([], []),
    }[command]


def _invoke(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, int, str]:
    try:
        main(argv)
    except Ran:
        return "ran", 0, capsys.readouterr().err
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
        return "exit", code, capsys.readouterr().err
    return "exit", 0, capsys.readouterr().err


def _stub_run(coro: Any, *args: Any, **kwargs: Any) -> Any:
    coro.close()
    raise Ran


def _cases() -> Iterator[tuple[str, str, int]]:
    """(command, option or argument name, argument position or -1) for every parameter
    that takes a value."""
    root = typer.main.get_command(app)
    for command, cmd in _commands(root):
        arguments = [p for p in cmd.params if isinstance(p, TyperArgument)]
        for param in cmd.params:
            if isinstance(param, TyperOption):
                if param.is_flag or param.hidden or param.name in ("help",):
                    continue
                flag = max((o for o in param.opts if o.startswith("--")), key=len)
                yield command, flag, -1
            elif isinstance(param, TyperArgument):
                yield command, (param.name or "ARG").upper(), arguments.index(param)


CASES = list(_cases())


def test_the_sweep_sees_every_command() -> None:
    commands = {c for c, _, _ in CASES}
    assert commands >= {
        "analyze",
        "single-call",
        "score",
        "compare",
        "eval",
        "tasks generate",
    }
    assert len(CASES) > 50


@pytest.mark.parametrize(
    ("command", "name", "position"), CASES, ids=[f"{c}:{n}" for c, n, _ in CASES]
)
def test_bad_values_are_one_line_and_exit_2(
    command: str,
    name: str,
    position: int,
    fixtures: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(asyncio, "run", _stub_run)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.chdir(fixtures["out"].parent)
    for raw in BAD_VALUES:
        value = raw.format(missing=fixtures["missing"], file=fixtures["file"], dir=fixtures["dir"])
        positional, options = _base(command, fixtures)
        if position >= 0:
            positional = [*positional[:position], value, *positional[position + 1 :]]
            # After "--" even "-5" is a value, not an option.
            argv = [*command.split(), *options, "--", *positional]
        else:
            if name in options:  # drop the value the base invocation gives
                i = options.index(name)
                options = options[:i] + options[i + 2 :]
            argv = [*command.split(), *positional, *options, f"{name}={value}"]
        outcome, code, err = _invoke(argv, capsys)
        where = f"{command} {name}={value!r}"
        assert "Traceback" not in err, where + "\n" + err
        if outcome == "ran" or code == 0:
            assert (command, name, raw) in ACCEPTED, f"{where} was accepted"
            continue
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2, f"{where}: exit {code}\n{err}"
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{where}:\n{err}"
