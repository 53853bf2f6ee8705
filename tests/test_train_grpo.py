"""GRPO on deeprepo's own episode: the policy as root, its token trace, and the CPU smoke run.

The smoke test runs ``deeprepo train grpo configs/smoke.toml`` as a user would (a tiny model
built in-process, SFT warm start on scripted-expert episodes, 3 GRPO steps with the oracle
worker) and checks what it claims: parameters moved, gradients were non-zero, rewards varied
inside groups, and the checkpoint, log and plot are there and loadable.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the train extra is not installed: pip install -e '.[train]'")
pytest.importorskip("trl", reason="the train extra is not installed: pip install -e '.[train]'")

from clihelp import ROOT, run_cli

from deeprepo.base import prompts
from deeprepo.orchestrator.episode import EpisodeConfig, metadata_summary
from deeprepo.rl.env.rollout import run_rollout
from deeprepo.rl.env.tasks import Task, TaskSpec, generate_tasks_in_memory
from deeprepo.rl.train.config import load_config
from deeprepo.rl.train.export import conversation
from deeprepo.rl.train.policy import ChatFrame, Generated, GenerationQueue, PolicyRoot
from deeprepo.rl.train.tiny import build_tiny_model
from deeprepo.sandbox.config import SandboxConfig

pytestmark = pytest.mark.e2e

SMOKE = ROOT / "configs" / "smoke.toml"

# A short delegating program, as a policy might write it: every file to the workers in one
# batch, their JSON findings recorded; then an answer. It must earn a discovery reward.
AUDIT = (
    "Auditing.\n```python\nimport json\npaths = metadata['audit_files']\n"
    "replies = llm_batch([file_audit_prompt(p) for p in paths])\n"
    "for p, r in zip(paths, replies):\n"
    "    try:\n        items = json.loads(r[r.index('{'):r.rindex('}') + 1])['findings']\n"
    "    except Exception:\n        items = []\n"
    "    for f in items:\n"
    "        add_finding(p, f['line'], f['kind'], f['severity'], f['title'], cwe=f.get('cwe'))\n"
    "print(len(paths), 'files')\n```"
)
ANSWER = "Done.\n```python\nset_answer('report: see findings')\n```"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from transformers import AutoTokenizer

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    return path, AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def task() -> Task:
    return generate_tasks_in_memory(TaskSpec("small", 3, "python"), 1)[0]


def _scripted(tokenizer: Any, replies: list[tuple[str, bool]]) -> Any:
    """A generate function that 'samples' fixed replies (text, ended-by-EOS) in order."""
    calls = iter(replies)

    def generate(contexts: list[list[int]], limits: list[int]) -> list[Generated]:
        text, ended = next(calls)
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids += [tokenizer.eos_token_id] if ended else []
        return [Generated(ids, [-0.5] * len(ids), ended)]

    return generate


def _rollout(tokenizer: Any, task: Task, replies: list[tuple[str, bool]], **kw: Any) -> Any:
    async def main() -> Any:
        queue = GenerationQueue(_scripted(tokenizer, replies), live=1)
        root = PolicyRoot(
            tokenizer=tokenizer,
            frame=ChatFrame.from_tokenizer(tokenizer),
            queue=queue,
            max_new_tokens=kw.get("max_new_tokens", 512),
            max_context_tokens=kw.get("max_context_tokens", 16384),
        )
        outcome = await run_rollout(
            task,
            root=root,
            episode_config=EpisodeConfig(max_turns=3, cache_root_prompt=False),
            sandbox_config=SandboxConfig(mode="auto"),
        )
        return outcome, root.trace

    return asyncio.run(main())


def test_policy_trace_is_the_conversation_the_episode_had(
    tiny: tuple[Path, Any], task: Task
) -> None:
    _, tok = tiny
    # Turn 1 is cut at max_new_tokens (no EOS): the environment closes the message itself.
    outcome, trace = _rollout(tok, task, [(AUDIT, False), (ANSWER, True)])
    result = outcome.result
    assert result.stop_reason == "answer_ready" and result.num_turns == 2
    assert result.turns[0].error is None and result.sub_calls > 0
    # The episode really ran the policy's code through the sandbox, oracle and reward.
    assert outcome.reward.parts["coverage_reward"] == 1.0
    assert outcome.reward.parts["zero_delegation_penalty"] == 0.0
    assert outcome.reward.total > 0.3

    # The tokens GRPO trains on are exactly the chat template's rendering of the conversation
    # the Episode held (as `deeprepo export sft` writes it), the final newline aside.
    messages = conversation(
        prompts.ROOT_SYSTEM_PROMPTS["default"],
        prompts.first_user_message(metadata_summary(task.get_codebase())),
        [t.to_dict() for t in result.turns],
    )
    rendered = tok.apply_chat_template(messages, tokenize=False)
    full = tok.decode(trace.prompt_ids + trace.completion_ids)
    assert full + "\n" == rendered
    opening = tok.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert tok.decode(trace.prompt_ids) == opening

    # env_mask: 1 exactly on the sampled tokens, 0 on the observation between them.
    assert len(trace.env_mask) == len(trace.completion_ids) == len(trace.logprobs)
    model_text = tok.decode(
        [i for i, m in zip(trace.completion_ids, trace.env_mask, strict=True) if m]
    )
    assert model_text == AUDIT + ANSWER + "<|im_end|>"
    env_text = tok.decode(
        [i for i, m in zip(trace.completion_ids, trace.env_mask, strict=True) if not m]
    )
    assert result.turns[0].output in env_text and env_text.startswith(
        "<|im_end|>\n<|im_start|>user\n"
    )
    assert all(lp == 0.0 for lp, m in zip(trace.logprobs, trace.env_mask, strict=True) if not m)
    assert trace.replies == 2 and trace.truncated_replies == 1


def test_a_full_context_stops_the_episode_as_a_budget(tiny: tuple[Path, Any], task: Task) -> None:
    _, tok = tiny
    frame = ChatFrame.from_tokenizer(tok)
    opening = frame.render_opening(
        prompts.ROOT_SYSTEM_PROMPTS["default"],
        prompts.first_user_message(metadata_summary(task.get_codebase())),
    )
    n_prompt = len(tok(opening, add_special_tokens=False)["input_ids"])
    outcome, trace = _rollout(
        tok, task, [("x = 1", False), (ANSWER, True)], max_context_tokens=n_prompt + 8
    )
    assert outcome.result.stop_reason == "budget"
    assert "context is full" in outcome.result.stop_detail
    assert trace.length <= n_prompt + 8 and trace.replies == 1


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("smoke") / "run"
    proc = run_cli("train", "grpo", str(SMOKE), "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout + proc.stderr


@pytest.mark.slow
def test_smoke_run_trains_and_writes_log_checkpoint_and_plot(smoke_run: tuple[Path, str]) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, console = smoke_run
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        for key in (
            "reward_mean",
            "reward_std",
            "turns_mean",
            "tokens",
            "zero_delegation_rate",
            "grad_norm",
            "seconds",
            "quality_reward",
            "coverage_reward",
            "zero_delegation_penalty",
            "discovery_mean",
            "format_mean",
        ):
            assert key in row, key
        assert row["rollouts"] == 4 and row["groups"] == 1
        assert 0 < row["model_tokens"] < row["tokens"]
    # GRPO learns only where rewards differ inside a group; the smoke run must have such groups
    # and non-zero gradients, or it proved nothing.
    assert sum(r["groups_with_variance"] for r in rows) >= 1
    assert max(r["grad_norm"] for r in rows) > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["parameter_change"] > 0
    # The smoke config sets no micro-batch: the whole step in one pass, as before.
    assert (summary["micro_batch"], summary["accumulation_steps"]) == (4, 1)
    assert summary["generation"] == "transformers"
    assert summary["sft"]["examples"] == 2 and summary["sft"]["expert_reward_mean"] > 0.5
    assert summary["sft"]["loss_last"] < summary["sft"]["loss_first"]
    assert "step 3/3" in console and "grpo: 3/3 step(s)" in console

    # The checkpoint loads as hf/<dir> would load it, and differs from the warm start.
    model = AutoModelForCausalLM.from_pretrained(out / "checkpoint")
    tok = AutoTokenizer.from_pretrained(out / "checkpoint")
    warm = AutoModelForCausalLM.from_pretrained(out / "sft" / "checkpoint")
    assert tok.chat_template and tok.eos_token == "<|im_end|>"
    changed = [
        name
        for (name, a), (_, b) in zip(model.named_parameters(), warm.named_parameters(), strict=True)
        if not torch.equal(a, b)
    ]
    assert changed
    png = (out / "training.png").read_bytes()
    assert png[:4] == b"\x89PNG"


@pytest.mark.slow
def test_lora_grpo_moves_only_the_adapters_and_saves_a_merged_checkpoint(
    smoke_run: tuple[Path, str], tmp_path: Path
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from deeprepo.rl.train.grpo import run_grpo

    warm = smoke_run[0] / "sft" / "checkpoint"
    config = load_config(SMOKE, need="grpo")
    assert config.grpo is not None
    config = config.model_copy(
        update={
            "output_dir": str(tmp_path / "lora"),
            "sft": None,
            "model": config.model.model_copy(update={"name": str(warm), "lora": True}),
            # Micro-batches of 2 with gradient checkpointing: the GPU recipes' way, end to end.
            "grpo": config.grpo.model_copy(
                update={
                    "steps": 2,
                    "lr": 5e-3,
                    "micro_batch_size": 2,
                    "gradient_checkpointing": True,
                }
            ),
        }
    )
    summary = run_grpo(config)
    assert summary.steps == 2 and summary.lora
    assert (summary.micro_batch, summary.accumulation_steps) == (2, 2)
    assert summary.gradient_checkpointing and summary.generation == "transformers"
    rows = [json.loads(x) for x in (tmp_path / "lora" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["rollouts"] == 4 for r in rows)
    assert summary.grad_norm_max > 0 and summary.parameter_change > 0
    assert summary.groups_with_variance >= 1
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "lora" / "checkpoint")
    base = AutoModelForCausalLM.from_pretrained(warm)
    names = [n for n, _ in merged.named_parameters()]
    assert not any("lora" in n for n in names)  # adapters merged into a plain checkpoint
    assert names == [n for n, _ in base.named_parameters()]
    assert any(
        not torch.equal(a, b) for a, b in zip(merged.parameters(), base.parameters(), strict=True)
    )


@pytest.mark.slow
def test_train_sft_cli_on_an_exported_file(tmp_path: Path) -> None:
    """`deeprepo train sft` on a JSONL file in the export's format (paths beside the config)."""
    reply = "```python\nprint(file_tree[:3000])\n```"
    example = {
        "messages": [
            {"role": "system", "content": "You are the root."},
            {"role": "user", "content": "Analyse this repository."},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "src/\n  app.py"},
            {"role": "assistant", "content": "```python\nset_answer('done')\n```"},
        ],
        "meta": {"source": "test"},
    }
    (tmp_path / "data.jsonl").write_text(json.dumps(example) + "\n")
    config = tmp_path / "sft.toml"
    config.write_text(
        'output_dir = "out"\nthreads = 1\n[sft]\ndata = "data.jsonl"\nsteps = 4\nlr = 1e-2\n'
    )
    proc = run_cli("train", "sft", str(config), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sft: 4 step(s) on 1 example(s)" in proc.stdout
    rows = [json.loads(x) for x in (tmp_path / "out/sft/sft_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert rows[-1]["loss"] < rows[0]["loss"]  # four steps on one example: it memorises
    assert (tmp_path / "out/sft/checkpoint/model.safetensors").is_file()
