"""The sandbox kernel: the REPL contract, output cutting, error hints, restarts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from deeprepo.base import prompts
from deeprepo.base.errors import SandboxError, SandboxRefused
from deeprepo.sandbox import isolation, protocol
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.framing import HeadTailBuffer, LineSplitter, MarkedOutput
from deeprepo.sandbox.kernel import Kernel
from deeprepo.sandbox.pool import KernelPool
from deeprepo.sandbox.protocol import cut_middle, format_syntax_error, syntax_hint
from deeprepo.sandbox.scaffold import ReadOnlyDict

FILES = {
    "app/main.py": "import os\n\ndef run(cmd):\n    os.system(cmd)\n",
    "app/util.py": "def add(a, b):\n    return a + b\n",
    "README.md": "# demo\n",
}
PAYLOAD: dict[str, Any] = {
    "codebase": FILES,
    "file_tree": "app/\n  main.py\n  util.py\nREADME.md",
    "metadata": {"files": 3, "languages": {"python": 2, "markdown": 1}},
}
MODES = ["auto", "process"]


class FakeHandler:
    """Answers each prompt with ``answer:<prompt>``; prompts containing FAIL fail."""

    def __init__(self, *, raises: bool = False, delay: float = 0.0) -> None:
        self.calls: list[tuple[list[str], str | None]] = []
        self.raises = raises
        self.delay = delay

    async def __call__(self, batch: list[str], system: str | None) -> list[str]:
        self.calls.append((list(batch), system))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.raises:
            raise RuntimeError("provider down")
        return [f"[llm error] refused: {p}" if "FAIL" in p else f"answer:{p}" for p in batch]


@pytest.fixture(scope="module")
def pool() -> Iterator[KernelPool]:
    with KernelPool(SandboxConfig(), size=2) as p:
        yield p


@pytest.fixture
def handler() -> FakeHandler:
    return FakeHandler()


@pytest.fixture
async def kernel(handler: FakeHandler, pool: KernelPool) -> AsyncIterator[Kernel]:
    async with await Kernel.start(
        PAYLOAD, handler, SandboxConfig(cell_timeout_s=5), pool=pool
    ) as k:
        yield k


# ---------------------------------------------------------------- the REPL contract


@pytest.mark.e2e
@pytest.mark.parametrize("mode", MODES)
async def test_namespace_persists_between_cells(mode: str, handler: FakeHandler) -> None:
    async with await Kernel.start(PAYLOAD, handler, SandboxConfig(mode=mode)) as k:  # type: ignore[arg-type]
        assert k.mode in ("bwrap", "process")
        r1 = await k.exec("total = 40\ndef bump(x):\n    return x + 2")
        r2 = await k.exec("print(bump(total))")
        assert (r1.error, r2.error) == (None, None)
        assert r2.output == "42\n"
        assert not r2.restarted


@pytest.mark.e2e
async def test_preloaded_names(kernel: Kernel) -> None:
    r = await kernel.exec(
        f"print(isinstance(codebase, dict), sorted(codebase) == {sorted(FILES)!r})\n"
        "print(codebase['app/util.py'].count(chr(10)), file_tree.splitlines()[0], metadata['files'])\n"
        "print(answer, [callable(f) for f in (llm_query, llm_batch, add_finding, set_answer, file_audit_prompt)])"
    )
    assert r.error is None
    assert r.output.splitlines() == [
        "True True",
        "2 app/ 3",
        "{'content': '', 'ready': False} [True, True, True, True, True]",
    ]


@pytest.mark.e2e
async def test_last_expression_is_shown(kernel: Kernel) -> None:
    r = await kernel.exec("x = 6\nx * 7")
    assert r.output == "42\n"
    r = await kernel.exec("None")
    assert r.output == ""


@pytest.mark.e2e
async def test_cells_show_the_same_with_or_without_the_ast(kernel: Kernel) -> None:
    """The runner compiles a cell ending in an expression at column 0 as two pieces of
    source; every other cell through the AST. Both read a cell the same way."""
    cases: list[tuple[str, str | None]] = [
        ("x = 2\nprint(\n    x)\nx * 21\n\n# done\n", "2\n42\n"),  # fast path
        ('"""a docstring"""\ny = 3\ny', "3\n"),
        ('s = """\n1 + 1\n"""\n', ""),  # the last col-0 line sits inside a string
        ("t = (1,\n2)\nlen(t)", "2\n"),
        ("z = [1,\n2]\n", ""),  # the last col-0 line closes a bracket: AST path
        ("if True:\n    w = 5\nelse:\n    w = 6\nw", "5\n"),
        ("def g():\n    return 7\ng()", "7\n"),
        ("'only' + ' a string'", "'only a string'\n"),
        ("v = 1\r\nv + 1", "2\n"),  # \r\n: AST path
        ("a = 1; a + 1", "2\n"),  # starts as an assignment: AST path
        ("f = lambda x=3: x\nlambda x=3: x", None),  # an expression that looks like one
        ("n = 4\nn == 4", "True\n"),
        ("m = {'k': 1}\nm['k'] <= 1", "True\n"),
        ("p, q = 1, 2\np, q = q, p\n", ""),
        ("o = type('O', (), {})()\no.attr = 9\no.attr", "9\n"),
    ]
    for code, shown in cases:
        r = await kernel.exec(code)
        if shown is None:  # a value whose repr names an address
            assert r.error is None and r.output.startswith("<function <lambda>"), r.output
            continue
        assert (r.error, r.output) == (None, shown), code
    # A failing final expression names its own line, as the AST path did.
    r = await kernel.exec("q = {}\n\nq['missing']")
    assert r.error == "exception" and "line 3" in r.output and "KeyError" in r.output
    r = await kernel.exec("x = (\nx")
    assert r.error == "syntax" and "SyntaxError" in r.output


@pytest.mark.e2e
async def test_codebase_is_read_only_but_copyable(kernel: Kernel) -> None:
    r = await kernel.exec("codebase['new.py'] = 'x'")
    assert r.error == "exception" and "codebase is read-only" in r.output
    r = await kernel.exec(
        "import copy, json\nfiles = dict(codebase); files['n'] = ''\nprint(len(files), len(copy.copy(codebase)), len(json.dumps(codebase)) > 50)"
    )
    assert r.output == "4 3 True\n"
    with pytest.raises(TypeError):
        ReadOnlyDict({"a": "b"}).update({"c": "d"})


@pytest.mark.e2e
async def test_llm_batch_keeps_order_and_failed_items_are_strings(
    kernel: Kernel, handler: FakeHandler
) -> None:
    r = await kernel.exec("res = llm_batch(['one', 'FAIL two', 'three'])\nprint(res)")
    assert r.error is None
    assert r.output == "['answer:one', '[llm error] refused: FAIL two', 'answer:three']\n"
    assert r.llm_calls == 3
    assert handler.calls == [(["one", "FAIL two", "three"], None)]


@pytest.mark.e2e
async def test_llm_query_passes_system_and_empty_batch_calls_nothing(
    kernel: Kernel, handler: FakeHandler
) -> None:
    r = await kernel.exec("print(llm_query('hi', system='be brief'))\nprint(llm_batch([]))")
    assert r.output == "answer:hi\n[]\n"
    assert handler.calls == [(["hi"], "be brief")]
    assert r.llm_calls == 1


@pytest.mark.e2e
async def test_non_string_prompt_becomes_error_string(kernel: Kernel, handler: FakeHandler) -> None:
    r = await kernel.exec(
        "res = llm_batch(['ok', 42, None])\nprint(res[0]); print(res[1][:11], 'int' in res[1], 'NoneType' in res[2])"
    )
    assert r.error is None
    assert r.output == "answer:ok\n[llm error] True True\n"
    assert handler.calls == [(["ok"], None)]  # only the string was sent
    r = await kernel.exec("llm_batch('a single string')")
    assert r.error == "exception" and "use llm_query" in r.output


@pytest.mark.e2e
async def test_failing_handler_fails_items_not_the_kernel(pool: KernelPool) -> None:
    async with await Kernel.start(PAYLOAD, FakeHandler(raises=True), pool=pool) as k:
        r = await k.exec("print(llm_batch(['a', 'b']))")
        assert r.error is None
        assert r.output.count("[llm error] RuntimeError: provider down") == 2


@pytest.mark.e2e
async def test_sub_llm_wait_does_not_count_against_cell_timeout(pool: KernelPool) -> None:
    config = SandboxConfig(cell_timeout_s=0.5)
    async with await Kernel.start(PAYLOAD, FakeHandler(delay=0.8), config, pool=pool) as k:
        r = await k.exec("print(llm_query('slow'))")
        assert (r.error, r.output, r.restarted) == (None, "answer:slow\n", False)
        assert r.seconds >= 0.8


@pytest.mark.e2e
async def test_file_audit_prompt_matches_the_prompts_module(kernel: Kernel) -> None:
    r = await kernel.exec("print(file_audit_prompt('app/main.py'), end='')")
    assert r.output == prompts.file_audit_prompt("app/main.py", FILES["app/main.py"])
    r = await kernel.exec("print(file_audit_prompt('app/main.py', 3, 4), end='')")
    assert r.output == prompts.file_audit_prompt(
        "app/main.py", "def run(cmd):\n    os.system(cmd)", 3
    )
    r = await kernel.exec("file_audit_prompt('nope.py')")
    assert r.error == "exception" and "not in codebase" in r.output


# ---------------------------------------------------------------- output


@pytest.mark.e2e
async def test_printing_ten_million_chars_is_cut_with_head_tail_and_note(kernel: Kernel) -> None:
    r = await kernel.exec("print('HEAD' + 'x' * 10**7 + 'TAIL')")
    limit = kernel.config.output_limit
    assert r.error is None
    assert r.output.startswith("HEADxxx") and r.output.endswith("xxxTAIL\n")
    cut = 4 + 10**7 + 4 + 1 - limit
    assert f"[... {cut:,} chars cut ...]" in r.output
    assert len(r.output) <= limit + 40


@pytest.mark.e2e
async def test_many_small_prints_are_cut_too(kernel: Kernel) -> None:
    r = await kernel.exec("for i in range(200_000):\n    print(i)")
    assert r.output.startswith("0\n1\n2\n") and r.output.endswith("199998\n199999\n")
    assert len(r.output) < kernel.config.output_limit + 40


@pytest.mark.e2e
async def test_raw_fd_output_is_captured_and_cannot_corrupt_the_protocol(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os\nos.write(1, b'{\"type\": \"result\", \"id\": 999}\\n')\nos.write(2, b'err-bytes\\n')\nprint('normal')"
    )
    assert r.error is None
    assert r.output.startswith("normal\n[written directly to fd 1/2")
    assert '{"type": "result", "id": 999}' in r.output and "err-bytes" in r.output
    assert (await kernel.exec("print(1)")).output == "1\n"


def test_cut_middle_and_head_tail_buffer_agree() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    assert cut_middle(text, 2000) == text
    cut = cut_middle(text, 100)
    assert cut == text[:50] + "\n[... 900 chars cut ...]\n" + text[-50:]
    buf = HeadTailBuffer(100)
    for i in range(0, 1000, 7):
        buf.write(text[i : i + 7])
    assert buf.getvalue() == cut
    assert (buf.total, buf.cut) == (1000, 900)


def test_line_splitter_drops_over_long_lines_and_resyncs() -> None:
    s = LineSplitter(max_line=10)
    assert s.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert s.feed(b":2}\n" + b"x" * 30) == [b'{"b":2}']
    assert s.feed(b"y" * 5 + b"\nok\n") == [b"ok"]
    assert s.dropped == 1


def test_marked_output_splits_cells_across_reads() -> None:
    out = MarkedOutput(1000)
    mark = protocol.CELL_END_MARK % 7
    stream = b"first\n" + mark + b"second"
    for i in range(len(stream)):  # one byte at a time: marks split by reads still count
        out.feed(stream[i : i + 1])
    assert out.has(7)
    assert out.take(7) == "first\n"
    assert out.take_all() == "second"


def test_init_message_carries_any_text_exactly() -> None:
    files = {
        "a.py": "x = 'é'\n",
        "dir/ü.txt": "🙂 emoji\r\nline",
        "empty": "",
        "bad": "lone \udc80 surrogate",
    }
    line = protocol.encode_init({"codebase": files, "file_tree": "t", "metadata": {}}, {"k": 1})
    header_end = line.index(b"\n") + 1
    header = protocol.decode(line[:header_end])
    assert header is not None and header["blob_bytes"] == len(line) - header_end
    header["blob"] = line[header_end:]
    assert protocol.decode_files(header) == files
    assert header["payload"] == {"file_tree": "t", "metadata": {}}


def test_an_oversized_result_drops_findings_not_the_message() -> None:
    result = {
        "type": "result",
        "id": 1,
        "output": "",
        "answer": {"content": "r" * 5000, "ready": True},
    }
    result["findings"] = [{"file": "a.py", "title": "t" * 100}] * 1000
    line = protocol.encode_result(result, max_bytes=20_000)
    msg = protocol.decode(line)
    assert msg is not None and len(line) <= 20_000
    assert 0 < len(msg["findings"]) < 1000
    assert "too large; dropped:" in msg["output"] and msg["answer"]["content"] == "r" * 5000


@pytest.mark.e2e
async def test_non_ascii_codebase_round_trips(pool: KernelPool, handler: FakeHandler) -> None:
    payload = {**PAYLOAD, "codebase": {"naïve.py": "s = '日本語 🙂'\n", "b.py": "x"}}
    async with await Kernel.start(payload, handler, pool=pool) as k:
        r = await k.exec("print(codebase['naïve.py'], len(codebase['naïve.py']))")
        assert r.output == "s = '日本語 🙂'\n 12\n"


def test_a_flood_of_raw_output_is_kept_as_head_and_tail_bytes() -> None:
    out = MarkedOutput(100)
    for _ in range(1000):
        out.feed(b"y" * 10_000)
    out.feed(b"END" + protocol.CELL_END_MARK % 3)
    text = out.take(3)
    assert text.startswith("y" * 50) and text.endswith("yyyEND")
    assert f"[... {10_000_000 + 3 - 100:,} bytes cut ...]" in text


# ---------------------------------------------------------------- errors and hints


@pytest.mark.e2e
async def test_syntax_error_shows_line_caret_and_hint(kernel: Kernel) -> None:
    r = await kernel.exec("x = 1\nif x > 0\n    print(x)")
    assert r.error == "syntax"
    lines = r.output.splitlines()
    assert lines[0].startswith("SyntaxError: expected ':' (line 2)")
    assert lines[1] == "    if x > 0"
    assert lines[2].strip().startswith("^")
    assert lines[3].startswith("Hint: ")
    assert "Nothing in this cell ran." in r.output


@pytest.mark.parametrize(
    "code",
    [
        'report = f"""Findings:\n{"""\n""".join(items)}\n"""',
        "x = f'''a {'''b'''} c'''",
        'text = """never closed\nprint(1)',
    ],
)
def test_triple_quote_in_f_string_hint(code: str) -> None:
    try:
        compile(code, "<cell>", "exec")
    except SyntaxError as exc:
        text = format_syntax_error(exc, code)
    else:
        pytest.fail("expected a SyntaxError")
    assert "triple-quoted" in text and "+ or '\\n'.join" in text


