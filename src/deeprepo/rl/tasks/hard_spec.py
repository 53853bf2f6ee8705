"""The hard tier's names, apart from its generator so that parsing a ``--generate`` SPEC or a
config does not import the generator."""

from __future__ import annotations

__all__ = ["BUDGET_KEY", "HARD_LANGS", "HARD_SIZE", "TASK_FILE"]

HARD_SIZE = "hard"
"""The tier's size name, beside ``spec.SIZES``."""
HARD_LANGS: tuple[str, ...] = ("python", "js")
"""The hard tier's languages (it makes its own services side by side, so no ``mixed``)."""
TASK_FILE = "task.json"
"""Beside ``ground_truth.json``: the task's sub-call budget, read back by the environment."""
BUDGET_KEY = "sub_call_budget"
"""The key of the budget in ``task.json``, ``index.json`` and ``Task.metadata``."""
