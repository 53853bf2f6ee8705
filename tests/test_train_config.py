"""Training config, format score, generation batching and the training plot: no torch needed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from clihelp import ROOT, run_cli

from deeprepo.base.errors import ConfigError, UsageError
from deeprepo.rl.plots.training import plot_training, read_train_log
from deeprepo.rl.train.config import load_config
from deeprepo.rl.train.policy import ChatFrame, Generated, GenerationQueue
from deeprepo.rl.train.rollouts import format_score

SMOKE = ROOT / "configs" / "smoke.toml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def test_smoke_config_is_valid_for_both_commands() -> None:
    grpo = load_config(SMOKE, need="grpo")
    assert grpo.model.name == "tiny" and grpo.device == "cpu"
    assert grpo.grpo is not None and grpo.grpo.steps == 3 and not grpo.grpo.use_vllm
    assert grpo.sft is not None and grpo.sft.expert == "scripted/expert"
    assert grpo.episode.worker == "oracle"
    assert load_config(SMOKE, need="sft").sft == grpo.sft


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[grpo]\nstepz = 3\n", "grpo.stepz: Extra inputs are not permitted"),
        ("[grpo]\n[tasks]\nsize = 'huge'\n", "tasks: size must be one of small, medium, large"),
        (
            "[grpo]\n[tasks]\nsize = 'hard'\nlang = 'mixed'\n",
            "tasks: lang must be one of python, js",
        ),
        ("[grpo]\ngroup_size = 1\n", "grpo.group_size: Input should be greater than or equal to 2"),
        ("[grpo]\nuse_vllm = true\n", 'grpo.use_vllm = true needs device = "cuda"'),
        ("device = 'tpu'\n[grpo]\n", "device: Input should be 'cpu' or 'cuda'"),
        ("[sft]\n", "no [grpo] section"),
        ("[grpo\n", "not valid TOML"),
    ],
)
def test_config_mistakes_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text), need="grpo")
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_training_may_use_the_hard_tier(tmp_path: Path) -> None:
    config = load_config(
        _write(tmp_path, "[grpo]\n[tasks]\nsize = 'hard'\nlang = 'js'\n"), need="grpo"
    )
    assert (config.tasks.size, config.tasks.lang) == ("hard", "js")


def test_sft_needs_its_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no \[sft\] section"):
        load_config(_write(tmp_path, "[grpo]\n"), need="sft")


@pytest.mark.e2e
def test_cli_reports_a_bad_config_in_one_line_with_exit_2(tmp_path: Path) -> None:
    proc = run_cli("train", "grpo", str(_write(tmp_path, "[grpo]\nsteps = 0\n")))
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "grpo.steps" in lines[0], proc.stderr
    missing = run_cli("train", "sft", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "no such config file" in missing.stderr


def test_format_score_counts_code_blocks_and_clean_runs() -> None:
    def turn(blocks: int, error: str | None) -> Any:
        return SimpleNamespace(code_blocks=["x"] * blocks, error=error)

    result: Any = SimpleNamespace(turns=[turn(1, None), turn(1, "syntax"), turn(0, None)])
    assert format_score(result) == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert format_score(SimpleNamespace(turns=[])) == 0.0  # type: ignore[arg-type]


def test_generation_queue_batches_every_waiting_episode_in_key_order() -> None:
    seen: list[list[list[int]]] = []

    def generate(contexts: list[list[int]], limits: list[int]) -> list[Generated]:
        seen.append(contexts)
        return [Generated([c[0] * 10], [0.0], True) for c in contexts]

    async def main() -> list[Generated]:
        queue = GenerationQueue(generate, live=3)

        async def episode(key: int, delay: float) -> Generated:
            await asyncio.sleep(delay)  # a kernel running code: the others must wait for it
            try:
                return await queue.submit(key, [key], 4)
            finally:
                queue.retire()

        return list(await asyncio.gather(episode(2, 0.0), episode(0, 0.05), episode(1, 0.02)))

    out = asyncio.run(main())
    assert seen == [[[0], [1], [2]]]  # one batch, rows in key order
    assert [g.ids for g in out] == [[20], [0], [10]]


class _ChatML:
    """A tokenizer stand-in with a ChatML template, enough for ChatFrame's probe."""

    chat_template = "chatml"
    eos_token_id = 7

    def apply_chat_template(
        self, messages: list[dict[str, str]], tokenize: bool, add_generation_prompt: bool
    ) -> str:
        text = "".join(f"<s>{m['role']}\n{m['content']}</s>\n" for m in messages)
        return text + ("<s>assistant\n" if add_generation_prompt else "")

    def decode(self, ids: list[int]) -> str:
        return "</s>"


