"""``hf/<path>``: a local checkpoint as root model: specs, errors, tokens, eval and compare."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from clihelp import EXAMPLE, ROOT, run_cli

from deeprepo.base.chat import ChatRequest, Message, Usage
from deeprepo.base.errors import ConfigError
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import parse_model_spec
from deeprepo.run.models import build_model


def test_spec_forms() -> None:
    spec = parse_model_spec("hf/runs/ckpt/")
    assert (spec.provider, spec.model, spec.name) == ("hf", "runs/ckpt", "hf/runs/ckpt")
    assert spec.is_local and not spec.is_builtin
    assert parse_model_spec("hf//abs/q.gguf").model == "/abs/q.gguf"
    with pytest.raises(ConfigError, match="names no checkpoint"):
        parse_model_spec("hf/")
    with pytest.raises(ConfigError, match="no base URL"):
        parse_model_spec("hf/ckpt", "http://localhost:8000")
    assert PriceTable.load().cost("hf/runs/ckpt", Usage(9, 9)) == 0.0


def test_missing_checkpoint_and_bad_settings_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no config\.json"):
        build_model(parse_model_spec(f"hf/{tmp_path}"), role="root", env={})
    with pytest.raises(ConfigError, match="no GGUF file"):
        build_model(parse_model_spec(f"hf/{tmp_path}/m.gguf"), role="root", env={})
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="DEEPREPO_HF_TEMPERATURE"):
        build_model(
            parse_model_spec(f"hf/{tmp_path}"), role="root", env={"DEEPREPO_HF_TEMPERATURE": "hot"}
        )


@pytest.mark.e2e
def test_without_torch_one_line_names_the_extra_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
        "from deeprepo.cli.app import main\n"
        f"main(['eval', '--model', 'hf/{tmp_path}', '-n', '1', '-r', '1', "
        f"'--generate', 'small:seed=1', '--out', '{tmp_path / 'ev'}'])\n"
    )
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install -e '.[train]'" in lines[0], proc.stderr


pytest.importorskip("torch", reason="the train extra is not installed: pip install -e '.[train]'")
pytest.importorskip("transformers", reason="the train extra is not installed")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from deeprepo.rl.train.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("hf") / "tiny", seed=0)


@pytest.mark.e2e
def test_tokens_are_the_tokenizers_and_the_checkpoint_is_loaded_once(tiny: Path) -> None:
    from transformers import AutoTokenizer

    from deeprepo.providers.hf_local import HFLocalModel, HFSettings

    settings = HFSettings(max_new_tokens=12, temperature=0.0, seed=0, device="cpu")
    a = HFLocalModel(str(tiny), settings)
    b = HFLocalModel(str(tiny), settings)
    assert a._loaded is b._loaded  # one load per process
    request = ChatRequest((Message("user", "Audit this file."),), system="You are a root.")
    first = asyncio.run(a.complete(request))
    again = asyncio.run(b.complete(request))
    tok = AutoTokenizer.from_pretrained(tiny)
    prompt = tok.apply_chat_template(
        [
            {"role": "system", "content": "You are a root."},
            {"role": "user", "content": "Audit this file."},
        ],
        add_generation_prompt=True,
        return_dict=True,
    )["input_ids"]
    assert first.usage.input_tokens == len(prompt)
    assert 1 <= first.usage.output_tokens <= 12
    assert first.text == again.text  # temperature 0: greedy
    assert first.model == f"hf/{tiny}"

    sampled = HFSettings(max_new_tokens=12, temperature=1.0, seed=3, device="cpu")
    one, two = HFLocalModel(str(tiny), sampled), HFLocalModel(str(tiny), sampled)
    x1, x2 = (asyncio.run(one.complete(request)).text for _ in range(2))
    y1 = asyncio.run(two.complete(request)).text
    assert x1 == y1  # the same seed and call repeat reply for reply
    assert x1 != x2  # a repeated prompt (another rollout) samples afresh


@pytest.mark.e2e
def test_concurrent_requests_are_generated_together_with_the_replies_of_one_at_a_time(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeprepo.providers import hf_batch
    from deeprepo.providers.hf_local import HFLocalModel, HFSettings

    requests = [
        ChatRequest((Message("user", "Audit " + "this file. " * n),), system="You are a root.")
        for n in (1, 7, 3, 12, 2)
    ]
    # Greedy: a batch (left-padded to one width) must give each request's own reply.
    alone = HFLocalModel(str(tiny), HFSettings(max_new_tokens=9, temperature=0.0, device="cpu"))
    expected = [asyncio.run(alone.complete(r)) for r in requests]
    sizes: list[int] = []
    real = hf_batch.generate_jobs

    def counted(loaded: object, jobs: list[hf_batch.Job]) -> list[list[int]]:
        sizes.append(len(jobs))
        return real(loaded, jobs)

    monkeypatch.setattr(hf_batch, "generate_jobs", counted)
    batched = HFLocalModel(
        str(tiny), HFSettings(max_new_tokens=9, temperature=0.0, device="cpu", batch=4)
    )

    async def all_at_once() -> list[object]:
        return list(await asyncio.gather(*(batched.complete(r) for r in requests)))

    got = asyncio.run(all_at_once())
    assert sizes == [4, 1]  # five waiting requests, batches of at most four
    for g, e in zip(got, expected, strict=True):
        assert (g.text, g.usage, g.finish_reason) == (e.text, e.usage, e.finish_reason)


def test_batch_setting_is_read_and_checked() -> None:
    from deeprepo.providers.hf_local import HFSettings

    assert HFSettings.from_env({}).batch == 1
    assert HFSettings.from_env({"DEEPREPO_HF_BATCH": "8"}).batch == 8
    with pytest.raises(ConfigError, match="DEEPREPO_HF_BATCH must be at least 1"):
        HFSettings.from_env({"DEEPREPO_HF_BATCH": "0"})


@pytest.mark.e2e
def test_eval_runs_scores_and_compares_a_tiny_checkpoint(tiny: Path, tmp_path: Path) -> None:
    env = {"DEEPREPO_HF_MAX_NEW_TOKENS": "32", "DEEPREPO_HF_DEVICE": "cpu"}
    outs = []
    for seed in ("0", "1"):
        out = tmp_path / f"ev{seed}"
        proc = run_cli(
            "eval", "--model", f"hf/{tiny}", "-n", "2", "-r", "2", "--generate", "small:seed=3",
            "--max-turns", "2", "--out", str(out),
            env={**env, "DEEPREPO_HF_SEED": seed}, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "stop_conditions: max_turns_reached: 1.000" in proc.stdout  # garbage never answers
        rows = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
        assert len(rows) == 4
        for row in rows:
            assert row["model"] == f"hf/{tiny}" and row["reward"] == 0.0
            [usage] = row["usage"]
            assert usage["cost_usd"] == 0.0 and usage["calls"] == 3
            assert usage["input_tokens"] > 1000 and 3 <= usage["output_tokens"] <= 96
        outs.append(out)
    proc = run_cli("compare", *(str(o) for o in outs), "--labels", "before,after", "--markdown")
    assert proc.returncode == 0, proc.stderr
    assert "before" in proc.stdout and "after" in proc.stdout


@pytest.mark.e2e
def test_analyze_with_a_local_root_is_metered_and_says_it_is_incomplete(
    tiny: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    proc = run_cli(
        "analyze", str(EXAMPLE), "--root", f"hf/{tiny}", "--sub", "static", "--max-turns", "1",
        "--out", str(out), env={"DEEPREPO_HF_MAX_NEW_TOKENS": "16"}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "INCOMPLETE" in proc.stdout
    m = json.loads((out / "metrics.json").read_text())
    root = next(u for u in m["usage"] if u["role"] == "root")
    assert m["offline"] is False and m["turns"] == 2
    assert root["cost_usd"] == 0.0 and root["calls"] == 2 and root["cached_calls"] == 0
    assert root["input_tokens"] > 500 and 2 <= root["output_tokens"] <= 32


@pytest.mark.e2e
def test_export_checkpoint_writes_a_folder_hf_loads(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "converted"
    proc = run_cli("export", "checkpoint", str(tiny), str(out), "--dtype", "float16")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout and "in float16" in proc.stdout
    assert json.loads((out / "config.json").read_text())["dtype"] == "float16"
    from deeprepo.providers.hf_local import HFLocalModel, HFSettings

    model = HFLocalModel(str(out), HFSettings(max_new_tokens=4, temperature=0.0, device="cpu"))
    reply = asyncio.run(model.complete(ChatRequest((Message("user", "hi"),))))
    assert 1 <= reply.usage.output_tokens <= 4

    proc = run_cli("export", "checkpoint", str(tiny), str(out))
    assert proc.returncode == 2 and "not an empty folder" in proc.stderr
    proc = run_cli("export", "checkpoint", str(tmp_path / "nothing.gguf"), str(tmp_path / "x"))
    assert proc.returncode == 2 and "no GGUF file" in proc.stderr
