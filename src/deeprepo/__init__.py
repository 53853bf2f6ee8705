"""deeprepo: analyse a code repository with the Recursive Language Model pattern.

A root LLM writes Python in a sandboxed REPL that holds the repository as data
and delegates focused reading to cheap sub-LLM workers (``llm_query`` /
``llm_batch``). See ``docs/`` for the user guide, ``docs/architecture.md`` for the
layers and ``docs/decisions.md`` for the design decisions.

The library's public face is this module (the analyser) and ``deeprepo.rl`` (the
research stack)::

    import asyncio
    from deeprepo import AnalyzeOptions, analyze

    handle = asyncio.run(analyze(AnalyzeOptions("path/to/repo")))
    print(handle.result.complete, len(handle.result.findings), handle.out_dir)

Every name is imported on first use, so ``import deeprepo`` loads nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from deeprepo.base.version import VERSION as __version__

#: Public name → the module that defines it.
_EXPORTS: dict[str, str] = {
    # running an analysis
    "analyze": "deeprepo.run.analyze",
    "AnalyzeOptions": "deeprepo.run.analyze",
    "RunHandle": "deeprepo.run.analyze",
    "run_baseline": "deeprepo.run.baseline",
    "BaselineOptions": "deeprepo.run.baseline",
    "RunLimits": "deeprepo.run.wiring",
    "CallSettings": "deeprepo.run.wiring",
    "resume": "deeprepo.run.analyze",
    "build_model": "deeprepo.run.models",
    # the offline engine
    "POLICIES": "deeprepo.builtin.scripted",
    "make_policy": "deeprepo.builtin.scripted",
    "make_static_worker": "deeprepo.builtin",
    "ROOT_SYSTEM_PROMPTS": "deeprepo.base.prompts",
    "file_audit_prompt": "deeprepo.base.prompts",
    "StaticWorker": "deeprepo.builtin.static",
    "default_models": "deeprepo.run.models",
    # records
    "RunResult": "deeprepo.base.records",
    "Turn": "deeprepo.base.records",
    "Behaviour": "deeprepo.base.records",
    "StopReason": "deeprepo.base.records",
    "Finding": "deeprepo.base.finding",
    "Usage": "deeprepo.base.chat",
    "Message": "deeprepo.base.chat",
    "ChatRequest": "deeprepo.base.chat",
    "Completion": "deeprepo.base.chat",
    "record_lines": "deeprepo.base.jsonl",
    "read_objects": "deeprepo.base.jsonl",
    "ChatModel": "deeprepo.base.chat",
    # errors
    "DeeprepoError": "deeprepo.base.errors",
    "UsageError": "deeprepo.base.errors",
    "CodebaseError": "deeprepo.base.errors",
    "ConfigError": "deeprepo.base.errors",
    "MissingKeyError": "deeprepo.base.errors",
    "ProviderError": "deeprepo.base.errors",
    "BudgetExceeded": "deeprepo.base.errors",
    "SandboxError": "deeprepo.base.errors",
    # the parts a run is made of
    "Codebase": "deeprepo.codebase.model",
    "classify_scope": "deeprepo.codebase.scope",
    "IgnoreRules": "deeprepo.codebase.ignore",
    "load_codebase": "deeprepo.codebase.loader",
    "codebase_from_files": "deeprepo.codebase.loader",
    "ModelSpec": "deeprepo.providers.spec",
    "parse_model_spec": "deeprepo.providers.spec",
    "PriceTable": "deeprepo.providers.prices",
    "Ledger": "deeprepo.providers.ledger",
    "Budget": "deeprepo.providers.budget",
    "MeteredModel": "deeprepo.providers.metered",
    "SubDispatcher": "deeprepo.providers.dispatch",
    "ERROR_PREFIX": "deeprepo.providers.dispatch",
    "UsageRow": "deeprepo.providers.ledger",
    "OpenAICompatModel": "deeprepo.providers.openai_compat",
    "FastOpenAIModel": "deeprepo.providers.fast_http",
    "FastAnthropicModel": "deeprepo.providers.fast_http",
    "Episode": "deeprepo.orchestrator.episode",
    "EpisodeConfig": "deeprepo.orchestrator.episode",
    "SandboxConfig": "deeprepo.sandbox.config",
    "Kernel": "deeprepo.sandbox.kernel",
    "KernelPool": "deeprepo.sandbox.pool",
    "bwrap_problem": "deeprepo.sandbox.isolation",
    "resolve_mode": "deeprepo.sandbox.isolation",
    "analyze_architecture": "deeprepo.architecture",
    # grading and outputs
    "grade": "deeprepo.findings.grading",
    "GroundTruthEntry": "deeprepo.findings.grading",
    "parse_ground_truth": "deeprepo.findings.grading",
    "load_findings": "deeprepo.findings.grading",
    "load_ground_truth": "deeprepo.findings.grading",
    "CoverageIndex": "deeprepo.findings.coverage",
    "covered_files": "deeprepo.findings.coverage",
    "write_viewer": "deeprepo.report.viewer",
}

__all__ = [
    "ERROR_PREFIX",
    "POLICIES",
    "ROOT_SYSTEM_PROMPTS",
    "AnalyzeOptions",
    "BaselineOptions",
    "Behaviour",
    "Budget",
    "BudgetExceeded",
    "CallSettings",
    "ChatModel",
    "ChatRequest",
    "Codebase",
    "CodebaseError",
    "Completion",
    "ConfigError",
    "CoverageIndex",
    "DeeprepoError",
    "Episode",
    "EpisodeConfig",
    "FastAnthropicModel",
    "FastOpenAIModel",
    "Finding",
    "GroundTruthEntry",
    "IgnoreRules",
    "Kernel",
    "KernelPool",
    "Ledger",
    "Message",
    "MeteredModel",
    "MissingKeyError",
    "ModelSpec",
    "OpenAICompatModel",
    "PriceTable",
    "ProviderError",
    "RunHandle",
    "RunLimits",
    "RunResult",
    "SandboxConfig",
    "SandboxError",
    "StaticWorker",
    "StopReason",
    "SubDispatcher",
    "Turn",
    "Usage",
    "UsageError",
    "UsageRow",
    "__version__",
    "analyze",
    "analyze_architecture",
    "build_model",
    "bwrap_problem",
    "classify_scope",
    "codebase_from_files",
    "covered_files",
    "default_models",
    "file_audit_prompt",
    "grade",
    "load_codebase",
    "load_findings",
    "load_ground_truth",
    "make_policy",
    "make_static_worker",
    "parse_ground_truth",
    "parse_model_spec",
    "read_objects",
    "record_lines",
    "resolve_mode",
    "resume",
    "run_baseline",
    "write_viewer",
]

if TYPE_CHECKING:
    from deeprepo.architecture import analyze_architecture
    from deeprepo.base.chat import ChatModel, ChatRequest, Completion, Message, Usage
    from deeprepo.base.errors import (
        BudgetExceeded,
        CodebaseError,
        ConfigError,
        DeeprepoError,
        MissingKeyError,
        ProviderError,
        SandboxError,
        UsageError,
    )
    from deeprepo.base.finding import Finding
    from deeprepo.base.jsonl import read_objects, record_lines
    from deeprepo.base.prompts import ROOT_SYSTEM_PROMPTS, file_audit_prompt
    from deeprepo.base.records import Behaviour, RunResult, StopReason, Turn
    from deeprepo.builtin import make_static_worker
    from deeprepo.builtin.scripted import POLICIES, make_policy
    from deeprepo.builtin.static import StaticWorker
    from deeprepo.codebase.ignore import IgnoreRules
    from deeprepo.codebase.loader import codebase_from_files, load_codebase
    from deeprepo.codebase.model import Codebase
    from deeprepo.codebase.scope import classify_scope
    from deeprepo.findings.coverage import CoverageIndex, covered_files
    from deeprepo.findings.grading import (
        GroundTruthEntry,
        grade,
        load_findings,
        load_ground_truth,
        parse_ground_truth,
    )
    from deeprepo.orchestrator.episode import Episode, EpisodeConfig
    from deeprepo.providers.budget import Budget
    from deeprepo.providers.dispatch import ERROR_PREFIX, SubDispatcher
    from deeprepo.providers.fast_http import FastAnthropicModel, FastOpenAIModel
    from deeprepo.providers.ledger import Ledger, UsageRow
    from deeprepo.providers.metered import MeteredModel
    from deeprepo.providers.openai_compat import OpenAICompatModel
    from deeprepo.providers.prices import PriceTable
    from deeprepo.providers.spec import ModelSpec, parse_model_spec
    from deeprepo.report.viewer import write_viewer
    from deeprepo.run.analyze import AnalyzeOptions, RunHandle, analyze, resume
    from deeprepo.run.baseline import BaselineOptions, run_baseline
    from deeprepo.run.models import build_model, default_models
    from deeprepo.run.wiring import CallSettings, RunLimits
    from deeprepo.sandbox.config import SandboxConfig
    from deeprepo.sandbox.isolation import bwrap_problem, resolve_mode
    from deeprepo.sandbox.kernel import Kernel
    from deeprepo.sandbox.pool import KernelPool


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
