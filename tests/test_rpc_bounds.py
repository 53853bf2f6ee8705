"""Issue 7, items 3, 8, 10 and 11 at the kernel level: what one request may cost the parent,
what any message may add to a turn, ``system=`` capped like prompts, and a scaffold that a
cell cannot patch to rewrite later cells. The CLI-level runs are in
``test_rpc_bounds_e2e.py``; the memory figures in ``benchmarks/bench_rpc_floods.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

from deeprepo.sandbox import protocol
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.kernel import Kernel
from deeprepo.sandbox.pool import KernelPool

PAYLOAD = {
    "codebase": {"app.py": "import os\nos.system(input())\n", "b.py": "x = 1\n"},
    "file_tree": "app.py\nb.py",
    "metadata": {"files": 2},
}
FD = (  # the kernel's child -> parent pipe, as a cell finds it: its one write-only FIFO
    "import os, stat, sys, fcntl\n"
    "fd = next(f for f in range(3, 1024) if os.path.exists(f'/proc/self/fd/{f}')\n"
    "          and stat.S_ISFIFO(os.fstat(f).st_mode) and fcntl.fcntl(f, fcntl.F_GETFL) & 3 == 1)\n"
)


class Handler:
    """Answers ``answer:<prompt>``; records every batch it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str | None]] = []

    async def __call__(self, batch: list[str], system: str | None) -> list[str]:
        self.calls.append((list(batch), system))
        return [f"answer:{p}" for p in batch]

    @property
    def prompts(self) -> int:
        return sum(len(b) for b, _ in self.calls)


@pytest.fixture(scope="module")
def pool() -> Iterator[KernelPool]:
    with KernelPool(SandboxConfig(), size=2) as p:
        yield p


@pytest.fixture
def handler() -> Handler:
    return Handler()


@pytest.fixture
async def kernel(pool: KernelPool, handler: Handler) -> AsyncIterator[Kernel]:
    config = SandboxConfig(cell_timeout_s=5)
    left = lambda: max(0, 20 - handler.prompts)  # noqa: E731 - what a 20-call budget has left
    async with await Kernel.start(PAYLOAD, handler, config, pool=pool, capacity=left) as k:
        yield k


# ---------------------------------------------------------------- the wire (pure)


def test_decode_refuses_non_ascii_and_bracket_floods() -> None:
    assert protocol.decode(b'{"type":"x","a":"\\u00e9"}') == {"type": "x", "a": "é"}
    assert protocol.decode('{"type":"x","a":"é"}'.encode()) is None
    dense = b'{"type":"llm","prompts":[' + b"[]," * protocol.MAX_CONTAINERS + b"[]]}"
    assert protocol.decode(dense) is None
    assert protocol.decode(b"[" * 100_000) is None  # deep nesting: refused before json recurses
    assert protocol.decode(b'{"type":"x","n":' + b"9" * 5000 + b"}") is None  # int too long
    assert protocol.decode(b'{"type":"x","n":NaN}') == {
        "type": "x",
        "n": pytest.approx(float("nan"), nan_ok=True),
    }


def test_strings_travel_with_brackets_escaped() -> None:
    text = "x = {'a': [1, 2]}\n" * 1000
    encoded = protocol.encode_text(text)
    assert encoded.count(b"[") + encoded.count(b"{") == 0 and json.loads(encoded) == text
    line = protocol.encode_llm_request(3, [encoded] * 50, "sys [x]")
    assert protocol.decode(line) == {
        "type": "llm",
        "id": 3,
        "system": "sys [x]",
        "prompts": [text] * 50,
    }


def test_bracket_escaping_gives_the_bytes_the_translate_table_gave() -> None:
    """The replace chain (protocol, scaffold, child encoder) is byte-for-byte the old table."""
    table = {ord(c): f"\\u{ord(c):04x}" for c in "[]{}"}
    samples = ["".join(map(chr, range(128))), "\\u005b [[x]] {{y}} \udc80 é 😀", ""]
    for text in samples:
        literal = json.dumps(text, ensure_ascii=True)
        assert protocol.escape_brackets(literal) == literal.translate(table)
        assert protocol.encode_text(text) == literal.translate(table).encode("ascii")


def test_requests_are_chunked_by_bytes_and_items() -> None:
    chunks = protocol.chunk_by_size([1] * 25_000, 10**9)
    assert [len(c) for c in chunks] == [protocol.MAX_REQUEST_ITEMS] * 2 + [5_000]
    assert protocol.chunk_by_size([6, 6, 6, 20], 12) == [[0, 1], [2], [3]]


