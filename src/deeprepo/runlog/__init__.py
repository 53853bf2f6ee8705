"""The run log: every ``analyze`` / ``baseline`` run, its turns and LLM calls, in SQLite.

``db`` opens the file and migrates it, ``recorder`` writes runs (a row at the start, the
run's own records at the end, as ``rows`` lays them out), ``query`` reads them back for
``deeprepo runs``.
"""

from __future__ import annotations

from deeprepo.runlog.db import MIGRATIONS, Migration, connect, data_home, log_path, migrate
from deeprepo.runlog.query import find_run, list_runs, open_log, process_gone, run_record
from deeprepo.runlog.recorder import NO_LOG_ENV, RunLogWarning, RunRecorder
from deeprepo.runlog.rows import run_status

__all__ = [
    "MIGRATIONS",
    "NO_LOG_ENV",
    "Migration",
    "RunLogWarning",
    "RunRecorder",
    "connect",
    "data_home",
    "find_run",
    "list_runs",
    "log_path",
    "migrate",
    "open_log",
    "process_gone",
    "run_record",
    "run_status",
]
