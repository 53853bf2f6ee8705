"""The GPU recipes parse and name only keys their tools know.

- ``configs/gpu-*.toml`` (``deeprepo train grpo``): validated by the train config model
  when it is installed, and checked for the seed run's shape (128 episodes a step).
- ``environments/deeprepo_orchestration/configs/prime-rl-*.toml``: every key walked through
  prime-rl's config schema (``tests/data/prime_rl_schema.json``, extracted from its source
  by ``scripts/prime_rl_schema.py``; prime-rl itself needs Python 3.12 and GPUs) and, below
  ``env``, through the environment's own settings classes (read with ``ast``: verifiers is
  not installed in deeprepo's environment).
"""

from __future__ import annotations

import ast
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from clihelp import ROOT

GPU_RECIPES = sorted((ROOT / "configs").glob("gpu-*.toml"))
PRIME_RL = sorted(
    (ROOT / "environments" / "deeprepo_orchestration" / "configs").glob("prime-rl-*.toml")
)
SCHEMA = json.loads((ROOT / "tests" / "data" / "prime_rl_schema.json").read_text())
ENV_PKG = ROOT / "environments" / "deeprepo_orchestration" / "deeprepo_orchestration"
SCALARS = {"int", "float", "bool", "str", "Path", "Literal", "None", "Any", "dict", "list"}


def _class_fields(path: Path, name: str) -> set[str]:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
    raise AssertionError(f"{name} not found in {path}")


# The environment's settings (``--env.*``) and its taskset's; ``id`` is verifiers' own
# taskset key, ``root`` the seat (verifiers' AgentConfig, not checked further).
ENV_KEYS = _class_fields(ENV_PKG / "env.py", "OrchestrationEnvConfig") | {"taskset"}
TASKSET_KEYS = _class_fields(ENV_PKG / "taskset.py", "OrchestrationTasksetConfig") | {"id"}


class Schema:
    """prime-rl's classes, resolved through aliases, imports and bases."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.modules: dict[str, Any] = data["modules"]

    def resolve(self, module: str, name: str, depth: int = 0) -> list[tuple[str, str]]:
        """The config classes a name in ``module`` stands for (none for scalars)."""
        if depth > 20 or name in SCALARS:
            return []
        mod = self.modules.get(module)
        if mod is None:
            return []
        if name in mod["classes"]:
            return [(module, name)]
        if name in mod["aliases"]:
            return [c for n in mod["aliases"][name] for c in self.resolve(module, n, depth + 1)]
        target = mod["imports"].get(name)
        if target and target.startswith("prime_rl."):
            where, _, what = target.rpartition(".")
            return self.resolve(where, what, depth + 1)
        return []

    def fields(self, cls: tuple[str, str]) -> dict[str, tuple[str, list[str]]]:
        """Field name → (module, annotation names), the bases' fields included."""
        module, name = cls
        info = self.modules[module]["classes"][name]
        out: dict[str, tuple[str, list[str]]] = {}
        for base in info["bases"]:
            for b in self.resolve(module, base):
                out.update(self.fields(b))
        out.update({f: (module, names) for f, names in info["fields"].items()})
        return out


def _scalar_ok(value: Any, names: list[str]) -> bool:
    if any(n not in SCALARS for n in names) or not names or "Any" in names:
        return True  # a class or a name we do not model: the walk checks tables only
    if isinstance(value, bool):
        return "bool" in names
    if isinstance(value, int):
        return "int" in names or "float" in names
    if isinstance(value, float):
        return "float" in names
    if isinstance(value, str):
        return bool({"str", "Path", "Literal"} & set(names))
    return True


def prime_rl_errors(config: dict[str, Any]) -> list[str]:
    """Every key of ``config`` prime-rl (or the environment) would not know."""
    schema = Schema(SCHEMA)
    errors: list[str] = []

    def env_walk(table: dict[str, Any], where: str, keys: set[str]) -> None:
        for key, value in table.items():
            if key not in keys:
                errors.append(f"{where}.{key}: not a setting of the environment")
            elif key == "taskset" and isinstance(value, dict):
                env_walk(value, f"{where}.taskset", TASKSET_KEYS)

    def walk(table: dict[str, Any], where: str, classes: list[tuple[str, str]]) -> None:
        for key, value in table.items():
            path = f"{where}.{key}" if where else key
            found = [schema.fields(c)[key] for c in classes if key in schema.fields(c)]
            if not found:
                errors.append(f"{path}: no such key in {', '.join(n for _, n in classes)}")
                continue
            module, names = found[0]
            if "vf.EnvConfig" in names:
                env_walk(value, path, ENV_KEYS)
                continue
            subs = [c for n in names for c in schema.resolve(module, n)]
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, dict):
                    if subs:
                        walk(item, path, subs)
                elif not _scalar_ok(item, names):
                    errors.append(f"{path}: {item!r} does not fit {' | '.join(names)}")

    module, _, name = SCHEMA["root"].rpartition(".")
    walk(config, "", [(module, name)])
    return errors