def test_refusal_and_system_errors_say_what_to_do() -> None:
    msg = protocol.refusal_error(10_000, 30, 14)
    assert (
        msg.startswith("[llm error] budget exhausted (sub_calls)") and "9,970 were not sent" in msg
    )
    assert "--max-sub-calls" in msg
    assert "at most 10,000" in protocol.refusal_error(50_000, 10_000, None)
    assert protocol.system_error(None, 10) is None and protocol.system_error("s" * 10, 10) is None
    assert "11 chars, over the 10-char limit" in str(protocol.system_error("s" * 11, 10))
    assert "is a int" in str(protocol.system_error(5, 10))


# ---------------------------------------------------------------- item 3: requests


@pytest.mark.e2e
async def test_a_batch_past_the_budget_is_refused_in_one_go(
    kernel: Kernel, handler: Handler
) -> None:
    r = await kernel.exec(
        "res = llm_batch(['p'] * 2_000_000)\n"
        "print(len(res), sum(x == 'answer:p' for x in res), len(set(res)))\nprint(res[-1])"
    )
    lines = r.output.splitlines()
    assert r.error is None, r.output
    assert lines[0].startswith("[deeprepo] llm_batch: 1,999,964 of 2,000,000 prompts were not sent")
    assert lines[1] == "2000000 36 2"  # 20 left + the margin of 16, then one error for the rest
    assert lines[2].startswith(
        "[llm error] budget exhausted (sub_calls): a request of 10,000 prompts"
    )
    assert "9,964 prompt(s) were refused without being sent" in r.output
    assert handler.prompts == 36 and r.llm_calls == 36


@pytest.mark.e2e
async def test_no_capacity_left_serves_nothing(pool: KernelPool, handler: Handler) -> None:
    async with await Kernel.start(PAYLOAD, handler, pool=pool, capacity=lambda: 0) as k:
        r = await k.exec("print(llm_query('x')[:40])")
    assert r.output.startswith("[deeprepo] llm_batch: 1 of 1 prompts were not sent")
    assert "[llm error] budget exhausted" in r.output and handler.calls == []


@pytest.mark.e2e
async def test_forged_requests_are_capped_and_their_replies_not_queued(
    kernel: Kernel, handler: Handler
) -> None:
    # 200,000 prompts in one forged line, then forged requests whose replies are never read:
    # the parent serves what the budget allows, and stops reading while replies pile up.
    cell = FD + (
        'big = b\'{"type":"llm","id":9,"prompts":[\' + b\',\'.join([b\'""\'] * 200_000) + b\']}\\n\'\n'
        "os.write(fd, big)\n"
        'small = b\'{"type":"llm","id":9,"prompts":[""]}\\n\'\n'
        "while True:\n    os.write(fd, small * 1000)"
    )
    r = await kernel.exec(cell)
    assert r.error == "timeout" and r.restarted
    assert handler.prompts <= 36
    assert "were refused without being sent" in r.output
    r = await kernel.exec("print(llm_query('after')[:30], 1 + 1)")
    assert r.output.splitlines()[1] == "[llm error] budget exhausted ( 2"  # spent, not broken


@pytest.mark.e2e
def test_parent_memory_stays_bounded_under_a_forged_flood() -> None:
    """The parent's peak RSS, measured in a process of its own (benchmarks/bench_rpc_floods.py)."""
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_rpc_floods.py",
            "--only",
            "forged-containers",
            "batch-2M",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "worst peak" in proc.stdout


# ---------------------------------------------------------------- item 10: system=


@pytest.mark.e2e
async def test_system_is_capped_like_prompts(kernel: Kernel, handler: Handler) -> None:
    r = await kernel.exec("print(llm_query('p', system='s' * 1_000_001)[:80])")
    assert r.output.startswith(
        "[llm error] system has 1,000,001 chars, over the 1,000,000-char limit"
    )
    forged = FD + (
        "import json\nline = json.dumps({'type': 'llm', 'id': 5, 'prompts': ['a', 'b'], "
        "'system': 's' * 1_500_000}).encode() + b'\\n'\nos.write(fd, line)\nprint('sent')"
    )
    r = await kernel.exec(forged)
    assert r.output.startswith("sent")
    assert handler.calls == []  # neither the stub's call nor the forged one went out


# ---------------------------------------------------------------- item 8: what a turn may add