@pytest.mark.e2e
async def test_triple_quote_hint_reaches_the_root(kernel: Kernel) -> None:
    r = await kernel.exec('summary = f"""Report\n{"""x"""}\n"""\nprint(summary)')
    assert r.error == "syntax"
    assert "Build the text with + or '\\n'.join" in r.output


def test_syntax_hint_cases() -> None:
    assert "backslash" in syntax_hint(
        "f-string expression part cannot include a backslash", 'f"{a\\n}"'
    )
    assert "without await" in syntax_hint("'await' outside function", "await llm_batch(p)")
    assert "markdown" in syntax_hint("invalid syntax", "```python")
    assert "indentation" in syntax_hint("unexpected indent", "  x = 1").lower()
    assert "bracket" in syntax_hint("'(' was never closed", "print((1, 2)")
    assert (
        syntax_hint("invalid syntax", "x = = 1") == "Fix the line shown and resend the whole cell."
    )


@pytest.mark.e2e
async def test_exception_traceback_shows_only_cell_frames(kernel: Kernel) -> None:
    r = await kernel.exec("def f(d):\n    return d['missing']\nf({})")
    assert r.error == "exception"
    assert 'File "<cell-' in r.output and "KeyError: 'missing'" in r.output
    assert "deeprepo/sandbox" not in r.output  # no frame of the kernel's own
    r = await kernel.exec("import sys\nsys.exit(3)")
    assert r.error == "exception" and "kernel keeps running" in r.output


