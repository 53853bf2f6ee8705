"""Rollout generation against plain ``generate`` of the same batch (issue 21, item 2).

``deeprepo train grpo`` samples the policy's replies with ``train/generation.py:
generate_batch``, which must also return each sampled token's log-probability. Until issue 21
it asked ``generate`` for ``output_scores=True``, stacked every step's full-vocabulary scores
and copied them to the CPU (on the H100: 229 s for one step's 7,990 tokens). This measures,
on one left-padded batch of ``--batch`` contexts of up to ``--prompt`` tokens and ``--new``
new tokens each:

* ``plain``: ``model.generate`` sampling at the same temperature, no scores: the target;
* ``rollout``: ``generate_batch`` as training calls it (log-probabilities gathered on the
  device during generation by ``SampledLogprobs``);
* ``scores``: the former path (``output_scores=True``, stacked, log-softmax, to the CPU);
* ``rescore``: ``plain``, then one forward pass over context + reply for the
  log-probabilities (the other way to get them; shown for the choice, not used).

Variants run interleaved, in a rotating order, ``--repeats`` times, after one warm-up run
each; every run of a repeat starts from the same seed, so the variants sample the same tokens
(tokens/s counts the new tokens each run produced, padding after an EOS included, as
``generate`` produces it). The table shows each variant's median tokens/s and its ratio to
``plain`` (target: ``rollout`` ≥ 0.8).

Models: ``tiny`` (built in-process, 4,096-token vocabulary), a transformers checkpoint folder,
or a GGUF file (dequantised on load; ``deeprepo local setup`` ships SmolLM2-135M, 49,152
tokens, and the Qwen2.5-Coder files, 151,936 tokens). ``--vocab 151936`` gives a model
Qwen's vocabulary size (random new embedding rows): the scores path's cost follows the
vocabulary, so the tiny model then shows it in seconds on a CPU.

Run: ``.venv/bin/python benchmarks/bench_generate.py [--model tiny|DIR|FILE.gguf]
[--device cpu|cuda] [--dtype float32|bfloat16] [--batch 8] [--prompt 256] [--new 64]
[--repeats 5] [--temperature 1.0] [--cache dynamic|static] [--vocab N]
[--variants plain,rollout,...]
[--threads 1] [--json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

VARIANTS = ("plain", "rollout", "scores", "rescore")


def load(source: str, device: str, dtype: str, tmp: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from deeprepo.rl import build_tiny_model

    extra: dict[str, str] = {}
    if source == "tiny":
        folder = str(build_tiny_model(tmp / "tiny"))
    elif source.endswith(".gguf"):
        folder, extra["gguf_file"] = str(Path(source).parent), Path(source).name
    else:
        folder = source
    tokenizer = AutoTokenizer.from_pretrained(folder, **extra)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype), **extra)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device).eval(), tokenizer


def contexts(tokenizer: Any, batch: int, prompt: int, seed: int) -> list[list[int]]:
    """``batch`` contexts of prompt/2 to prompt tokens of generated repository code, so the
    batch is left-padded as in training."""
    from deeprepo.rl import generate_task, task_seeds

    text = ""
    for task_seed in task_seeds(seed, 2):
        text += "\n".join(generate_task(task_seed, "small", "python").files.values())
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    out = []
    for row in range(batch):
        length = prompt // 2 + (prompt - prompt // 2) * row // max(1, batch - 1)
        start = (row * 997) % max(1, len(ids) - length)
        out.append(ids[start : start + length])
    return out


def _padded(tokenizer: Any, rows: list[list[int]], device: str) -> tuple[Any, Any]:
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r)
        mask[i, width - len(r) :] = 1
    return ids.to(device), mask.to(device)


def runners(
    model: Any, tokenizer: Any, rows: list[list[int]], opts: argparse.Namespace
) -> dict[str, Callable[[], int]]:
    """One callable per variant; each returns the number of new tokens it generated."""
    import torch

    from deeprepo.rl import generate_batch

    ids, mask = _padded(tokenizer, rows, opts.device)
    width = ids.shape[1]
    cache = None if opts.cache == "dynamic" else opts.cache
    common: dict[str, Any] = dict(
        input_ids=ids,
        attention_mask=mask,
        do_sample=True,
        temperature=opts.temperature,
        top_k=0,
        top_p=1.0,
        max_new_tokens=opts.new,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
        cache_implementation=cache,
    )

    def plain() -> int:
        with torch.no_grad():
            out = model.generate(**common)
        return int(out[:, width:].numel())

    def rollout() -> int:
        got = generate_batch(
            model, tokenizer, rows, [opts.new] * len(rows), temperature=opts.temperature,
            cache_implementation=cache,
        )  # fmt: skip
        # generate's own count: every row runs until the longest reply stops
        return len(got) * max(len(g.ids) for g in got)

    def scores() -> int:
        with torch.no_grad():
            out = model.generate(**common, return_dict_in_generate=True, output_scores=True)
        new = out.sequences[:, width:].cpu()
        steps = torch.stack(out.scores, dim=1).float().log_softmax(-1).cpu()
        steps.gather(-1, new.unsqueeze(-1))
        return int(new.numel())

    def rescore() -> int:
        with torch.no_grad():
            out = model.generate(**common)
            full = torch.cat([mask, torch.ones_like(out[:, width:])], dim=1)
            positions = (full.cumsum(-1) - 1).clamp(min=0)
            logits = model(out, attention_mask=full, position_ids=positions).logits
            logits = logits[:, width - 1 : -1].float() / opts.temperature
            logits.log_softmax(-1).gather(-1, out[:, width:].unsqueeze(-1)).cpu()
        return int(out[:, width:].numel())

    table = {"plain": plain, "rollout": rollout, "scores": scores, "rescore": rescore}
    return {name: table[name] for name in opts.variants}


def measure(opts: argparse.Namespace) -> dict[str, Any]:
    import torch

    if opts.threads:
        torch.set_num_threads(opts.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer = load(opts.model, opts.device, opts.dtype, Path(tmp))
    if opts.vocab:
        # Random new rows: what the scores path costs grows with the vocabulary, not the model.
        torch.manual_seed(opts.seed)
        model.resize_token_embeddings(opts.vocab, mean_resizing=False)
    rows = contexts(tokenizer, opts.batch, opts.prompt, opts.seed)
    run = runners(model, tokenizer, rows, opts)

    def sync() -> None:
        if opts.device.startswith("cuda"):
            torch.cuda.synchronize()

    for fn in run.values():  # warm-up: kernels, allocator, the static cache's first build
        torch.manual_seed(opts.seed)
        fn()
    sync()
    rates: dict[str, list[float]] = {name: [] for name in run}
    tokens: dict[str, list[int]] = {name: [] for name in run}
    names = list(run)
    for repeat in range(opts.repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for name in order:
            torch.manual_seed(opts.seed + repeat)
            sync()
            started = time.perf_counter()
            count = run[name]()
            sync()
            rates[name].append(count / (time.perf_counter() - started))
            tokens[name].append(count)
            # On stderr as it goes: a run cut short by a time limit still leaves its figures.
            print(f"repeat {repeat + 1} {name}: {rates[name][-1]:.1f} tokens/s", file=sys.stderr)
    medians = {name: statistics.median(v) for name, v in rates.items()}
    base = medians.get("plain")
    return {
        "model": opts.model,
        "vocab": int(model.config.vocab_size),
        "parameters": sum(p.numel() for p in model.parameters()),
        "device": opts.device,
        "device_name": torch.cuda.get_device_name() if opts.device.startswith("cuda") else "cpu",
        "dtype": opts.dtype,
        "threads": torch.get_num_threads(),
        "batch": opts.batch,
        "prompt_tokens": [len(r) for r in rows],
        "new_tokens": opts.new,
        "temperature": opts.temperature,
        "cache": opts.cache,
        "repeats": opts.repeats,
        "tokens_per_s": {k: round(v, 2) for k, v in medians.items()},
        "ratio_to_plain": {k: round(v / base, 3) for k, v in medians.items()} if base else {},
        "runs": {k: [round(x, 2) for x in v] for k, v in rates.items()},
        "tokens": tokens,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, a checkpoint folder or a .gguf")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--dtype", default=None, help="float32 (cpu default) or bfloat16 (cuda)")
    parser.add_argument("--batch", type=int, default=8, help="contexts in the batch (default 8)")
    parser.add_argument("--prompt", type=int, default=256, help="longest context (default 256)")
    parser.add_argument("--new", type=int, default=64, help="new tokens a row (default 64)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs a variant (default 5)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    parser.add_argument("--cache", default="dynamic", choices=("dynamic", "static"))
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="which to run, comma-separated"
    )
    parser.add_argument(
        "--vocab", type=int, default=0, help="resize the vocabulary to this (151936: Qwen's)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    opts = parser.parse_args()
    opts.variants = [v.strip() for v in opts.variants.split(",") if v.strip()]
    unknown = sorted(set(opts.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    opts.dtype = opts.dtype or ("bfloat16" if opts.device.startswith("cuda") else "float32")
    result = measure(opts)
    if opts.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['model']} ({result['parameters']:,} parameters, vocabulary {result['vocab']:,}) "
        f"on {result['device_name']}, {result['dtype']}, {result['threads']} thread(s); "
        f"batch {result['batch']} × up to {max(result['prompt_tokens'])} prompt tokens, "
        f"{result['new_tokens']} new tokens, {result['cache']} cache, "
        f"median of {result['repeats']}"
    )
    print(f"{'variant':<8} {'tokens/s':>10} {'× plain':>8}")
    for name, rate in result["tokens_per_s"].items():
        ratio = result["ratio_to_plain"].get(name)
        print(f"{name:<8} {rate:>10.1f} {'' if ratio is None else f'{ratio:.3f}':>8}")
    ratio = result["ratio_to_plain"].get("rollout")
    if ratio is not None:
        print(f"rollout / plain = {ratio:.3f} (target ≥ 0.8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
