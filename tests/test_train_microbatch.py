"""GRPO at GPU scale: micro-batching, gradient checkpointing and generation through vLLM.

What is proved here, on CPU with the tiny model (``train/tiny.py``):

* ``[grpo] micro_batch_size`` maps onto TRL 1.16 so that one optimizer step still covers
  ``prompts_per_step`` tasks × ``group_size`` rollouts, generated once (one rollout call per
  step, the same prompts, the same rewards per group), and the accumulated gradient of the
  first step equals the one-pass gradient within float tolerance; gradient checkpointing
  gives the same gradient too, with and without LoRA.
* ``use_vllm = true`` generates through an object with exactly the interface of TRL 1.16's
  ``VLLMGeneration.generate`` (no vLLM here: it needs CUDA wheels and a GPU), and the rollout
  function builds ``prompt_ids``/``completion_ids``/``logprobs``/``env_mask`` from its output.
* The memory benchmark (``benchmarks/bench_grpo_memory.py``) shows the peak falling.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the train extra is not installed: pip install -e '.[train]'")
pytest.importorskip("trl", reason="the train extra is not installed: pip install -e '.[train]'")

from clihelp import ROOT

from deeprepo.base.errors import ConfigError
from deeprepo.rl.env.tasks import TaskSpec, generate_tasks_in_memory
from deeprepo.rl.train.config import TrainConfig, load_config
from deeprepo.rl.train.grpo import build_trainer, check_vllm, grpo_arguments
from deeprepo.rl.train.models import library_warnings_off, load_policy, quiet
from deeprepo.rl.train.policy import generate_vllm
from deeprepo.rl.train.rollouts import PART_METRICS, EpisodeRollouts
from deeprepo.rl.train.tiny import build_tiny_model

SMOKE = ROOT / "configs" / "smoke.toml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.toml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- config and TRL's arguments


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[grpo]\ngroup_size = 4\nprompts_per_step = 3\nmicro_batch_size = 5\n",
            "grpo: micro_batch_size = 5 must divide group_size × prompts_per_step = 12 (TRL "
            "splits a step into equal micro-batches); one of 1, 2, 3, 4, 6, 12",
        ),
        ("[grpo]\nmicro_batch_size = 0\n", "grpo.micro_batch_size: Input should be greater"),
        ("[grpo]\nuse_vllm = true\n", 'grpo.use_vllm = true needs device = "cuda"'),
        (
            "device = 'cuda'\n[episode]\nmax_context_tokens = 4096\nmax_new_tokens = 512\n"
            "[grpo]\nuse_vllm = true\nvllm_max_model_len = 4096\n",
            "grpo.vllm_max_model_len = 4,096 is shorter than the longest request a rollout "
            "makes (episode.max_context_tokens + max_new_tokens = 4,608)",
        ),
        ("[grpo]\nvllm_gpu_memory_utilization = 1.5\n", "vllm_gpu_memory_utilization"),
    ],
)
def test_config_refuses_what_trl_would_reject_in_one_line(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, text), need="grpo")
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.e2e  # loads TRL's trainer (seconds)
def test_micro_batching_maps_onto_trl_as_one_generation_per_optimizer_step(
    tmp_path: Path,
) -> None:
    from trl import GRPOConfig

    config = load_config(
        _write(tmp_path, "[grpo]\ngroup_size = 8\nprompts_per_step = 16\nmicro_batch_size = 4\n"),
        need="grpo",
    )
    with library_warnings_off():
        args = GRPOConfig(**grpo_arguments(config, tmp_path / "trl"))
    assert args.per_device_train_batch_size == 4 and args.gradient_accumulation_steps == 32
    # TRL derives these: the whole step's 128 rollouts are one generation batch.
    assert args.steps_per_generation == 32 and args.generation_batch_size == 128
    assert args.num_generations == 8 and not args.gradient_checkpointing and not args.use_vllm

    # Unset, the whole step is one pass, as before micro-batching existed (the smoke config).
    smoke = load_config(SMOKE, need="grpo")
    assert smoke.grpo is not None and smoke.grpo.micro_batch_size is None
    with library_warnings_off():
        args = GRPOConfig(**grpo_arguments(smoke, tmp_path / "trl"))
    assert args.per_device_train_batch_size == 4 and args.gradient_accumulation_steps == 1
    assert args.generation_batch_size == 4


def test_vllm_arguments_and_the_missing_vllm_refusal(tmp_path: Path) -> None:
    text = (
        "device = 'cuda'\n[episode]\nmax_context_tokens = 8192\nmax_new_tokens = 512\n"
        "[grpo]\nuse_vllm = true\nvllm_gpu_memory_utilization = 0.4\ngradient_checkpointing = true\n"
    )
    config = load_config(_write(tmp_path, text), need="grpo")
    args = grpo_arguments(config, tmp_path)
    assert args["use_vllm"] and args["vllm_mode"] == "colocate"
    assert args["vllm_gpu_memory_utilization"] == 0.4
    assert args["vllm_max_model_length"] == 8192 + 512 and args["max_completion_length"] == 512
    assert args["gradient_checkpointing"]
    assert args["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(ConfigError, match=r"needs vllm, which is not installed here"):
            check_vllm(config)


@pytest.mark.parametrize(
    "path", sorted((ROOT / "configs").glob("gpu-*.toml")), ids=lambda p: p.name
)
def test_gpu_recipes_micro_batch_checkpoint_and_generate_with_vllm(path: Path) -> None:
    """The one-pass step ran out of memory on an H100: the recipes must not go back to it.
    The ``-vllm`` recipes generate with vLLM; the default one with transformers."""
    config = load_config(path, need="grpo")
    grpo = config.grpo
    assert grpo is not None and grpo.rollouts_per_step == 128
    assert grpo.micro_batch_size is not None and grpo.micro_batch <= 4
    assert grpo.accumulation_steps * grpo.micro_batch == 128
    assert grpo.gradient_checkpointing and config.device == "cuda"
    assert grpo.use_vllm == path.stem.endswith("-vllm")
    args = grpo_arguments(config, Path("unused"))
    if grpo.use_vllm:
        assert args["vllm_max_model_length"] == (
            config.episode.max_context_tokens + config.episode.max_new_tokens
        )
    else:
        assert not args.get("use_vllm")


# ------------------------------------------------------------------------------ the trainer


def _config(tmp_path: Path, **grpo: Any) -> TrainConfig:
    base = load_config(SMOKE, need="grpo")
    assert base.grpo is not None
    return base.model_copy(
        update={
            "output_dir": str(tmp_path),
            "sft": None,
            "threads": 1,
            "grpo": base.grpo.model_copy(
                update={"steps": 1, "max_grad_norm": 1e6, "lr": 1e-3, **grpo}
            ),
        }
    )


class Replay:
    """A rollout function returning fixed multi-turn sequences (model and environment tokens,
    rewards that differ inside each group), so two trainers see exactly the same batch."""

    def __init__(self, vocab: int, seed: int = 0) -> None:
        import random

        self.rng = random.Random(seed)
        self.vocab = vocab
        self.calls: list[list[str]] = []
        self.cache: dict[int, dict[str, list[Any]]] = {}

    def _make(self, prompts: list[str]) -> dict[str, list[Any]]:
        rng, out = self.rng, {}
        rows: dict[str, list[Any]] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs")}
        rows["env_mask"] = []
        for _ in prompts:
            rows["prompt_ids"].append(
                [rng.randrange(5, self.vocab) for _ in range(rng.randint(8, 20))]
            )
            ids: list[int] = []
            mask: list[int] = []
            for turn in range(rng.randint(1, 3)):
                n_model, n_env = rng.randint(4, 24), rng.randint(2, 10) if turn else 0
                ids += [rng.randrange(5, self.vocab) for _ in range(n_env + n_model)]
                mask += [0] * n_env + [1] * n_model
            rows["completion_ids"].append(ids)
            rows["env_mask"].append(mask)
            rows["logprobs"].append([-1.0] * len(ids))
        out.update(rows)
        out["deeprepo_reward"] = [rng.random() for _ in prompts]
        out["format_reward"] = [0.0 for _ in prompts]
        for name in PART_METRICS:
            out[name] = [0.0 for _ in prompts]
        return out

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        step = int(trainer.state.global_step)
        self.calls.append([str(p) for p in prompts])
        if step not in self.cache:
            self.cache[step] = self._make([str(p) for p in prompts])
        return self.cache[step]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def _first_step_gradient(
    config: TrainConfig, path: Path, rollout_func: Any, rows: list[dict[str, str]]
) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """Train; return the first step's gradients (just before the optimizer step), the change
    of every parameter the run made, and the trainer."""
    import torch
    from transformers import TrainerCallback

    torch.manual_seed(0)
    model, tokenizer = load_policy(path, config)
    grads: dict[str, Any] = {}

    class Grab(TrainerCallback):  # type: ignore[misc]
        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if not grads:
                for name, p in trainer.model.named_parameters():
                    if p.requires_grad and p.grad is not None:
                        grads[name] = p.grad.detach().clone()

    with library_warnings_off():
        trainer = build_trainer(config, model, tokenizer, rollout_func, rows)
        quiet(trainer)
        trainer.add_callback(Grab())
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        trainer.train()
    change = {n: p.detach() - before[n] for n, p in trainer.model.named_parameters()}
    return grads, change, trainer


def _close(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The largest difference between two gradients or updates, over the first's L2 norm."""
    assert a.keys() == b.keys() and a
    norm = math.sqrt(sum(float((g**2).sum()) for g in a.values()))
    assert norm > 0, "zero: the comparison would prove nothing"
    return max(float((a[k] - b[k]).abs().max()) for k in a) / norm