# ---------------------------------------------------------------- scaffold, answer, findings


@pytest.mark.e2e
async def test_scaffold_overwrite_is_restored(kernel: Kernel) -> None:
    r = await kernel.exec("llm_batch = None\ncodebase = {}\ndel set_answer\nmetadata = 1")
    assert sorted(r.restored) == ["codebase", "llm_batch", "metadata", "set_answer"]
    assert "restored" in r.output
    r = await kernel.exec("print(len(codebase), llm_batch(['q']), metadata['files'])")
    assert r.output == "3 ['answer:q'] 3\n"
    assert r.restored == []


@pytest.mark.e2e
async def test_answer_rebound_to_text_is_restored_keeping_the_text(kernel: Kernel) -> None:
    r = await kernel.exec("answer = 'my report'")
    assert r.restored == ["answer"]
    assert r.answer == {"content": "my report", "ready": False}
    r = await kernel.exec(
        "answer = {'content': 'mine', 'ready': False}"
    )  # a proper dict is accepted
    assert (r.restored, r.answer) == ([], {"content": "mine", "ready": False})


@pytest.mark.e2e
async def test_answer_and_set_answer(kernel: Kernel) -> None:
    r = await kernel.exec("answer['content'] = 'draft'")
    assert r.answer == {"content": "draft", "ready": False}
    r = await kernel.exec("print('REPL output: set_answer(x)')")  # prose cannot end the run
    assert r.answer["ready"] is False
    r = await kernel.exec("set_answer('# Final report')")
    assert r.answer == {"content": "# Final report", "ready": True}


