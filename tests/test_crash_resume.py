"""Crash safety: ``kill -9`` of a real ``deeprepo analyze`` at turn 3 of 5 loses no
completed turn, and neither running the same command again nor ``--resume RUN_DIR``
repeats a root or sub request of turns 1-3 (the loopback server counts them)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clihelp import EXAMPLE, ROOT, loopback_analyze_args, run_cli

from deeprepo.base.chat import Usage
from deeprepo.base.errors import UsageError
from deeprepo.providers.ledger import Ledger, UsageRow
from deeprepo.report.trajectory import drop_torn_tail, read_trajectory, set_aside
from deeprepo.run.analyze import AnalyzeOptions, analyze, resume
from deeprepo.run.resume import SavedRun, load_run, options_from_record
from deeprepo.testing.loopback import LoopbackServer, RecordedRequest, Reply

ROOT_LATENCY_S = 0.8
PROMPTS_PER_TURN = 4
SUB_USAGE = Usage(input_tokens=700, output_tokens=40)
ENV = {"ANTHROPIC_API_KEY": "test-root-key", "OPENROUTER_API_KEY": "test-sub-key"}
TAG = re.compile(r"#turn(\d+)-item\d+")


def root_usage(turn: int) -> Usage:
    return Usage(input_tokens=1000 * turn, output_tokens=50 + turn, cache_read_tokens=10 * turn)


def turn_reply(turn: int) -> str:
    """Turns 1-4 dispatch tagged prompts, keep a variable and record a finding; turn 5
    answers from the variables of turns 1-4, so it only works on a rebuilt kernel."""
    if turn == 5:
        code = (
            "total = kept_1 + kept_2 + kept_3 + kept_4\n"
            "print('total', total)\n"
            "set_answer(f'# Report\\n\\ntotal={total}')"
        )
    else:
        code = (
            "paths = sorted(codebase)\n"
            f"replies = llm_batch([file_audit_prompt(paths[i]) + '\\n#turn{turn}-item' + str(i) "
            f"for i in range({PROMPTS_PER_TURN})])\n"
            f"kept_{turn} = {turn} * 100 + sum(r.startswith('[llm error]') for r in replies)\n"
            f"add_finding(paths[{turn}], {turn}, 'test', 'low', 'finding of turn {turn}')\n"
            f"print('turn {turn}', len(replies), {{len(r) for r in replies}}, kept_{turn})"
        )
    return f"Turn {turn}.\n\n```python\n{code}\n```\n"


def reply_fn(route: str, body: dict[str, Any]) -> Reply:
    if route == "anthropic":
        turn = (len(body["messages"]) + 1) // 2
        return Reply(turn_reply(turn), usage=root_usage(turn), delay_s=ROOT_LATENCY_S)
    return Reply('{"findings": []}', usage=SUB_USAGE)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(reply_fn=reply_fn, ttl_s=180.0) as srv:
        yield srv


def cli_args(srv: LoopbackServer, out: Path) -> list[str]:
    return loopback_analyze_args(srv, out)


def request_turn(req: RecordedRequest) -> int:
    """The turn a request belongs to: from the conversation length (root) or the tag (sub)."""
    assert req.body is not None
    if req.route == "anthropic":
        return (len(req.body["messages"]) + 1) // 2
    found = TAG.search(req.text)
    assert found, req.text[-200:]
    return int(found.group(1))


def turns_of(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_trajectory(path) if r["type"] == "turn"]


def kill_at_turn(srv: LoopbackServer, out: Path, turns: int) -> list[dict[str, Any]]:
    """Start the CLI, SIGKILL it as soon as ``turns`` turns are on disk; the records then."""
    env = {**os.environ, **ENV, "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deeprepo", *cli_args(srv, out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    trajectory = out / "trajectory.jsonl"
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if trajectory.exists() and len(turns_of(trajectory)) >= turns:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    raw = trajectory.read_bytes()
    # Every record reached the disk whole: the kill came while waiting on the root.
    lines = raw.decode().splitlines()
    assert raw.endswith(b"\n") and all(json.loads(line) for line in lines)
    records = [json.loads(line) for line in lines]
    assert [r["type"] for r in records] == ["start"] + ["turn"] * turns
    return records


def check_killed_turns(records: list[dict[str, Any]]) -> None:
    turns = records[1:]
    assert [t["index"] for t in turns] == [1, 2, 3]
    for t in turns:
        n = t["index"]
        assert t["error"] is None and t["sub_calls"] == PROMPTS_PER_TURN
        assert t["output"] == f"turn {n} {PROMPTS_PER_TURN} {{16}} {n * 100}"
        assert t["input_tokens"] == root_usage(n).input_tokens
        # The ledger after each turn: root calls so far, and every sub-call billed once.
        rows = {row["role"]: row for row in t["ledger"]}
        assert rows["root"]["calls"] == n
        assert rows["sub"]["calls"] == n * PROMPTS_PER_TURN
        assert rows["sub"]["input_tokens"] == n * PROMPTS_PER_TURN * SUB_USAGE.input_tokens


def check_completed(out: Path) -> dict[str, Any]:
    m: dict[str, Any] = json.loads((out / "metrics.json").read_text())
    assert m["stop_reason"] == "answer_ready" and m["turns"] == 5 and not m["salvaged"]
    assert m["findings"] == 4  # turns 1-4 each recorded one, replayed turns included
    assert "total=1000" in (out / "report.md").read_text()  # 100+200+300+400
    return m


@pytest.mark.e2e
def test_kill_then_the_same_command_repeats_no_completed_request(
    server: LoopbackServer, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    check_killed_turns(kill_at_turn(server, out, 3))
    first = len(server.requests)

    proc = run_cli(*cli_args(server, out), env=ENV)
    assert proc.returncode == 3, proc.stderr  # answered; the scripted root audits a few files
    again = server.requests[first:]
    assert sorted({request_turn(r) for r in again}) in ([4, 5], [5])
    assert not [r for r in again if request_turn(r) <= 3]
    m = check_completed(out)
    root = next(u for u in m["usage"] if u["role"] == "root")
    assert root["calls"] == 5 and root["cached_calls"] >= 3

    # The killed run's records were moved aside, not mixed into the new trajectory.
    old = read_trajectory(out / "trajectory.prev.jsonl")
    assert [r["type"] for r in old] == ["start", "turn", "turn", "turn"]
    new = read_trajectory(out / "trajectory.jsonl")
    assert [r["type"] for r in new] == ["start"] + ["turn"] * 5 + ["end"]
    assert [t["output"] for t in new[1:4]] == [t["output"] for t in old[1:]]


@pytest.mark.e2e
def test_kill_then_resume_replays_without_calling_and_keeps_the_ledger_exact(
    server: LoopbackServer, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    check_killed_turns(kill_at_turn(server, out, 3))
    first = len(server.requests)
    # The killed run's page, from what reached the disk.
    view = run_cli("view", str(out))
    assert view.returncode == 0, view.stderr
    page = (out / "trajectory.html").read_text()
    assert "NOT FINISHED" in page and all(f'id="turn-{n}"' in page for n in (1, 2, 3))

    proc = run_cli("analyze", "--resume", str(out), env=ENV)
    assert proc.returncode == 3, proc.stderr  # answered; the scripted root audits a few files
    again = server.requests[first:]
    assert sorted(request_turn(r) for r in again if r.route == "anthropic") == [4, 5]
    assert not [r for r in again if request_turn(r) <= 3]
    assert len([r for r in again if r.route == "openai"]) == PROMPTS_PER_TURN

    m = check_completed(out)
    records = read_trajectory(out / "trajectory.jsonl")
    kinds = ["start"] + ["turn"] * 3 + ["resume"] + ["turn"] * 2 + ["end"]
    assert [r["type"] for r in records] == kinds
    assert [r["index"] for r in records if r["type"] == "turn"] == [1, 2, 3, 4, 5]
    assert records[4]["replayed_turns"] == 3 and records[-1]["replay_mismatches"] == []
    page = (out / "trajectory.html").read_text()
    assert page.count('<details class="turn"') == 5 and '<div class="resume">' in page

    # Nothing lost, nothing counted twice: the totals are what the server billed for the
    # five root turns and the 16 sub-calls, across both processes.
    rows = {u["role"]: u for u in m["usage"]}
    billed_root = sum((root_usage(n) for n in range(1, 6)), Usage())
    assert (rows["root"]["input_tokens"], rows["root"]["output_tokens"]) == (
        billed_root.input_tokens,
        billed_root.output_tokens,
    )
    assert rows["root"]["cache_read_tokens"] == billed_root.cache_read_tokens
    assert rows["root"]["calls"] == 5 and rows["root"]["cached_calls"] == 0
    sub_billed = 4 * PROMPTS_PER_TURN
    assert rows["sub"]["input_tokens"] == sub_billed * SUB_USAGE.input_tokens
    assert rows["sub"]["output_tokens"] == sub_billed * SUB_USAGE.output_tokens
    # The replay asked the cache for turns 1-3 again: counted as cached calls, at no cost.
    assert rows["sub"]["cached_calls"] == 3 * PROMPTS_PER_TURN
    assert rows["sub"]["calls"] == sub_billed + 3 * PROMPTS_PER_TURN
    assert m["sub_calls"] == sub_billed  # prompts the episode dispatched: replayed ones once
    # The replayed turns' calls count once, as if the run had never stopped.
    b = m["behaviour"]
    assert b["batch_sizes"] == [PROMPTS_PER_TURN] * 4 and b["llm_query_calls"] == 0
    assert b["turns_with_sub_calls"] == 4 and b["answer_turn"] == 5

    # A finished run has nothing left to resume.
    done = run_cli("analyze", "--resume", str(out), env=ENV)
    assert done.returncode == 2 and "already finished" in done.stderr


# ---------------------------------------------------------------- in-process: determinism,
# resuming a stopped run, and the trajectory helpers


def library_options(srv: LoopbackServer, out: Path, cache: Path, **kw: Any) -> AnalyzeOptions:
    return AnalyzeOptions(
        path=str(EXAMPLE),
        root="anthropic/test-root",
        sub="openrouter/test/sub",
        root_base_url=srv.anthropic_base_url,
        sub_base_url=srv.openai_base_url,
        cache_dir=cache,
        out_dir=out,
        env=ENV,
        **kw,
    )


@pytest.mark.e2e
async def test_a_rerun_is_answered_from_the_cache_though_output_shows_sets_and_addresses(
    tmp_path: Path,
) -> None:
    """Set order (string hashing) and default reprs (addresses) differ between processes;
    the kernel's fixed hash seed and the masked addresses keep the root's requests equal."""
    cells = [
        "tops = {p.split('/')[0] for p in codebase} | {'a', 'b', 'c', 'd', 'e', 'f'}\n"
        "print(tops, frozenset(sorted(codebase)[:6]))",
        "print(object(), len, (x for x in ()), 'PYTHONHASHSEED' in __import__('os').environ)",
        "set_answer('done')",
    ]

    def reply(route: str, body: dict[str, Any]) -> Reply:
        if route == "openai":
            return Reply('{"findings": []}', usage=SUB_USAGE)
        turn = (len(body["messages"]) + 1) // 2
        return Reply(f"```python\n{cells[turn - 1]}\n```", usage=root_usage(turn))

    with LoopbackServer(reply_fn=reply, ttl_s=60.0) as srv:
        first = await analyze(library_options(srv, tmp_path / "a", tmp_path / "cache"))
        asked = len(srv.requests)
        second = await analyze(library_options(srv, tmp_path / "b", tmp_path / "cache"))
        assert len(srv.requests) == asked == 3  # the rerun asked the server nothing
    out = first.result.turns[1].output
    assert re.fullmatch(
        r"<object object at 0x…> <built-in function len> <generator object <genexpr> at 0x…> False",
        out,
    )
    assert [t.output for t in second.result.turns] == [t.output for t in first.result.turns]


@pytest.mark.e2e
async def test_a_run_stopped_by_a_dead_root_is_resumed_with_a_higher_budget(tmp_path: Path) -> None:
    down = {"root": True}

    def reply(route: str, body: dict[str, Any]) -> Reply:
        if route == "openai":
            return Reply('{"findings": []}', usage=SUB_USAGE)
        turn = (len(body["messages"]) + 1) // 2
        if turn == 3 and down["root"]:
            return Reply(status=400, error_message="scripted outage")
        return Reply(turn_reply(turn), usage=root_usage(turn))

    out = tmp_path / "run"
    with LoopbackServer(reply_fn=reply, ttl_s=60.0) as srv:
        stopped = await analyze(library_options(srv, out, tmp_path / "cache"))
        assert (stopped.result.stop_reason, stopped.result.num_turns) == ("error", 2)
        asked = len(srv.requests)
        down["root"] = False
        done = await resume(out, overrides={"max_turns": 8}, env=ENV)
        again = srv.requests[asked:]
    assert done.result.stop_reason == "answer_ready" and done.result.num_turns == 5
    assert sorted(request_turn(r) for r in again if r.route == "anthropic") == [3, 4, 5]
    assert not [r for r in again if request_turn(r) <= 2]
    root = next(u for u in done.result.usage if u["role"] == "root")
    # The failed request of the first process is carried over; every billed token once.
    assert root["input_tokens"] == sum(root_usage(n).input_tokens for n in range(1, 6))
    assert (root["calls"], root["failed_requests"]) == (5, 1)
    records = read_trajectory(out / "trajectory.jsonl")
    kinds = ["start", "turn", "turn", "end", "resume", "turn", "turn", "turn", "end"]
    assert [r["type"] for r in records] == kinds
    assert records[4]["options"]["max_turns"] == 8 and records[0]["options"]["max_turns"] == 20


def test_a_torn_last_record_is_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.jsonl"
    path.write_text('{"type": "start"}\n{"type": "turn", "index": 1}\n{"type": "tu')
    assert drop_torn_tail(path) == len('{"type": "tu')
    assert drop_torn_tail(path) == 0
    assert path.read_text() == '{"type": "start"}\n{"type": "turn", "index": 1}\n'
    path.write_text("x" * 100_000)  # one torn line and nothing else
    assert drop_torn_tail(path) == 100_000 and path.read_bytes() == b""


def test_an_earlier_run_is_set_aside_never_overwritten(tmp_path: Path) -> None:
    assert set_aside(tmp_path) == []
    for n in range(3):
        (tmp_path / "trajectory.jsonl").write_text(f"run {n}\n")
        (tmp_path / "report.md").write_text(f"report {n}\n")
        moved = set_aside(tmp_path)
        assert len(moved) == 2 and not (tmp_path / "trajectory.jsonl").exists()
    assert (tmp_path / "trajectory.prev.jsonl").read_text() == "run 0\n"
    assert (tmp_path / "trajectory.prev2.jsonl").read_text() == "run 1\n"
    assert (tmp_path / "report.prev3.md").read_text() == "report 2\n"


def saved_run(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in records)
    (tmp_path / "trajectory.jsonl").write_text(text)
    return tmp_path


def test_carried_over_spend_matches_the_recorded_rows() -> None:
    rows = [
        {"role": "root", "model": "anthropic/r", "calls": 3, "cached_calls": 1, "failed_calls": 1,
         "failed_requests": 2, "input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 7,
         "cache_write_tokens": 1, "cost_usd": 0.25},
        {"role": "sub", "model": "openrouter/s", "calls": 4, "cached_calls": 0, "failed_calls": 0,
         "failed_requests": 0, "input_tokens": 40, "output_tokens": 8, "cache_read_tokens": 0,
         "cache_write_tokens": 0, "cost_usd": None},
    ]  # fmt: skip
    ledger = Ledger()
    SavedRun(Path("."), {}, [], [UsageRow.from_dict(r) for r in rows], None).carry_over(ledger)
    assert [r.to_dict() for r in ledger.rows()] == rows
    assert ledger.total_cost() is None and ledger.known_cost() == 0.25


def test_what_cannot_be_resumed_says_why(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"holds no trajectory\.jsonl"):
        load_run(tmp_path / "nothing")
    old = saved_run(tmp_path / "old", [{"type": "start", "path": "x"}])
    with pytest.raises(UsageError, match="without resume support"):
        load_run(old)
    start: dict[str, Any] = {
        "type": "start",
        "options": {"path": str(EXAMPLE), "root": "scripted/expert"},
    }
    turn: dict[str, Any] = {"type": "turn", "index": 2, "reply": "", "code_blocks": [], "output": "",
            "error": None, "sub_calls": 0, "findings_added": 0, "answer_ready": False,
            "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
            "cache_write_tokens": 0, "cost_usd": None, "seconds": 0.1}  # fmt: skip
    with pytest.raises(UsageError, match="has turn 2 after turn 0"):
        load_run(saved_run(tmp_path / "gap", [start, turn]))
    ended: list[dict[str, Any]] = [start, {"type": "end", "stop_reason": "answer_ready"}]
    with pytest.raises(UsageError, match="already finished with an answer"):
        load_run(saved_run(tmp_path / "done", ended))
    # A run that stopped for another reason can go on, with budgets raised.
    saved = load_run(
        saved_run(
            tmp_path / "budget", [start, {**turn, "index": 1}, ended[1] | {"stop_reason": "budget"}]
        )
    )
    # Built by hand, so not sealed by this user: the repository must be named again.
    options = options_from_record(
        saved, {}, {"max_cost": 2.5, "root": "scripted/expert", "path": str(EXAMPLE)}
    )
    assert (options.limits.max_cost, options.root, options.out_dir) == (
        2.5,
        "scripted/expert",
        saved.run_dir,
    )
    with pytest.raises(UsageError, match="--root is part of the run being resumed"):
        options_from_record(saved, {}, {"root": "anthropic/other", "path": str(EXAMPLE)})
    with pytest.raises(UsageError, match="changed since the run"):
        SavedRun(tmp_path, {"codebase_sha256": "abc"}, [], [], None).check_codebase("def")


def test_a_malformed_usage_row_in_a_run_folder_is_one_line(tmp_path: Path) -> None:
    """A run folder is untrusted: a usage row that is not counts refuses the resume with a
    message, never a traceback or a carried-over spend made up from it."""
    start: dict[str, Any] = {"type": "start", "options": {"path": str(EXAMPLE)}}
    bad = {"role": "root", "model": "m", "calls": "many"}
    with pytest.raises(UsageError, match="holds a usage row deeprepo cannot read"):
        load_run(
            saved_run(
                tmp_path / "bad", [start, {"type": "end", "stop_reason": "budget", "ledger": [bad]}]
            )
        )
