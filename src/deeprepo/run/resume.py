"""What a run folder holds to be continued (``deeprepo analyze --resume RUN_DIR``, which
:func:`deeprepo.run.analyze.resume` runs).

A run killed mid-way (SIGKILL, a crash, a dead provider) left every completed turn
in its trajectory, and its ``start`` record holds the options it ran with. Resuming
rebuilds the same run: the repository is loaded again (it must be unchanged), the
completed turns' code runs again in a fresh kernel to rebuild its variables (their
sub-calls are answered by the response cache), the recorded root replies are fed
instead of asking the root again, and the loop goes on from the next turn,
appending to the same trajectory. The spend recorded up to the last completed turn
is carried over, so budgets and ``metrics.json`` cover the whole run.

What a resumed run cannot know: the calls of the turn that was in progress at the
crash. Those that completed are in the cache (not paid twice) but their tokens are
missing from the totals; they show as cached calls.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from deeprepo.base.chat import Usage
from deeprepo.base.errors import UsageError
from deeprepo.base.records import Turn
from deeprepo.providers.ledger import Ledger, LLMCall, UsageRow
from deeprepo.report.trajectory import drop_torn_tail, read_trajectory
from deeprepo.run.options import LIMIT_FIELDS, AnalyzeOptions
from deeprepo.run.trust import GUARDED_OPTIONS, narrowed_limits, refuse_foreign, sealed
from deeprepo.run.wiring import RunLimits

__all__ = ["FIXED_OPTIONS", "SavedRun", "load_run", "options_from_record"]

#: Options that define the run: a resumed run keeps them (giving another value is an error).
FIXED_OPTIONS = (
    "path",
    "rev",
    "root",
    "sub",
    "prompt",
    "out_dir",
    "include_scopes",
    "exclude_scopes",
)
_PATH_OPTIONS = ("cache_dir", "out_dir", "prices_file")
#: More calls than a run records (each is rebuilt in memory on resume): an edited folder.
MAX_RECORDED_CALLS = 1_000_000


@dataclass(frozen=True)
class SavedRun:
    """What a run directory's trajectory says about the run (see :func:`load_run`)."""

    run_dir: Path
    start: dict[str, Any]
    turns: list[Turn]
    ledger: list[UsageRow]  # usage rows as they stood after the last completed turn
    ended: dict[str, Any] | None  # the ``end`` record, when the run stopped for good

    @property
    def trajectory(self) -> Path:
        return self.run_dir / "trajectory.jsonl"

    def check_codebase(self, fingerprint: str) -> None:
        """Refuse to replay code against a repository that changed since the run."""
        recorded = self.start.get("codebase_sha256")
        # A record without one could name any folder (the user's home) as its repository.
        if recorded != fingerprint:
            raise UsageError(
                f"the repository at {self.start.get('path')} changed since the run in "
                f"{self.run_dir} started, so its turns cannot be replayed; start a new run "
                "(cached sub-calls of unchanged files still cost nothing)"
            )

    def carry_over(self, ledger: Ledger) -> None:
        """Put the spend recorded before the crash into ``ledger``.

        Each usage row becomes as many calls as it counted: the first carries all of
        its tokens and dollars, the others keep ``calls``, ``cached_calls`` and
        ``failed_calls`` right, so totals and budgets go on from where the run was.
        """
        for row in self.ledger:
            kinds = ["billed"] * max(0, row.calls - row.cached_calls - row.failed_calls)
            kinds += ["failed"] * row.failed_calls + ["cached"] * row.cached_calls
            for i, kind in enumerate(kinds):
                ledger.record(
                    LLMCall(
                        row.role,
                        row.model,
                        row.usage if i == 0 else Usage(),
                        row.cost_usd if i == 0 else 0.0,
                        cached=kind == "cached",
                        error="failed before the run was resumed" if kind == "failed" else None,
                    )
                )
            for _ in range(row.failed_requests):
                ledger.record_failure(row.role, row.model)

    def prepare_trajectory(self) -> None:
        """Cut a record the crash left half-written, so appended records stay whole."""
        drop_torn_tail(self.trajectory)


def _turn_from(record: dict[str, Any], path: Path) -> Turn:
    names = [f.name for f in fields(Turn)]
    try:
        values = {n: record[n] for n in names if n in record}
        return Turn(**values)
    except TypeError as exc:
        raise UsageError(
            f"{path} holds a turn record deeprepo cannot read ({exc}); start a new run instead"
        ) from None


def _usage_row(row: dict[str, Any], path: Path) -> UsageRow:
    try:
        return UsageRow.from_dict(row)
    except ValueError as exc:
        raise UsageError(
            f"{path} holds a usage row deeprepo cannot read ({exc}); start a new run instead"
        ) from None


