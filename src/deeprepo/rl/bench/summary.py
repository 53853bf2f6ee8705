"""A bench's figures, computed from its cells' run folders: per configuration cost (root,
sub, total), sub-calls, files audited, findings, unique finds, turns, wall time, behaviour,
grading against ground truth (per configuration and per CWE family), the judge's scores,
and the economics projection. Everything here reads finished runs; nothing is estimated
except the projection, which says so."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from deeprepo.base.version import VERSION
from deeprepo.findings.grading import Counts, grade
from deeprepo.rl.bench.runner import BenchPlan, CellResult
from deeprepo.rl.bench.unique import unique_finds

__all__ = ["PROJECTION_SUB_CALLS", "SCHEMA_VERSION", "economics", "summarize"]

SCHEMA_VERSION = 1
PROJECTION_SUB_CALLS = (10, 100, 1000, 10000)


def _role_cost(metrics: dict[str, Any], role: str) -> float | None:
    """The run's ledger cost for one role: None when any of its rows is unpriced."""
    total = 0.0
    for row in metrics.get("usage") or []:
        if row.get("role") != role:
            continue
        if row.get("cost_usd") is None:
            return None
        total += float(row["cost_usd"])
    return total


def _billed_sub_calls(metrics: dict[str, Any]) -> int:
    return sum(
        int(r.get("calls", 0)) - int(r.get("cached_calls", 0))
        for r in metrics.get("usage") or []
        if r.get("role") == "sub"
    )


def _sum(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _behaviour(metrics: dict[str, Any]) -> str | None:
    b = metrics.get("behaviour")
    label = b.get("label") if isinstance(b, dict) else None
    return str(label) if label else None


def _label_summary(labels: list[str | None]) -> str:
    """The runs' behaviour labels: one label, ``a 2, b 1`` when mixed, ``-`` when absent."""
    counts = Counter(x for x in labels if x)
    if not counts:
        return "-"
    if len(counts) == 1 and sum(counts.values()) == len(labels):
        return next(iter(counts))
    parts = [f"{k} {n}" for k, n in counts.most_common()]
    missing = len(labels) - sum(counts.values())
    return ", ".join(parts + ([f"- {missing}"] if missing else []))


def economics(
    runs: int, root_cost: float | None, sub_cost: float | None, billed_sub_calls: int
) -> dict[str, Any]:
    """The seeds' projection for one configuration: sub-LLM cost at N sub-calls from the
    measured mean cost per billed sub-call, root cost held at the measured mean per run."""
    base: dict[str, Any] = {"runs": runs, "measured_sub_calls": billed_sub_calls, "rows": []}
    if runs == 0 or root_cost is None or sub_cost is None:
        base["note"] = "no measured runs" if runs == 0 else "cost unknown (a model has no price)"
        return base
    root_mean = root_cost / runs
    per_call = sub_cost / billed_sub_calls if billed_sub_calls else None
    base.update(root_cost_per_run=root_mean, sub_cost_per_call=per_call)
    measured_total = (root_cost + sub_cost) / runs
    base["measured"] = {  # the seeds' "(actual)" row: the mean run as it was
        "sub_calls": billed_sub_calls / runs,
        "sub_cost_usd": sub_cost / runs,
        "root_cost_usd": root_mean,
        "total_cost_usd": measured_total,
        "sub_share": sub_cost / runs / measured_total if measured_total > 0 else None,
    }
    if per_call is None:
        base["note"] = "no billed sub-calls measured"
        return base
    for n in PROJECTION_SUB_CALLS:
        sub = n * per_call
        total = sub + root_mean
        base["rows"].append(
            {
                "sub_calls": n,
                "sub_cost_usd": sub,
                "root_cost_usd": root_mean,
                "total_cost_usd": total,
                "sub_share": sub / total if total > 0 else None,
            }
        )
    return base


def _cell_record(r: CellResult, plan: BenchPlan) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "config": r.cell.config.name,
        "repo": r.cell.repo.id,
        "rep": r.cell.rep,
        "dir": str(r.cell.dir),
        "status": r.status,
        "reason": r.reason,
        "reused": r.reused,
    }
    m = r.metrics
    if r.status == "done" and m is not None:
        rec.update(
            stop_reason=m.get("stop_reason"),
            complete=bool(m.get("complete")),
            cost_usd=m.get("total_cost_usd"),
            root_cost_usd=_role_cost(m, "root"),
            sub_cost_usd=_role_cost(m, "sub"),
            sub_calls=int(m.get("sub_calls", 0)),
            billed_sub_calls=_billed_sub_calls(m),
            files_covered=int(m.get("files_covered", 0)),
            coverable_files=int(m.get("coverable_files", 0)),
            findings=len(r.findings),
            turns=int(m.get("turns", 0)),
            wall_seconds=float(m.get("wall_seconds", 0.0)),
            behaviour=_behaviour(m),
        )
        truth = plan.ground_truth.get(r.cell.repo.id)
        if truth is not None:
            score = grade(r.findings, truth, tolerance=plan.bench.bench.tolerance)
            rec["grading"] = {
                **score.rates(),
                "per_family": {f.family: f.rates() for f in score.per_family},
            }
    elif m is not None:  # a failed run still cost what its ledger says
        rec.update(
            cost_usd=m.get("total_cost_usd"),
            root_cost_usd=_role_cost(m, "root"),
            sub_cost_usd=_role_cost(m, "sub"),
        )
    if r.judge is not None:
        rec["judge"] = r.judge.to_dict()
    return rec


