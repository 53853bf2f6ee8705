"""Every prompt deeprepo sends, as data.

The root system prompts (``default``, ``exhaustive``, ``small``), the first user message,
the turn countdown and final-turn notes, and the file-audit prompt that root
code (and the scripted policies) send to sub-LLM workers. The file-audit prompt
has a fixed, parseable shape (``<file path="...">`` with numbered lines) so
built-in workers (``static``, ``oracle``) and coverage accounting can read it.
"""

from __future__ import annotations

import re

# What both full root prompts open with: the role and the REPL contract (DESIGN §3).
_ROOT_PREAMBLE = """You are the root orchestrator of a code-analysis system. You analyse a code repository \
for bugs, security vulnerabilities and architecture problems by writing Python that runs in a persistent REPL.

You never see the files directly. The REPL holds them as data:
- `codebase`: dict[str, str], relative path -> file text
- `file_tree`: str, an indented tree of the repository
- `metadata`: dict with files, chars, lines, languages, largest_files, entry_points, skipped, scopes, \
audit_files (the files this run must audit), workers (the worker model and how many prompts it \
answers at once: 1 means llm_batch runs them one after another), and `architecture` (from imports: \
components, edges with import counts, component_cycles, module_cycles, fan_in, entry_points with their \
tests, untested_components, external dependencies)
- `llm_query(prompt, system=None) -> str`: ask one sub-LLM worker
- `llm_batch(prompts) -> list[str]`: ask many workers in parallel (a failed item returns an error string)
- `add_finding(file, line, kind, severity, title, detail="", fix="", cwe=None, end_line=None)`: record a finding
- `file_audit_prompt(path)`: the standard audit prompt for one file (content included, lines numbered); \
workers answer it with JSON: {"findings": [{"line", "end_line", "kind", "cwe", "severity", "title", "detail", "fix"}]}
- `answer`: dict {"content": "", "ready": False}; `set_answer(text)` sets the final report and ends the run

"""
_HOW_TO_WORK = """How to work:
- Write Python in ```python fenced blocks. Each turn you see the printed output (cut to a few thousand chars), \
so print summaries, not whole files.
"""
_PERSISTENCE = """- Variables persist between turns. Avoid triple-quoted strings inside f-strings; build long strings with + or join.
"""

ROOT_SYSTEM_PROMPTS: dict[str, str] = {
    "default": _ROOT_PREAMBLE
    + _HOW_TO_WORK
    + """- Workers are cheap and you are expensive: delegate the reading. Send every relevant source file's content to \
workers with `llm_batch` (group small files, split big ones) rather than reading files yourself.
- Parse the workers' JSON, check doubtful findings, record each real one with `add_finding`, citing the exact line.
"""
    + _PERSISTENCE
    + """- When done, call `set_answer(report)` with a markdown report: summary, the most important issues with \
file:line, architecture notes. deeprepo lists every finding you recorded with `add_finding` itself, so do not \
list them all again. Only the REPL's `answer` ends the run, not your prose.
""",
    "exhaustive": _ROOT_PREAMBLE
    + """Coverage is mandatory: before you answer, EVERY file in `metadata['audit_files']` (code, templates, \
configuration) must have had its content sent to a worker. Keep a set of the paths you dispatched and print how many remain; \
do not call `set_answer` while any source file is uncovered.

"""
    + _HOW_TO_WORK
    + """- Delegate the reading with `llm_batch` over every file; split files longer than a worker can read well.
- Parse the workers' JSON, record each real finding with `add_finding`, citing the exact line.
"""
    + _PERSISTENCE
    + """- When every file is covered, call `set_answer(report)` with a markdown report: summary, the most important \
issues with file:line, architecture notes. deeprepo lists every finding you recorded with `add_finding` itself, \
so do not list them all again. Only the REPL's `answer` ends the run, not your prose.
""",
    # For small local models (1-2B): the REPL names, one worked example, few words. A small
    # model copies an example far more reliably than it follows a list of rules.
    "small": """You analyse a code repository for security bugs by writing Python that runs in a REPL. \
You cannot see the files; the REPL has them.

Names in the REPL:
- `codebase`: dict, path -> file text
- `metadata["audit_files"]`: list of the paths to audit
- `file_audit_prompt(path)`: a ready prompt asking a worker to audit one file
- `llm_batch(prompts)`: sends prompts to workers, returns their answers (JSON text) in order
- `add_finding(file, line, kind, severity, title)`: records one finding
- `set_answer(text)`: sets the final report and ends the run

Example of a whole run, in one ```python block:
```python
import json
paths = metadata["audit_files"]
replies = llm_batch([file_audit_prompt(p) for p in paths])
count = 0
for path, reply in zip(paths, replies):
    try:
        items = json.loads(reply[reply.find("{"):reply.rfind("}") + 1]).get("findings", [])
    except ValueError:
        items = []
    for f in items:
        add_finding(path, int(f.get("line") or 1), f.get("kind", "issue"), f.get("severity", "medium"), f.get("title", ""))
        count += 1
set_answer("Audited " + str(len(paths)) + " files; " + str(count) + " findings.")
```
Reply with one ```python block like this one. Only `set_answer` ends the run.
""",
}