def _check_appendable(path: Path) -> None:
    """Refuse a log a resume would append to (or cut) that is not a plain file of its own:
    a link or a second name planted in a run folder would make the writes land elsewhere."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        what = "a link" if stat.S_ISLNK(st.st_mode) else "not a plain file of its own"
        raise UsageError(
            f"{path} is {what}, so resuming would write elsewhere; it was not written by "
            "deeprepo: start a new run"
        )


def load_run(run_dir: Path) -> SavedRun:
    """Read ``run_dir/trajectory.jsonl``: the run's start, its completed turns, its spend.

    Raises :class:`UsageError` when there is nothing to resume: no trajectory, one
    written without the options a resume needs, or a run that already has its answer.
    """
    path = run_dir / "trajectory.jsonl"
    if not path.is_file():
        raise UsageError(
            f"{run_dir} holds no trajectory.jsonl; pass the --out directory of the run to resume"
        )
    for name in ("trajectory.jsonl", "calls.jsonl"):
        _check_appendable(run_dir / name)
    records = read_trajectory(path)
    starts = [i for i, r in enumerate(records) if r.get("type") == "start"]
    if not starts:
        raise UsageError(f"{path} has no start record; it cannot be resumed, start a new run")
    records = records[starts[-1] :]  # older versions appended reruns to one file
    start = records[0]
    if not isinstance(start.get("options"), dict):
        raise UsageError(
            f"{path} was written by a deeprepo without resume support; run the same command "
            "again instead (completed calls are answered by the response cache)"
        )
    turns: list[Turn] = []
    ledger: list[UsageRow] = []
    ended: dict[str, Any] | None = None
    for record in records[1:]:
        kind = record.get("type")
        if kind == "turn":
            turn = _turn_from(record, path)
            if turn.index != len(turns) + 1:
                raise UsageError(
                    f"{path} has turn {turn.index} after turn {len(turns)}; it was edited or "
                    "mixes runs, so it cannot be resumed"
                )
            turns.append(turn)
        elif kind == "end":
            ended = record
        elif kind == "resume":
            ended = None
        if kind in ("turn", "end") and isinstance(record.get("ledger"), list):
            ledger = [_usage_row(row, path) for row in record["ledger"] if isinstance(row, dict)]
    recorded_calls = sum(row.calls + row.failed_requests for row in ledger)
    if recorded_calls > MAX_RECORDED_CALLS:
        raise UsageError(
            f"{path} records {recorded_calls:,} model calls, more than any run makes; it was "
            "edited, so it cannot be resumed: start a new run"
        )
    if ended is not None and ended.get("stop_reason") == "answer_ready":
        raise UsageError(
            f"the run in {run_dir} already finished with an answer; its report is "
            f"{run_dir / 'report.md'}"
        )
    return SavedRun(run_dir, start, turns, ledger, ended)


def options_from_record(
    saved: SavedRun, env: Mapping[str, str], overrides: Mapping[str, Any] | None = None
) -> AnalyzeOptions:
    """The run's options from its start record; ``overrides`` (budgets, timeouts, base
    URLs …) replace recorded values, except :data:`FIXED_OPTIONS`, which must match.

    A folder without this user's seal (see :mod:`deeprepo.run.trust`) may not choose an
    endpoint, a provider, a path or the sandbox: each must be what this command would
    choose or be passed explicitly (else :class:`UsageError` names it), and its limits
    hold only where they are tighter than the defaults."""
    recorded: dict[str, Any] = dict(saved.start["options"])
    known = ({f.name for f in fields(AnalyzeOptions)} | set(LIMIT_FIELDS)) - {"env", "limits"}
    kwargs = {k: v for k, v in recorded.items() if k in known}
    trusted = sealed(saved.start, env)
    if not trusted:
        refuse_foreign(recorded, overrides or {}, env, f"the run folder {saved.run_dir}")
        kwargs.update(narrowed_limits(recorded))
        for name, _flag in GUARDED_OPTIONS:  # nothing recorded: this command's default
            if kwargs.get(name) is None:
                kwargs.pop(name, None)
    for name, value in (overrides or {}).items():
        if name not in known:
            raise UsageError(f"--resume cannot set {name!r}")
        # A foreign folder's path is another machine's: the fingerprint proves the code.
        if name in FIXED_OPTIONS and (trusted or name != "path"):
            same = (
                os.path.abspath(str(value)) == os.path.abspath(str(recorded.get(name)))
                if name in ("path", "out_dir")
                else _plain(value) == _plain(recorded.get(name))
            )
            if not same:
                flag = "PATH" if name == "path" else "--" + name.replace("_", "-")
                raise UsageError(
                    f"{flag} is part of the run being resumed ({recorded.get(name)!r}); drop it, "
                    "or start a new run to change it"
                )
            continue
        kwargs[name] = value
    for name in _PATH_OPTIONS:
        if kwargs.get(name) is not None:
            kwargs[name] = Path(kwargs[name])
    for name in ("include_scopes", "exclude_scopes"):
        kwargs[name] = tuple(kwargs.get(name) or ())
    kwargs["out_dir"] = saved.run_dir
    limits = {name: kwargs.pop(name) for name in LIMIT_FIELDS if name in kwargs}
    try:
        return AnalyzeOptions(**kwargs, limits=RunLimits(**limits), env=dict(env))
    except TypeError as exc:
        raise UsageError(f"{saved.trajectory} has options deeprepo cannot read: {exc}") from None


def _plain(value: Any) -> Any:
    """Recorded JSON holds lists where options hold tuples."""
    return list(value) if isinstance(value, tuple | list) else value