def _checkpointing(trainer: Any) -> bool:
    model = trainer.accelerator.unwrap_model(trainer.model)
    model = model.get_base_model() if hasattr(model, "get_base_model") else model
    if hasattr(model, "is_activation_checkpointing"):  # transformers 5.x's name
        return bool(model.is_activation_checkpointing)
    return bool(model.is_gradient_checkpointing)


ROWS = [{"prompt": f"task-{i}"} for i in range(4)]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True])
def test_micro_batches_and_checkpointing_give_the_one_pass_gradient(
    tiny_path: Path, tmp_path: Path, lora: bool
) -> None:
    """8 rollouts (2 tasks × 4) in one pass, in 4 micro-batches of 2, in 8 of 1 with gradient
    checkpointing: the same first-step gradient (TRL's dapo loss divides every micro-batch by
    the whole step's token count), one rollout call, the same prompts."""
    results = {}
    for label, grpo in {
        "full": {},
        "micro2": {"micro_batch_size": 2},
        "micro1+gc": {"micro_batch_size": 1, "gradient_checkpointing": True},
    }.items():
        config = _config(tmp_path / label, group_size=4, prompts_per_step=2, **grpo)
        if lora:
            config = config.model_copy(
                update={"model": config.model.model_copy(update={"lora": True})}
            )
        replay = Replay(vocab=4000)
        grads, change, trainer = _first_step_gradient(config, tiny_path, replay, ROWS)
        assert trainer.state.global_step == 1
        assert _checkpointing(trainer) == ("gc" in label)
        # Generated once for the step: one call with all 8 prompts, 4 of each of 2 tasks.
        assert len(replay.calls) == 1 and len(replay.calls[0]) == 8
        assert sorted({replay.calls[0].count(p) for p in replay.calls[0]}) == [4]
        if lora:
            assert grads and all("lora_" in name for name in grads)
        results[label] = (grads, change, replay.calls[0])
    full, full_change, prompts = results["full"]
    for label in ("micro2", "micro1+gc"):
        grads, change, these = results[label]
        assert these == prompts
        # Measured: at most 5e-8 of the gradient's norm (float32 summation order); the Adam
        # update at most 2e-6 of its norm.
        assert _close(full, grads) < 1e-6, label
        assert _close(full_change, change) < 1e-4, label