def _grading(cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    graded = [c["grading"] for c in cells if "grading" in c]
    if not graded:
        return None
    tp, fp, fn = (sum(g[k] for g in graded) for k in ("tp", "fp", "fn"))
    fams: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for g in graded:
        for fam, rates in g["per_family"].items():
            for j, k in enumerate(("tp", "fp", "fn")):
                fams[fam][j] += rates[k]
    return {
        **Counts(tp, fp, fn).rates(),
        "graded_runs": len(graded),
        "per_family": {f: Counts(*v).rates() for f, v in sorted(fams.items())},
    }


def _config_record(
    name: str, results: list[CellResult], cells: list[dict[str, Any]], unique: int | None
) -> dict[str, Any]:
    c = results[0].cell.config
    done = [x for x in cells if x["status"] == "done"]
    root = _sum(x["root_cost_usd"] for x in done)
    sub = _sum(x["sub_cost_usd"] for x in done)
    total = _sum(x["cost_usd"] for x in done)
    judged = [x["judge"] for x in cells if "judge" in x]
    overall = [float(j["overall"]) for j in judged if j.get("overall") is not None]
    return {
        "name": name,
        "mode": c.mode,
        "models": c.models(),
        "root": c.root if c.mode == "rlm" else c.model,
        "sub": c.sub if c.mode == "rlm" else None,
        "prompt": c.prompt if c.mode == "rlm" else None,
        "cells": len(cells),
        "runs": len(done),
        "failed": sum(x["status"] == "failed" for x in cells),
        "skipped": sum(x["status"] == "skipped" for x in cells),
        "complete_runs": sum(bool(x["complete"]) for x in done),
        "cost": {
            "root_usd": root,
            "sub_usd": sub,
            "total_usd": total,
            "mean_total_usd": None if total is None or not done else total / len(done),
        },
        "sub_calls_mean": _mean([x["sub_calls"] for x in done]),
        "files_covered_mean": _mean([x["files_covered"] for x in done]),
        "coverable_files_mean": _mean([x["coverable_files"] for x in done]),
        "findings_mean": _mean([x["findings"] for x in done]),
        "unique_finds": unique,
        "turns_mean": _mean([x["turns"] for x in done]),
        "wall_seconds_mean": _mean([x["wall_seconds"] for x in done]),
        "behaviour": _label_summary([x["behaviour"] for x in done]),
        "grading": _grading(done),
        "judge": None
        if not judged
        else {
            "judged": len(overall),
            "errors": sum(bool(j.get("error")) for j in judged),
            "overall_mean": _mean(overall),
            "cost_usd": _sum(j.get("cost_usd") for j in judged),
        },
        "economics": economics(len(done), root, sub, sum(x["billed_sub_calls"] for x in done)),
    }


def summarize(
    plan: BenchPlan, results: list[CellResult], *, interrupted: bool = False
) -> dict[str, Any]:
    """The whole bench as the JSON object written to ``bench.json``."""
    tol = plan.bench.bench.tolerance
    cells = [_cell_record(r, plan) for r in results]
    # Unique finds, per repository, over every configuration with a finished run there;
    # a configuration never compared with another (alone on its repositories) has none.
    unique_by_config: dict[str, int] = {}
    for repo in plan.repos:
        by_config: dict[str, list[Any]] = defaultdict(list)
        for r in results:
            if r.cell.repo.id == repo.id and r.status == "done":
                by_config[r.cell.config.name].extend(r.findings)
        if len(by_config) < 2:
            continue
        for name, found in unique_finds(by_config, tol).items():
            unique_by_config[name] = unique_by_config.get(name, 0) + len(found)
    configs = []
    for c in plan.bench.config:
        idx = [i for i, r in enumerate(results) if r.cell.config.name == c.name]
        configs.append(
            _config_record(
                c.name,
                [results[i] for i in idx],
                [cells[i] for i in idx],
                unique_by_config.get(c.name),
            )
        )
    done = [x for x in cells if x["status"] == "done"]
    failed = [x for x in cells if x["status"] == "failed"]
    spent = [x.get("cost_usd") for x in cells if "cost_usd" in x]
    judge_costs = [x["judge"].get("cost_usd") for x in cells if "judge" in x]
    return {
        "schema_version": SCHEMA_VERSION,
        "deeprepo_version": VERSION,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": str(plan.source),
        "out_dir": str(plan.out_dir),
        "complete": len(done) == len(cells) and not interrupted,
        "interrupted": interrupted,
        "settings": plan.bench.bench.model_dump(),
        "judge_model": plan.judge.name if plan.judge else None,
        "repos": [
            {
                "id": r.id,
                "path": str(r.path),
                "ground_truth": str(r.ground_truth) if r.ground_truth else None,
            }
            for r in plan.repos
        ],
        "totals": {
            "cells": len(cells),
            "runs": len(done),
            "failed": len(failed),
            "skipped": sum(x["status"] == "skipped" for x in cells),
            "reused": sum(bool(x["reused"]) for x in cells),
            # every run's ledger, failed ones included: money spent is money spent
            "cost_usd": _sum(spent),
            "root_cost_usd": _sum(x.get("root_cost_usd") for x in cells if "cost_usd" in x),
            "sub_cost_usd": _sum(x.get("sub_cost_usd") for x in cells if "cost_usd" in x),
            "judge_cost_usd": _sum(judge_costs) if judge_costs else None,
        },
        "projection_sub_calls": list(PROJECTION_SUB_CALLS),
        "configs": configs,
        "cells": cells,
    }