BASELINE_SYSTEM_PROMPT = """You are a senior security engineer reviewing a code repository. You are given as \
many of its files as fit, with numbered lines. Report bugs, security vulnerabilities and architecture problems.
Answer with a markdown report, then a JSON block (```json) holding {"findings": [{"file", "line", "end_line", \
"kind", "cwe", "severity", "title", "detail", "fix"}]} with every finding, citing exact lines."""

WORKER_SYSTEM_PROMPT = """You are a meticulous code auditor. You read one piece of code and report real bugs \
and security vulnerabilities only, each with the exact line numbers shown. Answer with JSON only."""

FILE_AUDIT_INSTRUCTIONS = """Audit the file below for security vulnerabilities and real bugs (injection, \
weak cryptography, hardcoded secrets, path traversal, unsafe deserialization, XSS, SSRF, missing \
authorisation, race conditions, resource leaks, logic errors). Do not report style issues. Do not \
report code that is safe (parameterised queries, secrets read from the environment, strong hashing).
Answer with JSON only, exactly this shape:
{"findings": [{"line": <int>, "end_line": <int>, "kind": "<short-kebab-case>", "cwe": "CWE-<n>", \
"severity": "critical|high|medium|low", "title": "<one line>", "detail": "<why it is a problem>", \
"fix": "<how to fix>"}]}
Answer {"findings": []} when the file has no problem."""

_FILE_PATH = r'<file path="([^"\n]+)"'
# The opening tag of a file block; its body runs to the first ``</file>`` after it.
_FILE_OPEN_RE = re.compile(_FILE_PATH + r'(?: lines="(\d+)-(\d+)")?>\n')
_FILE_CLOSE = "</file>"
#: Only the path of each file block: a cheap count of which files a prompt names.
FILE_HEADER_RE = re.compile(_FILE_PATH)
_NUMBERED_LINE_RE = re.compile(r"^ *\d+ \| ?")


def number_lines(text: str, start: int = 1) -> str:
    """``'a\\nb'`` → ``'    1 | a\\n    2 | b'``: workers cite lines they can see."""
    return "\n".join(f"{i:>5} | {line}" for i, line in enumerate(text.split("\n"), start))


_PATH_UNQUOTE_RE = re.compile(r"&(?:amp|quot|#10|#13);")
_PATH_UNQUOTES = {"&amp;": "&", "&quot;": '"', "&#10;": "\n", "&#13;": "\r"}


def quote_path(path: str) -> str:
    """``path`` as the ``path="…"`` attribute of a file block: a repository may name a file
    with a ``"`` or a newline, which would end the attribute or the tag line early (the
    block then matched nothing: the file was shown, never analysed).

    Self-contained (no module globals): the sandbox kernel rebinds it into its own
    namespace with ``render_file_block``.
    """
    if "&" in path or '"' in path or "\n" in path or "\r" in path:
        path = path.replace("&", "&amp;").replace('"', "&quot;")
        path = path.replace("\n", "&#10;").replace("\r", "&#13;")
    return path


def unquote_path(attr: str) -> str:
    """The path a file block's ``path="…"`` attribute names (:func:`quote_path` undone;
    only its four entities are read, so a hand-written ``a&b.py`` stays as it is)."""
    if "&" not in attr:
        return attr
    return _PATH_UNQUOTE_RE.sub(lambda m: _PATH_UNQUOTES[m.group(0)], attr)


def file_block_paths(prompt: str) -> list[str]:
    """The paths the file blocks of ``prompt`` name, in order (a cheap scan of the tags)."""
    return [unquote_path(p) for p in FILE_HEADER_RE.findall(prompt)]


def render_file_block(path: str, content: str, start_line: int = 1) -> str:
    """One file (or a slice of it starting at ``start_line``) in the audit format."""
    n = content.count("\n") + 1
    lines_attr = f' lines="{start_line}-{start_line + n - 1}"' if start_line != 1 else ""
    return (
        f'<file path="{quote_path(path)}"{lines_attr}>\n'
        f"{number_lines(content, start_line)}\n</file>"
    )