def test_there_are_recipes() -> None:
    assert len(GPU_RECIPES) == 5 and len(PRIME_RL) == 1


def test_the_default_recipe_runs_without_vllm() -> None:
    """vLLM cannot reach every GPU machine (not the lent device): the default recipe
    generates with transformers; the vLLM ones say so in their names."""
    for path in GPU_RECIPES:
        uses_vllm = tomllib.loads(path.read_text())["grpo"]["use_vllm"]
        assert uses_vllm == path.stem.endswith("-vllm"), path.name
    assert (ROOT / "configs" / "gpu-qwen2.5-coder-0.5b.toml") in GPU_RECIPES


@pytest.mark.parametrize(
    "path", [*GPU_RECIPES, ROOT / "configs" / "device-smollm2.toml"], ids=lambda p: p.name
)
def test_every_gpu_recipe_says_what_has_run_and_what_has_not(path: Path) -> None:
    header = path.read_text().split("\noutput_dir")[0]
    if path.name.startswith("device-"):
        assert "NOT YET RUN on a GPU" in header
    else:
        assert "# Has run: " in header and "# Has not run: " in header


@pytest.mark.parametrize("path", PRIME_RL, ids=lambda p: p.name)
def test_prime_rl_config_keys_exist_in_prime_rl_and_the_environment(path: Path) -> None:
    config = tomllib.loads(path.read_text())
    assert prime_rl_errors(config) == []
    # The seed run's shape: 128 rollouts a step, 8 per example, LoRA, two GPUs.
    assert config["orchestrator"]["batch_size"] == 128
    assert config["orchestrator"]["group_size"] == 8
    assert config["trainer"]["model"]["lora"]["rank"] >= 8
    assert config["inference"]["vllm"]["enable_lora"] is True
    assert (
        config["inference"]["vllm"]["max_lora_rank"] >= config["trainer"]["model"]["lora"]["rank"]
    )
    deployment = config["deployment"]
    assert deployment["num_train_gpus"] + deployment["num_infer_gpus"] == 2
    [source] = config["orchestrator"]["train"]["source"]
    assert source["env"]["taskset"]["id"] == "deeprepo-orchestration"


def test_the_prime_rl_check_catches_misspelt_and_mistyped_keys() -> None:
    config = tomllib.loads(PRIME_RL[0].read_text())
    config["orchestrator"]["batchsize"] = 128
    config["trainer"]["model"]["lora"]["rank"] = "thirty-two"
    config["orchestrator"]["train"]["source"][0]["env"]["max_turn"] = 5
    config["orchestrator"]["train"]["source"][0]["env"]["taskset"]["sizes"] = "small"
    errors = prime_rl_errors(config)
    assert len(errors) == 4, errors
    assert any(e.startswith("orchestrator.batchsize: no such key") for e in errors)
    assert any(e.startswith("trainer.model.lora.rank: 'thirty-two'") for e in errors)
    assert any("env.max_turn: not a setting" in e for e in errors)
    assert any("taskset.sizes: not a setting" in e for e in errors)


@pytest.mark.parametrize("path", GPU_RECIPES, ids=lambda p: p.name)
def test_trl_recipe_has_the_seed_runs_shape(path: Path) -> None:
    config = tomllib.loads(path.read_text())
    assert config["device"] == "cuda"
    grpo = config["grpo"]
    assert grpo["group_size"] == 8 and grpo["group_size"] * grpo["prompts_per_step"] == 128
    assert config["model"]["lora"] is True
    # Training loads checkpoint folders; GGUF weights are converted once beforehand
    # (`deeprepo export checkpoint`), so a GPU machine needs no gguf package.
    assert not config["model"]["name"].startswith("gguf:")
    assert config["episode"]["max_context_tokens"] >= config["episode"]["max_new_tokens"] * 4


@pytest.mark.parametrize("path", GPU_RECIPES, ids=lambda p: p.name)
def test_trl_recipe_validates_against_the_train_config_model(path: Path) -> None:
    config_module = pytest.importorskip(
        "deeprepo.rl.train.config", reason="the train config model (branch train-grpo) is not here"
    )
    config = config_module.load_config(path, need="grpo")
    assert config.grpo is not None and config.sft is not None
    assert config.device == "cuda"