@pytest.mark.e2e
@pytest.mark.slow
def test_micro_batching_keeps_steps_rollouts_and_group_rewards(
    tiny_path: Path, tmp_path: Path
) -> None:
    """The real episode (sandbox, oracle worker, reward) as rollout function, 2 steps of
    2 tasks × 2 rollouts, whole-step vs micro-batches of 1: as many optimizer steps, rollout
    calls and rollouts per call; the first step's rewards per group are the same."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_path)
    tasks = generate_tasks_in_memory(TaskSpec("small", 0, "python"), 2)
    seen = {}
    for label, micro in (("full", None), ("micro1", 1)):
        config = _config(
            tmp_path / label, group_size=2, prompts_per_step=2, steps=2, micro_batch_size=micro
        )
        config = config.model_copy(
            update={"episode": config.episode.model_copy(update={"max_turns": 1})}
        )
        calls: list[dict[str, Any]] = []
        rollouts = EpisodeRollouts(tasks, tok, config.episode, seed=0, format_weight=0.5)

        def record(
            prompts: list[Any], trainer: Any, rollouts: Any = rollouts, calls: Any = calls
        ) -> Any:
            out = rollouts(prompts, trainer)
            calls.append(
                {"prompts": list(prompts), "rewards": [r.reward for r in rollouts.last_records]}
            )
            return out

        _, _, trainer = _first_step_gradient(config, tiny_path, record, rollouts.dataset_rows())
        assert trainer.state.global_step == 2
        assert len(calls) == 2 and all(len(c["prompts"]) == 4 for c in calls)
        seen[label] = calls
    full, micro = seen["full"], seen["micro1"]
    assert [c["prompts"] for c in full] == [c["prompts"] for c in micro]

    def groups(call: dict[str, Any]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for prompt, reward in zip(call["prompts"], call["rewards"], strict=True):
            out.setdefault(prompt, []).append(reward)
        return out

    assert groups(full[0]) == groups(micro[0])
    assert all(len(v) == 2 for v in groups(full[1]).values())


# --------------------------------------------------------------------------------- vLLM path


class FakeVLLMGeneration:
    """TRL 1.16's ``VLLMGeneration`` as the rollout function meets it.

    Interface copied from ``trl/generation/vllm_generation.py:550-556``::

        def generate(self, prompts: list[list[int]], images: list[list | None] | None,
                     num_generations: int, profiler: ProfilingContext | None = None) -> tuple

    returning ``(prompt_ids, completion_ids, logprobs, logprob_token_ids)``, ``logprobs`` as
    ``[sequence][token][k]`` with k = 1 (the trainer builds it with ``logprobs=0``,
    ``grpo_trainer.py:1137``); the sampling settings are the attributes
    ``__init__`` stores (lines 274-281) and colocate mode reads (lines 579-584, 662-671).
    Replies are scripted: each prompt gets the next reply of a list (tokens, per-token
    log-probabilities, None where vLLM had NaN).
    """

    def __init__(
        self, replies: list[list[int]], *, temperature: float, max_completion_length: int
    ) -> None:
        self.mode = "colocate"
        self.temperature = temperature
        self.top_p, self.top_k, self.min_p, self.repetition_penalty = 1.0, 0, 0.0, 1.0
        self.max_completion_length = max_completion_length
        self.logprobs = 0
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def generate(
        self,
        prompts: list[list[int]],
        images: list[list[Any] | None] | None,
        num_generations: int,
        profiler: Any = None,
    ) -> tuple[Any, Any, Any, Any]:
        self.requests.append(
            {"prompts": [list(p) for p in prompts], "images": images, "n": num_generations}
        )
        completions = [self.replies.pop(0) for _ in prompts]
        logprobs = [
            [[None] if i == 0 else [-0.25 * (i % 4)] for i, _ in enumerate(c)] for c in completions
        ]
        token_ids = [[[t] for t in c] for c in completions]
        return [list(p) for p in prompts], completions, logprobs, token_ids


def test_generate_vllm_cuts_each_reply_to_its_limit_and_keeps_the_sampled_logprobs() -> None:
    engine = FakeVLLMGeneration(
        [[7, 8, 9, 2, 11], [7, 8, 9, 10, 11], [5]], temperature=0.7, max_completion_length=5
    )
    out = generate_vllm(engine, [[1, 2], [3], [4, 4]], [5, 3, 5], eos_token_id=2)
    assert engine.requests == [{"prompts": [[1, 2], [3], [4, 4]], "images": None, "n": 1}]
    assert [g.ids for g in out] == [[7, 8, 9, 2], [7, 8, 9], [5]]
    assert [g.ended for g in out] == [True, False, False]
    assert math.isnan(out[0].logprobs[0]) and out[0].logprobs[1:] == [-0.25, -0.5, -0.75]
    assert out[1].logprobs[1:] == [-0.25, -0.5]
    with pytest.raises(RuntimeError, match="at most 5 tokens a reply but a rollout asked for 6"):
        generate_vllm(engine, [[1]], [6], eos_token_id=2)


@pytest.mark.e2e
def test_rollout_function_generates_through_trls_vllm_engine(tiny_path: Path) -> None:
    """use_vllm: the rollout function never touches the model; every reply comes from the
    engine, whose requests are the growing token contexts of each rollout; the fields TRL
    reads are built from its tokens and log-probabilities."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_path)
    tasks = generate_tasks_in_memory(TaskSpec("small", 0, "python"), 1)
    config = load_config(SMOKE, need="grpo")
    episode = config.episode.model_copy(update={"max_turns": 2, "max_new_tokens": 32})
    eos = tok.eos_token_id
    code = list(tok("```python\nprint(len(file_tree))\n```", add_special_tokens=False)["input_ids"])
    answer = list(tok("```python\nset_answer('x')\n```", add_special_tokens=False)["input_ids"])
    # Rollout 0 writes code then answers; rollout 1 is cut at max_new_tokens every turn: its
    # two turns and the final one the Episode grants.
    long = [tok.convert_tokens_to_ids("a")] * 40
    engine = FakeVLLMGeneration(
        [[*code, eos], long, [*answer, eos], long, long],
        temperature=episode.temperature,
        max_completion_length=episode.max_new_tokens,
    )
    rollouts = EpisodeRollouts(tasks, tok, episode, seed=0, use_vllm=True)

    class Trainer:
        vllm_generation = engine

        class state:
            global_step = 0

        @property
        def model(self) -> Any:
            raise AssertionError("the vLLM path must not generate with the training model")

    task_id = tasks[0].id
    out = rollouts([task_id, task_id], Trainer())
    assert [len(r["prompts"]) for r in engine.requests] == [2, 2, 1] and all(
        r["n"] == 1 and r["images"] is None for r in engine.requests
    )
    first, second, _ = engine.requests
    assert (
        first["prompts"][0] == first["prompts"][1] == out["prompt_ids"][0] == out["prompt_ids"][1]
    )
    for row, reply in ((0, [*code, eos]), (1, long[:32])):
        prompt, completion = out["prompt_ids"][row], out["completion_ids"][row]
        mask, logprobs = out["env_mask"][row], out["logprobs"][row]
        assert len(completion) == len(mask) == len(logprobs)
        n = len(reply)
        # Turn 1: exactly the engine's tokens, as model tokens, with its log-probabilities.
        assert completion[:n] == reply and mask[:n] == [1] * n
        assert math.isnan(logprobs[0]) and logprobs[1:4] == [-0.25, -0.5, -0.75]
        # Turn 2's request is the rollout's whole context so far: prompt, reply, observation.
        env = mask[n:].index(1)
        assert second["prompts"][row] == prompt + completion[: n + env]
        assert set(mask[n : n + env]) == {0} and set(logprobs[n : n + env]) == {0.0}
        # Turn 2's reply closes the sequence, again exactly the engine's (cut) tokens.
        last = [*answer, eos] if row == 0 else long[:32]
        assert completion[-len(last) :] == last
        assert sum(mask) == (n + len(last) if row == 0 else 3 * 32)
    assert out["deeprepo_reward"] and len(out["deeprepo_reward"]) == 2
    stats = rollouts.last_stats
    assert stats is not None and stats.generate_calls == 3 and stats.truncated_replies == 3


# ------------------------------------------------------------------------------ the memory


@pytest.mark.e2e
@pytest.mark.slow
def test_memory_benchmark_shows_the_peak_falling_with_micro_batches() -> None:
    """benchmarks/bench_grpo_memory.py, small: 8 rollouts of 64 + 1,024 tokens in one pass vs
    one at a time. Peak RSS falls; steps, rollout calls and the gradient norm do not change."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_grpo_memory.py"),
            "--rollouts",
            "8",
            "--length",
            "1024",
            "--prompt",
            "64",
            "--runs",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(proc.stdout)["rows"]
    full, micro = row["settings"]["one pass"], row["settings"]["micro-batch 1"]
    assert (full["accumulation_steps"], micro["accumulation_steps"]) == (1, 8)
    for s in (full, micro):
        assert s["optimizer_steps"] == 1 and s["rollout_calls"] == [8]
    assert micro["grad_norm"] == pytest.approx(full["grad_norm"], rel=1e-5)
    assert micro["peak_mib_median"] < full["peak_mib_median"]