def test_chat_frame_learns_how_a_template_appends_an_observation() -> None:
    frame = ChatFrame.from_tokenizer(_ChatML())
    assert (
        frame.render_opening("SYS", "hi") == "<s>system\nSYS</s>\n<s>user\nhi</s>\n<s>assistant\n"
    )
    # After a reply that ended with EOS, only the newline of the closing is the environment's.
    assert frame.continuation("out", reply_ended=True) == "\n<s>user\nout</s>\n<s>assistant\n"
    # A reply cut at max_new_tokens: the environment closes the message itself.
    assert frame.continuation("out", reply_ended=False) == "</s>\n<s>user\nout</s>\n<s>assistant\n"


def test_chat_frame_refuses_a_template_that_rewrites_history() -> None:
    class Rewriting(_ChatML):
        def apply_chat_template(
            self, messages: list[dict[str, str]], tokenize: bool, add_generation_prompt: bool
        ) -> str:
            # Drops earlier assistant turns once a new user message comes (as some templates
            # do with reasoning): the sequence would not grow by appending.
            keep = [m for m in messages if m["role"] != "assistant" or m is messages[-1]]
            return super().apply_chat_template(keep, tokenize, add_generation_prompt)

    with pytest.raises(ConfigError, match="does not extend a conversation by appending"):
        ChatFrame.from_tokenizer(Rewriting())


def test_plot_training_draws_a_png_from_a_log(tmp_path: Path) -> None:
    log = tmp_path / "train_log.jsonl"
    rows = [
        {
            "step": s,
            "reward_mean": 0.1 * s,
            "reward_std": 0.05,
            "discovery_mean": 0.0,
            "turns_mean": 2.0 + s,
        }
        for s in (2, 1, 3)
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [r["step"] for r in read_train_log(log)] == [1, 2, 3]
    png = plot_training(log, tmp_path / "plots" / "training.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000


def test_plot_training_says_what_is_wrong_with_a_log(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        plot_training(tmp_path / "missing.jsonl", tmp_path / "x.png")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(UsageError, match=r"bad.jsonl:1: not a JSON line"):
        plot_training(bad, tmp_path / "x.png")
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"no_step": 1}\n')
    with pytest.raises(UsageError, match="holds no step record"):
        plot_training(empty, tmp_path / "x.png")


def test_relative_paths_resolve_against_the_config_file(tmp_path: Path) -> None:
    folder = tmp_path / "cfg"
    folder.mkdir()
    path = folder / "c.toml"
    path.write_text('output_dir = "../out"\n[grpo]\n[sft]\ndata = "data/sft.jsonl"\n')
    config = load_config(path, need="grpo")
    assert config.out.resolve() == (tmp_path / "out").resolve()
    assert config.resolve("data/sft.jsonl") == folder.resolve() / "data" / "sft.jsonl"
    assert config.resolve(str(tmp_path / "abs")) == tmp_path / "abs"
    path.write_text('base_dir = "/"\n[grpo]\n')
    with pytest.raises(ConfigError, match="base_dir is not a key"):
        load_config(path, need="grpo")


def test_sft_data_lines_are_checked_one_by_one(tmp_path: Path) -> None:
    from deeprepo.rl.train.sft import read_examples

    good = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    data = tmp_path / "sft.jsonl"
    data.write_text(json.dumps({**good, "meta": {"x": 1}}) + "\n\n" + json.dumps(good) + "\n")
    assert read_examples(data) == [good, good]  # meta dropped, blank lines skipped
    for line, expected in [
        ("{oops", "sft.jsonl:1: not a JSON line"),
        ('{"messages": []}', 'expected {"messages"'),
        ('{"messages": [{"role": "user"}]}', 'expected {"messages"'),
        ('{"messages": [{"role": "user", "content": "q"}]}', "no assistant message"),
    ]:
        data.write_text(line + "\n")
        with pytest.raises(ConfigError, match=expected.replace("{", r"\{").replace("[", r"\[")):
            read_examples(data)
    data.write_text("\n")
    with pytest.raises(ConfigError, match="no example in it"):
        read_examples(data)