def file_audit_prompt(path: str, content: str, start_line: int = 1) -> str:
    """The standard prompt asking a worker to audit one file (or one slice of it)."""
    return f"{FILE_AUDIT_INSTRUCTIONS}\n\n{render_file_block(path, content, start_line)}\n"


def extract_file_blocks(prompt: str) -> list[tuple[str, str, int]]:
    """Find ``(path, content, start_line)`` for each file block in a prompt, line numbers stripped.

    Prompts are written by root code (a model steered by the repository it reads): the
    scan is one pass with ``str.find``, since a lazy ``(.*?)</file>`` regex rescans the rest
    of the prompt from every unclosed tag (8,000 of them took 40 s).
    """
    out: list[tuple[str, str, int]] = []
    pos = 0
    while (m := _FILE_OPEN_RE.search(prompt, pos)) is not None:
        close = prompt.find(_FILE_CLOSE, m.end())
        if close == -1:
            break  # no later tag can close either
        raw = prompt[m.end() : close]
        if raw.endswith("\n"):
            raw = raw[:-1]
        start = int(m.group(2)) if m.group(2) else 1
        body = "\n".join(_NUMBERED_LINE_RE.sub("", ln, count=1) for ln in raw.split("\n"))
        out.append((unquote_path(m.group(1)), body, start))
        pos = close + len(_FILE_CLOSE)
    return out


def strip_line_number(line: str) -> str:
    """Remove a ``'   12 | '`` prefix if the line has one."""
    return _NUMBERED_LINE_RE.sub("", line, count=1)


def first_user_message(metadata_summary: str, task: str | None = None) -> str:
    body = task or (
        "Analyse this repository for bugs, security vulnerabilities and architecture problems. "
        "Start by exploring `file_tree` and `metadata`, then delegate."
    )
    return (
        f"{body}\n\nRepository overview:\n{metadata_summary}\n\nWrite your first ```python block."
    )


def turn_countdown(turns_left: int) -> str:
    if turns_left == 1:
        return "\n[deeprepo] This is your LAST turn: record remaining findings and call set_answer(report) now."
    return f"\n[deeprepo] {turns_left} turns left. Make sure you call set_answer(report) before they run out."


FINAL_TURN_NOTE = (
    "[deeprepo] You have used all your turns without setting the answer. Reply with one ```python block "
    "that calls set_answer(report) with the best report you can write from what you have now."
)

NO_CODE_NOTE = (
    "[deeprepo] Your reply had no ```python block, so nothing ran. Write Python in a fenced block; "
    "the run ends only when your code calls set_answer(report)."
)


# Small local models (local/<name>): one file (or slice) per call, a short instruction
# set, JSON mode on the server. What was measured with Qwen2.5-Coder-1.5B on ten files of
# two public vulnerable-by-design apps (not the bundled example; docs/local.md):
# - a list of flaw categories in the prompt made it report its first category ("injection",
#   CWE-78) on 21 lines of 10 files, none of them right; asked instead to copy the line's
#   code and say what an attacker could do before naming the flaw, it reported 10, and 2.4x
#   fewer tokens (it is the same instruction for any code, not tuned to one repository);
# - "answer {"findings": []} if clean" made it answer that for every file (0 findings);
# - a real kind as the example of "kind" (sql-injection) was copied onto nearly all of the
#   0.5B model's 72 findings.
# The copied code is also checked: a finding whose code is not in the lines shown is
# dropped, one whose code is a few lines off is moved there (local/provider.py).
SMALL_WORKER_SYSTEM_PROMPT = """You are a code security auditor. Answer with JSON only."""

SMALL_FILE_AUDIT_INSTRUCTIONS = """Audit the code below for security vulnerabilities. For each one, \
give its line number, copy that line's code, and say in a few words what an attacker could do; then \
name the flaw. Report only what you can point to in a line of this code.
Answer JSON: {"findings": [{"line": <line number>, "code": "<the code of that line>", "why": "<what \
an attacker could do>", "kind": "<short name of the flaw>", "cwe": "CWE-<n>", "severity": \
"high|medium|low"}]}"""


def small_file_audit_prompt(path: str, content: str, start_line: int = 1) -> str:
    """The short per-file prompt local workers get in place of :func:`file_audit_prompt`."""
    return f"{SMALL_FILE_AUDIT_INSTRUCTIONS}\n\n{render_file_block(path, content, start_line)}\n"