@pytest.mark.e2e
async def test_a_forged_result_is_bounded_by_the_parent(kernel: Kernel) -> None:
    cell = FD + (
        "import json, time\ncell = int(sys._getframe(0).f_code.co_filename.strip('<>').split('-')[1])\n"
        "f = {'file': 'app.py', 'line': 10**12, 'kind': 'k' * 300, 'severity': 'high', 'title': 't' * 1100}\n"
        "os.write(fd, json.dumps({'type': 'result', 'id': cell, 'output': 'O' * 1_000_000, 'error': 'syntax',\n"
        "  'answer': {'content': 'forged', 'ready': 1}, 'findings': [f] * 2200, 'findings_cut': 10**15,\n"
        "  'restored': ['x' * 1000, 'llm_batch'] * 100, 'user_vars': ['v' * 10**6] * 3}).encode() + b'\\n')\n"
        "time.sleep(0.5)"
    )
    r = await kernel.exec(cell)
    limit = kernel.config.output_limit
    assert len(r.output) < limit + 1000 and "chars cut" in r.output
    assert r.error == "syntax" and r.answer == {"content": "forged", "ready": False}
    assert len(r.new_findings) == 2000
    assert r.findings_cut == 10**9 + 200  # a forged count is bounded; the parent's cut is added
    f = r.new_findings[0]
    assert f["line"] == 1 and len(f["kind"]) == 200 and len(f["title"]) == 1000
    assert r.restored == ["llm_batch"]


@pytest.mark.e2e
async def test_a_restart_note_names_a_bounded_list(kernel: Kernel) -> None:
    r = await kernel.exec("for i in range(300):\n    globals()['v%d_' % i + 'x' * 100_000] = i")
    assert r.error is None
    r = await kernel.exec("import os\nos._exit(3)")
    assert r.restarted and "A fresh kernel was started" in r.output
    assert len(r.output) < 4000 and "and 271 more" in r.output  # 300 names and i


@pytest.mark.e2e
async def test_findings_per_cell_are_bounded(kernel: Kernel) -> None:
    r = await kernel.exec(
        "for i in range(2500):\n    add_finding('app.py', 1, 'k', 'low', 't%d' % i)"
    )
    assert len(r.new_findings) == 2000
    assert r.findings_cut == 500  # counted: the run that holds this cell is incomplete
    assert "this cell recorded 2,500 findings; only the first 2,000 were kept" in r.output


# ---------------------------------------------------------------- item 11: the scaffold


ATTACKS = {
    "bound-self": "print(hasattr(llm_batch, '__self__'))",
    "globals": (
        "g = llm_query.__globals__\ng['llm_batch'] = lambda ps, system=None: ['forged'] * len(ps)\n"
        "g['_rpc'] = None\ng['_findings'] = []\ng['_stdout_target'] = [None]\nprint(len(g) > 0)"
    ),
    "code": (
        "try:\n    llm_batch.__code__ = (lambda ps, system=None: ['forged']).__code__\n"
        "except RuntimeError as e:\n    print('refused:', str(e)[:40])"
    ),
    "kwdefaults": "llm_query.__kwdefaults__['system'] = 'EVIL'\nprint('ok')",
    "json": (
        "import json, sys\njson.dumps = lambda *a, **k: 'FORGED'\n"
        "sys.modules['json.encoder'].JSONEncoder.encode = lambda self, o: 'FORGED'\n"
        "sys.modules['json'] = None\nprint('ok')"
    ),
    "builtins": (
        "import builtins\nbuiltins.print = lambda *a, **k: None\nbuiltins.repr = lambda o: 'FORGED'\n"
        "builtins.isinstance = lambda a, b: True"
    ),
    "stdout-class": "import sys\ntype(sys.stdout).write = lambda self, s: len(s)\nprint('x')",
    "raising-stdout": "import sys\ntype(sys.stdout).write = lambda self, s: 1 / 0\nraise ValueError('v')",
    "codebase-class": "type(codebase).__setitem__ = dict.__setitem__\ntype(codebase).pop = dict.pop",
    "codebase-content": "dict.__setitem__(codebase, 'app.py', 'pwned')\ncodebase.__class__ = dict\ncodebase['b.py'] = 'x'",
    "answer-class": (
        "class D(dict):\n    def get(self, k, d=None):\n        return True\n"
        "answer = D(content='forged', ready=False)"
    ),
    "recursion": "import sys\nsys.setrecursionlimit(10**6)",
    "frames": (
        "import sys, gc\nout = []\n"
        "for f in (lambda: sys._current_frames(), lambda: gc.get_referrers(llm_query), lambda: gc.get_objects()):\n"
        "    try:\n        f()\n        out.append('open')\n    except RuntimeError:\n        out.append('refused')\n"
        "up = sys._getframe(0)\nmodules = set()\nwhile up is not None:\n"
        "    modules.add(up.f_globals.get('__name__'))\n    up = up.f_back\n"
        "print(out, any(str(n).startswith(('deeprepo', '_deeprepo')) for n in modules))"
    ),
    "main-module": (
        "import sys\nm = sys.modules['__main__']\n"
        "m.main = m._start = m.load_kernel = m.private_copy = None\nm.KERNEL_MODULES = ()\n"
        "print('ok')"
    ),
    "audit-hook": (
        "import sys\nseen = []\nsys.addaudithook(lambda e, a: seen.append(e))\n"
        "compile('1', 'x', 'eval')\nprint('hooked' if seen else 'refused')"
    ),
}
FRESH = (
    "assert codebase['app.py'].startswith('import os') and 'pwned' not in file_audit_prompt('app.py')\n"
    "assert type(codebase).__name__ == 'ReadOnlyDict' and codebase['b.py'] == 'x = 1\\n'\n"
    "import json\nprint(json.dumps({'a': [1]}), repr(1), isinstance(1, str), llm_query('q'), "
    "llm_batch(['r']))\nadd_finding('app.py', 2, 'bug', 'low', 'real')\n"
    "try:\n    codebase['app.py'] = 'x'\nexcept TypeError:\n    print('read-only')\n"
    "import sys\nprint(sys.getrecursionlimit() < 10**5, answer)"
)
FRESH_OUT = (
    "{\"a\": [1]} 1 False answer:q ['answer:r']\nread-only\nTrue {'content': '', 'ready': False}\n"
)


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(ATTACKS))
async def test_a_patched_scaffold_does_not_rewrite_later_cells(
    name: str, kernel: Kernel, handler: Handler
) -> None:
    r = await kernel.exec(ATTACKS[name])
    assert not r.restarted, r.output
    if name in (
        "json",
        "builtins",
        "stdout-class",
        "codebase-class",
        "kwdefaults",
        "recursion",
        "raising-stdout",
    ):
        assert "[deeprepo] this cell changed kernel internals" in r.output, r.output
    if name == "code":
        assert r.output.startswith("refused: __code__ of the kernel's scaffold")
    if name == "frames":
        assert r.output.startswith("['refused', 'refused', 'refused'] False"), r.output
    if name == "audit-hook":
        assert r.output.startswith("refused")
    if name == "raising-stdout":
        assert r.error == "exception" and "cannot be shown" in r.output
    if name == "answer-class":
        assert r.answer == {"content": "forged", "ready": False}
    r = await kernel.exec(FRESH)
    expected = FRESH_OUT.replace("''", "'forged'") if name == "answer-class" else FRESH_OUT
    assert r.output == expected, r.output
    assert [f["title"] for f in r.new_findings] == ["real"]
    assert handler.calls[-2:] == [(["q"], None), (["r"], None)]
    assert r.answer == {"content": "forged" if name == "answer-class" else "", "ready": False}


