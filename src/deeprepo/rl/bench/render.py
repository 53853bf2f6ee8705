"""``bench.md``: the bench's tables in markdown, from the ``bench.json`` object.

Names and reasons are escaped (:func:`deeprepo.report.text.md_text`): a reason can quote a
model's or a repository's text."""

from __future__ import annotations

from typing import Any

from deeprepo.report.text import md_text

__all__ = ["render_markdown", "status_line"]


def _usd(v: float | None) -> str:
    if v is None:
        return "unknown"
    return f"${v:.4f}" if v < 1 else f"${v:,.2f}"


def _num(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.{digits}f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _table(head: list[str], rows: list[list[str]], right_from: int = 1) -> list[str]:
    align = ["---" if i < right_from else "---:" for i in range(len(head))]
    return [
        "| " + " | ".join(head) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def status_line(data: dict[str, Any]) -> str:
    t = data["totals"]
    if data["complete"]:
        return f"complete · {t['runs']} of {t['cells']} cells finished"
    parts = [f"{t['failed']} failed"] if t["failed"] else []
    if t["skipped"]:
        parts.append(f"{t['skipped']} skipped (max_cost spent)")
    if data["interrupted"]:
        parts.append("interrupted")
    return f"PARTIAL · {t['runs']} of {t['cells']} cells finished: {', '.join(parts)}"


def _main_table(configs: list[dict[str, Any]]) -> list[str]:
    head = [
        "configuration", "models", "runs", "complete", "root $", "sub $", "total $", "$/run",
        "sub-calls", "files via sub-LLM", "findings", "unique finds", "turns", "wall s",
        "behaviour",
    ]  # fmt: skip
    rows = []
    for c in configs:
        cost = c["cost"]
        files = _num(c["files_covered_mean"])
        if c["files_covered_mean"] is not None and c["mode"] == "baseline":
            files += " (direct)"
        rows.append(
            [
                md_text(c["name"]),
                md_text(c["models"]),
                f"{c['runs']}/{c['cells']}",
                str(c["complete_runs"]),
                _usd(cost["root_usd"]),
                _usd(cost["sub_usd"]),
                _usd(cost["total_usd"]),
                _usd(cost["mean_total_usd"]),
                _num(c["sub_calls_mean"]) if c["mode"] == "rlm" else "n/a",
                files,
                _num(c["findings_mean"]),
                "-" if c["unique_finds"] is None else str(c["unique_finds"]),
                _num(c["turns_mean"]),
                _num(c["wall_seconds_mean"]),
                md_text(c["behaviour"]),
            ]
        )
    return _table(head, rows, right_from=2)


def _grading_tables(configs: list[dict[str, Any]]) -> list[str]:
    graded = [c for c in configs if c["grading"]]
    if not graded:
        return []
    rows = [
        [
            md_text(c["name"]),
            str(c["grading"]["graded_runs"]),
            str(c["grading"]["tp"]),
            str(c["grading"]["fp"]),
            str(c["grading"]["fn"]),
            f"{c['grading']['precision']:.3f}",
            f"{c['grading']['recall']:.3f}",
            f"{c['grading']['f1']:.3f}",
        ]
        for c in graded
    ]
    lines = [
        "",
        "## Against ground truth",
        "",
        "Counts summed over the graded runs (repositories with a ground truth).",
        "",
        *_table(
            ["configuration", "graded runs", "TP", "FP", "FN", "precision", "recall", "F1"], rows
        ),
        "",
        "### Per CWE family (F1, with TP/FP/FN)",
        "",
    ]
    families = sorted({f for c in graded for f in c["grading"]["per_family"]})
    fam_rows = []
    for fam in families:
        row = [md_text(fam)]
        for c in graded:
            r = c["grading"]["per_family"].get(fam)
            row.append("-" if r is None else f"{r['f1']:.2f} ({r['tp']}/{r['fp']}/{r['fn']})")
        fam_rows.append(row)
    lines += _table(["family", *(md_text(c["name"]) for c in graded)], fam_rows)
    return lines


def _economics(data: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Economics (projection)",
        "",
        "The first row of each configuration is its mean run as measured; the others are a "
        "projection, not a measurement: the sub-LLM cost at N sub-calls is N × the measured "
        "mean cost per billed sub-call; the root cost is held at the measured mean per run "
        "(a root that dispatches more also pays for more turns, so the totals are lower "
        "bounds).",
        "",
    ]
    rows = []
    for c in data["configs"]:
        e = c["economics"]
        src = f"{e['runs']} run(s), {e['measured_sub_calls']:,} sub-calls"
        if not e["rows"]:
            rows.append([md_text(c["name"]), src, "-", "-", "-", "-", md_text(e.get("note", ""))])
            continue
        measured = [{**e["measured"], "label": f"{_num(e['measured']['sub_calls'])} (measured)"}]
        for r in measured + e["rows"]:
            rows.append(
                [
                    md_text(c["name"]),
                    src,
                    r.get("label") or f"{r['sub_calls']:,}",
                    _usd(r["sub_cost_usd"]),
                    _usd(r["root_cost_usd"]),
                    _usd(r["total_cost_usd"]),
                    _pct(r["sub_share"]),
                ]
            )
    head = ["configuration", "from", "sub-calls", "sub-LLM $", "root $", "total $", "sub share"]
    return lines + _table(head, rows, right_from=2)


def _judge(data: dict[str, Any]) -> list[str]:
    if not data.get("judge_model"):
        return []
    rows = []
    for c in data["configs"]:
        j = c["judge"] or {}
        rows.append(
            [
                md_text(c["name"]),
                str(j.get("judged", 0)),
                str(j.get("errors", 0)),
                _num(j.get("overall_mean"), 2),
                _usd(j.get("cost_usd")),
            ]
        )
    return [
        "",
        f"## Judge ({md_text(data['judge_model'])})",
        "",
        "Rubric scores 0-10 (accuracy, depth, coverage, actionability, clarity); the judge's "
        "cost is not in the configurations' costs.",
        "",
        *_table(["configuration", "judged", "errors", "overall (mean)", "judge $"], rows),
    ]


def _problems(data: dict[str, Any]) -> list[str]:
    bad = [c for c in data["cells"] if c["status"] != "done"]
    if not bad:
        return []
    rows = [
        [md_text(c["config"]), md_text(c["repo"]), str(c["rep"]), c["status"], md_text(c["reason"])]
        for c in bad
    ]
    return [
        "",
        "## Cells without a finished run",
        "",
        "Rerun the same command to run them again; finished cells are kept.",
        "",
        *_table(["configuration", "repository", "rep", "status", "why"], rows, right_from=5),
    ]


def render_markdown(data: dict[str, Any]) -> str:
    t = data["totals"]
    repos = ", ".join(
        md_text(r["id"]) + (" (ground truth)" if r["ground_truth"] else "") for r in data["repos"]
    )
    judge = ""
    if t["judge_cost_usd"] is not None:
        judge = f"; the judge cost {_usd(t['judge_cost_usd'])} more, apart"
    lines = [
        "# Bench",
        "",
        f"**{md_text(status_line(data))}**",
        "",
        f"- source: {md_text(data['source'])}",
        f"- repositories: {repos}",
        f"- repetitions: {data['settings']['repetitions']}; cells: {t['cells']} "
        f"({t['reused']} reused from an earlier invocation)",
        f"- spent: {_usd(t['cost_usd'])} (root {_usd(t['root_cost_usd'])}, sub "
        f"{_usd(t['sub_cost_usd'])}): the sum of the runs' ledgers{judge}",
        "",
        "## Configurations",
        "",
        "Per configuration over its finished runs: costs summed, other figures the mean per "
        "run. Unique finds: distinct findings (same file, CWE family, start line within "
        f"±{data['settings']['tolerance']}) no other configuration made on that repository.",
        "",
        *_main_table(data["configs"]),
        *_grading_tables(data["configs"]),
        *_economics(data),
        *_judge(data),
        *_problems(data),
        "",
    ]
    return "\n".join(lines)