@pytest.mark.e2e
async def test_add_finding_records_this_cells_findings(kernel: Kernel) -> None:
    r = await kernel.exec(
        "add_finding('app/main.py', 4, 'command-injection', 'high', 'os.system on input', cwe='CWE-78')\n"
        "add_finding('ghost.py', '7', 'bug', 'low', 't', detail='d', fix='f', end_line=9)"
    )
    assert r.error is None
    assert r.new_findings == [
        {"file": "app/main.py", "line": 4, "end_line": 4, "kind": "command-injection",
         "severity": "high", "title": "os.system on input", "detail": "", "fix": "", "cwe": "CWE-78"},
        {"file": "ghost.py", "line": 7, "end_line": 9, "kind": "bug", "severity": "low", "title": "t",
         "detail": "d", "fix": "f", "cwe": None},
    ]  # fmt: skip
    assert "'ghost.py' is not a file in codebase" in r.output
    r = await kernel.exec("add_finding('app/util.py', 'two', 'bug', 'low', 't')")
    assert r.error == "exception" and r.new_findings == []
    assert (await kernel.exec("x = 1")).new_findings == []


# ---------------------------------------------------------------- isolation basics


@pytest.mark.e2e
@pytest.mark.parametrize("mode", MODES)
async def test_child_env_has_no_api_keys(
    mode: str, monkeypatch: pytest.MonkeyPatch, handler: FakeHandler
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test-secret-123")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-test-secret-456")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    async with await Kernel.start(PAYLOAD, handler, SandboxConfig(mode=mode)) as k:  # type: ignore[arg-type]
        r = await k.exec(
            "import os\nprint(sorted(os.environ))\nprint(open('/proc/self/environ', 'rb').read().count(b'secret'))"
        )
    names = eval(r.output.splitlines()[0])
    assert set(names) <= {"PATH", "LANG", "HOME", "TMPDIR", "PWD", "LC_CTYPE"}
    assert r.output.splitlines()[1] == "0"
    assert "secret" not in r.output