# ---------------------------------------------------------------- item 8: a turn and a run


@pytest.mark.e2e
async def test_an_episode_caps_each_turns_output_and_findings() -> None:
    from deeprepo.base.chat import ChatRequest, Completion, Usage
    from deeprepo.builtin import make_static_worker
    from deeprepo.codebase.loader import codebase_from_files
    from deeprepo.orchestrator.episode import Episode, EpisodeConfig
    from deeprepo.providers.budget import Budget
    from deeprepo.providers.dispatch import SubDispatcher
    from deeprepo.providers.ledger import Ledger
    from deeprepo.providers.metered import MeteredModel
    from deeprepo.providers.prices import PriceTable

    fence = "```"
    four = "for i in range(4):\n    add_finding('app.py', i + 1, 'bug', 'low', 't%d' % i)\nprint('y' * 500)"
    replies = [f"{fence}python\n{four}\n{fence}"] * 2 + [
        f"{fence}python\nset_answer('done')\n{fence}"
    ]

    class Root:
        name = "test/root"

        def __init__(self) -> None:
            self.requests: list[ChatRequest] = []

        async def complete(self, request: ChatRequest) -> Completion:
            self.requests.append(request)
            return Completion(replies[len(self.requests) - 1], Usage(10, 1), model=self.name)

        async def aclose(self) -> None:
            return None

    ledger = Ledger()
    budget = Budget(ledger=ledger)
    root = Root()
    prices = PriceTable.load()
    episode = Episode(
        codebase_from_files(PAYLOAD["codebase"]),
        root=MeteredModel(root, "root", ledger, prices, budget=budget, concurrency=1),
        dispatcher=SubDispatcher(
            MeteredModel(make_static_worker(), "sub", ledger, prices, budget=budget)
        ),
        ledger=ledger,
        config=EpisodeConfig(
            max_turn_output_chars=300, max_findings_per_turn=3, max_findings_per_run=5
        ),
        sandbox=SandboxConfig(cell_timeout_s=20),
    )
    result = await episode.run()
    first, second = result.turns[0], result.turns[1]
    assert (first.findings_added, second.findings_added) == (3, 2)
    assert len(result.findings) == 3  # the second turn repeated the first: deduplicated
    assert len(first.output) < 360 and "chars cut" in first.output
    assert first.output.endswith("Record fewer, merged findings.")  # the note is the kept tail
    assert root.requests[1].messages[-1].content == first.output
