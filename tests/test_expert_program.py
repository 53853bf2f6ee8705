"""The scripted expert's helpers (``builtin/programs.py``), run as the REPL runs them: flow
groups that follow a value through a hop module, and the checks of doubtful findings."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from deeprepo.base.prompts import file_audit_prompt
from deeprepo.builtin import programs

ROUTE = """from app import service

def handler(request):
    name = request.args.get("name", "")
    return service.export(name)
""" + "\n".join(f"# route padding {i}" for i in range(40))

HOP = """from app import sink

def export(name):
    cleaned = name.strip()
    return sink.run_export(cleaned)
""" + "\n".join(f"# hop padding {i}" for i in range(40))

SINK = """import subprocess

def run_export(target):
    return subprocess.run("tar czf out.tgz " + target, shell=True)
""" + "\n".join(f"# sink padding {i}" for i in range(40))

CODEBASE = {"app/routes.py": ROUTE, "app/service.py": HOP, "app/sink.py": SINK}


def _namespace(
    answer: Callable[[str], list[dict[str, Any]] | None], parallel: int | None = 8
) -> dict[str, Any]:
    recorded: list[dict[str, Any]] = []

    def audit(path: str, start: int = 1, end: int | None = None) -> str:
        # As the sandbox's file_audit_prompt: the file, or lines start..end of it.
        lines = CODEBASE[path].split("\n")
        return file_audit_prompt(path, "\n".join(lines[start - 1 : end]), start)

    def batch(prompts: list[str]) -> list[str]:
        out = []
        for p in prompts:
            items = answer(p)
            out.append("[llm error] boom" if items is None else json.dumps({"findings": items}))
        return out

    ns: dict[str, Any] = {
        "codebase": CODEBASE,
        "file_audit_prompt": audit,
        "llm_batch": batch,
        "add_finding": lambda *a, **k: recorded.append({"args": a, **k}),
        "recorded": recorded,
        "VERIFY": True,
        "metadata": {"workers": {"model": "test", "parallel": parallel}},
    }
    exec(programs.HELPERS, ns)
    return ns


def test_flow_groups_follow_a_value_through_a_hop_module() -> None:
    ns = _namespace(lambda p: [])
    groups = ns["flow_jobs"](sorted(CODEBASE))
    assert any({"app/routes.py", "app/service.py", "app/sink.py"} <= set(g) for g in groups)
    assert ns["call_sites"]("app/sink.py", 4) == [("app/service.py", 5)]
    assert ns["call_sites"]("app/service.py", 5) == [("app/routes.py", 5)]


def _finding(path: str, line: int) -> dict[str, Any]:
    return {
        "file": path,
        "line": line,
        "kind": "command-injection",
        "title": "Shell",
        "cwe": "CWE-78",
    }


def test_checks_keep_confirmed_and_corroborated_findings_and_drop_the_rest() -> None:
    def answer(prompt: str) -> list[dict[str, Any]] | None:
        if not prompt.startswith("Check one"):
            return None
        # A worker that confirms the sink only when it sees where the value comes from.
        if "at line 4 of app/sink.py" in prompt and 'request.args.get("name"' in prompt:
            return [_finding("app/sink.py", 4)]
        return []

    ns = _namespace(answer)
    ns["record"]("app/sink.py", [_finding("app/sink.py", 4)], 1, 50)  # cross-file, real
    ns["record"]("app/service.py", [_finding("app/service.py", 30)], 1, 50)  # false
    for _ in range(2):  # reported by two prompts: corroborated, not re-asked
        ns["record"]("app/routes.py", [_finding("app/routes.py", 20)], 1, 50)
    doubtful, checks, kept, dropped = ns["verify_pending"]()
    assert (doubtful, kept, dropped) == (2, 2, 1)
    assert checks >= 4  # each doubtful finding at least twice, the sink with its callers
    assert sorted((f["file"], f["line"]) for f in ns["all_findings"]) == [
        ("app/routes.py", 20),
        ("app/sink.py", 4),
    ]
    assert ns["recorded"] == []  # checked findings wait for record_some, a cell's worth a go
    assert ns["record_some"](1) == 1 and len(ns["recorded"]) == 1
    assert ns["record_some"]() == 0 and len(ns["recorded"]) == 2


def test_a_finding_whose_checks_all_failed_is_kept() -> None:
    ns = _namespace(lambda p: None)
    ns["record"]("app/sink.py", [_finding("app/sink.py", 4)], 1, 50)
    assert ns["verify_pending"]()[2] == 1


def test_a_serial_worker_gets_one_check_per_finding() -> None:
    # A worker that answers one prompt at a time (a local model): each check costs a whole
    # answer, so a doubtful finding gets its first look only, and no caller chains.
    asked: list[str] = []

    def answer(prompt: str) -> list[dict[str, Any]]:
        asked.append(prompt)
        return [_finding("app/sink.py", 4)]

    parallel = _namespace(lambda p: [])
    assert len(parallel["verify_checks"](_finding("app/sink.py", 4))) >= 3
    ns = _namespace(answer, parallel=1)
    assert ns["SERIAL"] is True
    ns["record"]("app/sink.py", [_finding("app/sink.py", 4)], 1, 50)
    ns["record"]("app/service.py", [_finding("app/service.py", 30)], 1, 50)
    doubtful, checks, kept, dropped = ns["verify_pending"]()
    assert (doubtful, checks, kept, dropped) == (2, 2, 1, 1)
    assert len(asked) == 2 and all(p.startswith("Check one") for p in asked)


def test_no_metadata_means_not_serial() -> None:
    assert _namespace(lambda p: [], parallel=None)["SERIAL"] is False


def _pack_all_at_once(ns: dict[str, Any], jobs: list[tuple[str, int, int]]) -> Any:
    """The expert's packing as first written: every text, block and prompt held at once."""
    texts = [ns["file_audit_prompt"](p, s, e) for p, s, e in jobs]
    limit = min(max(ns["PACK_CHARS"], sum(map(len, texts)) // 1000), ns["PACK_CHARS_MAX"])
    groups: list[Any] = []
    size = 0
    for job, text in zip(jobs, texts, strict=True):
        block = text[text.find("<file path=") :]
        if groups and size + len(block) <= limit:
            groups[-1][0].append(job)
            groups[-1][1].append(block)
            size += len(block)
        else:
            groups.append(([job], [block], text[: text.find("<file path=")]))
            size = len(block)
    prompts = []
    for _, blocks, head in groups:
        if len(blocks) > 1:
            head += (
                'Several files follow: give each finding\'s "file" exactly as in its '
                "<file path>.\n\n"
            )
        prompts.append(head + "\n".join(blocks) + "\n")
    return [g[0] for g in groups], prompts


def test_packing_prompt_by_prompt_gives_the_prompts_packing_all_at_once_gave() -> None:
    # pack() joins each prompt as its group fills, so the kernel never holds the texts, the
    # blocks and the prompts together; the prompts and their groups must be the same.
    ns = _namespace(lambda prompt: [])
    sizes = [3, 400, 20, 1, 900, 60, 5, 250, 2, 2, 700, 30]
    for i, n in enumerate(sizes):
        CODEBASE[f"pkg/m{i:02d}.py"] = "\n".join(f"value_{i}_{k} = compute({k})" for k in range(n))
    try:
        jobs = [(p, 1, CODEBASE[p].count("\n") + 1) for p in sorted(CODEBASE)]
        expected = _pack_all_at_once(ns, jobs)
        assert len(expected[1]) > 2 and any(len(g) > 1 for g in expected[0])  # packs, splits
        assert ns["pack"](jobs) == expected
    finally:
        for i in range(len(sizes)):
            del CODEBASE[f"pkg/m{i:02d}.py"]