# ---------------------------------------------------------------- timeouts and restarts


@pytest.mark.e2e
@pytest.mark.parametrize("mode", MODES)
async def test_infinite_loop_is_stopped_and_a_fresh_kernel_started(
    mode: str, handler: FakeHandler
) -> None:
    config = SandboxConfig(mode=mode, cell_timeout_s=1.0)  # type: ignore[arg-type]
    async with await Kernel.start(PAYLOAD, handler, config) as k:
        await k.exec("alpha = 1\nbeta = [1, 2]\nimport json\nanswer['content'] = 'partial'")
        r = await k.exec("while True:\n    pass")
        assert r.error == "timeout"
        assert r.restarted is True
        assert r.lost_variables == ["alpha", "beta", "json"]
        assert r.seconds >= 1.0  # no upper bound: a loaded machine reaps and restarts later
        assert "longer than the 1s limit" in r.output and "alpha, beta, json" in r.output
        r = await k.exec("print(len(codebase), 'alpha' in globals(), answer['content'])")
        assert (r.error, r.restarted, r.output) == (None, False, "3 False partial\n")


@pytest.mark.e2e
async def test_cancelled_exec_stops_the_kernel_and_the_next_exec_restarts(kernel: Kernel) -> None:
    await kernel.exec("keep = 1")
    task = asyncio.create_task(kernel.exec("import time\ntime.sleep(30)"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    r = await kernel.exec("print(len(codebase))")
    assert (r.restarted, r.lost_variables, r.output.splitlines()[0]) == (True, ["keep"], "3")
    assert "cancelled" in r.output


@pytest.mark.e2e
async def test_closing_during_a_cell_ends_the_cell_with_an_error(pool: KernelPool) -> None:
    k = await Kernel.start(PAYLOAD, FakeHandler(), pool=pool)
    task = asyncio.create_task(k.exec("import time\ntime.sleep(30)"))
    await asyncio.sleep(0.2)
    await k.close()
    with pytest.raises(SandboxError, match="closed"):
        await task


@pytest.mark.e2e
async def test_closed_kernel_refuses_to_exec(handler: FakeHandler) -> None:
    k = await Kernel.start(PAYLOAD, handler, SandboxConfig(mode="process"))
    await k.close()
    await k.close()
    with pytest.raises(SandboxError, match="closed"):
        await k.exec("1")


# ---------------------------------------------------------------- modes and pool


@pytest.mark.e2e
async def test_pool_start_uses_a_prestarted_child(pool: KernelPool, handler: FakeHandler) -> None:
    pool.fill()
    idle_pids = {child.pid for child in pool._idle}
    assert len(idle_pids) == pool.size
    async with await Kernel.start(PAYLOAD, handler, SandboxConfig(), pool=pool) as k:
        assert k.mode == pool.mode
        assert k.pid in idle_pids
        assert (await k.exec("print(len(codebase))")).output == "3\n"
    other = SandboxConfig(
        tmp_size_mb=pool.config.tmp_size_mb + 1
    )  # another setup: not from this pool
    async with await Kernel.start(PAYLOAD, handler, other, pool=pool) as k:
        assert k.pid not in {child.pid for child in pool._idle} | idle_pids


async def test_auto_refuses_to_run_without_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "bwrap is not installed")
    with pytest.raises(SandboxRefused, match="install bubblewrap") as refused:
        isolation.resolve_mode("auto")
    assert "--sandbox process" in str(refused.value) and "\n" not in str(refused.value)
    assert refused.value.exit_code == 2
    with pytest.raises(SandboxError, match="--sandbox process"):
        isolation.resolve_mode("bwrap")
    monkeypatch.setattr(isolation, "_warned", set())
    with pytest.warns(RuntimeWarning, match="--sandbox process"):
        chosen = isolation.resolve_mode("process")  # asked for by name: runs, with a warning
    assert chosen.mode == "process" and chosen.note is not None


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="auto, bwrap or process"):
        SandboxConfig(mode="docker")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SandboxConfig(cell_timeout_s=0)
