"""What the kernel's two sides share: the wire format and the text helpers.

The text helpers cut output to a size (keeping head and tail) and explain
errors to the root model (a SyntaxError's line, caret and hint; a traceback of
the cell's own frames). The parent's side of the framing (splitting the child's
streams into lines and cells) is in ``framing.py``.

Stdlib only, and no deeprepo imports: the child (``child.py``) runs this module as a
private copy, found by name (nothing of the parent's code or dependencies in the sandbox).

Messages are JSON objects, one per line, on two dedicated pipes (not the child's
stdin/stdout, so whatever the cell prints cannot corrupt them)::

    parent -> child
      {"type": "init", "options": {...}, "payload": {tree, metadata}, "paths": [...],
       "sizes": [...], "blob_bytes": n} + n raw bytes    once: limits and codebase
      {"type": "exec", "id": n, "code": "..."}
      {"type": "llm_result", "id": n, "results": ["...", ...],
       "refused": n, "error": "..."}              refused: prompts past "results", one error for all
      {"type": "restore_answer", "content": "..."}   after a restart: the answer text so far
      {"type": "shutdown"}
    child -> parent
      {"type": "ready", "pid": n}               interpreter up (pooled children wait here)
      {"type": "init_ok", "files": n} | {"type": "init_error", "message": "..."}
      {"type": "llm", "id": n, "prompts": [...], "system": "..." | null}
      {"type": "result", "id": n, "output": "...", "error": ..., "answer": {...},
       "findings_cut": n,
       "findings": [...], "restored": [...], "user_vars": [...], "mark": bool}

After each cell the child also writes ``CELL_END_MARK % id`` to its fd 1, so the
parent knows which raw fd-1/fd-2 output (a subprocess, a C library, a crash
message) belongs to the cell.
"""

from __future__ import annotations

import json
import os
import traceback
from typing import Any

# A child -> parent line longer than this is dropped by the reader, with a note. It bounds
# the parent's memory: decoding a line costs at most ~25x its size (a line of "[]," makes
# a list per 3 bytes), so 8 MiB stays near 200 MB whatever a cell writes on the pipe.
MAX_LINE_BYTES = 8 * 1024 * 1024
# A big llm_batch travels as requests of at most this many encoded bytes and prompts; the
# parent serves one request at a time and refuses prompts past the sub-call budget.
LLM_CHUNK_BYTES = 4 * 1024 * 1024
MAX_REQUEST_ITEMS = 10_000
REQUEST_MARGIN = 16  # prompts served past the budget left, so the budget's own error shows
# The child writes brackets inside strings as \u escapes, so a real message has few
# structural ones; a line with more is refused unread (a line of "[]," decodes to 25x its size).
MAX_CONTAINERS = 4096
# ``str.translate`` table (a tuple: nothing can change it) escaping brackets after
# ``json.encoder.encode_basestring_ascii``.
BRACKETS = tuple(
    {"[": "\\u005b", "]": "\\u005d", "{": "\\u007b", "}": "\\u007d"}.get(chr(i), chr(i))
    for i in range(128)
)
CELL_END_MARK = b"\x00deeprepo-cell-end:%d\x00"
ERROR_PREFIX = "[llm error]"
MAX_USER_VARS = 500  # names reported per cell (a cell could create millions)


def encode(message: dict[str, Any]) -> bytes:
    """One message as a JSON line. ASCII escapes keep lone surrogates encodable."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def decode(line: bytes) -> dict[str, Any] | None:
    """Parse one line; ``None`` when it is not a JSON object with a string ``type``.

    Both sides write ASCII only (:func:`encode`), so other bytes mark a forged line, and the
    child escapes brackets in strings, so more than ``MAX_CONTAINERS`` of them does too;
    refusing both keeps what decoding a line costs in memory near its size.
    """
    if not line.isascii() or line.count(b"[") + line.count(b"{") > MAX_CONTAINERS:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return value
    return None


def encode_init(payload: dict[str, Any], options: dict[str, Any]) -> bytes:
    """The init message: a JSON header line, then every file's text as one raw UTF-8 blob.

    JSON-escaping megabytes of source (every newline, every quote) costs ~6 ns a char
    each way; the blob costs a memcpy. The header carries paths and char lengths.
    """
    files = payload.get("codebase") or {}
    paths = [str(p) for p in files]
    texts = [t if isinstance(t, str) else str(t) for t in files.values()]
    blob = "".join(texts).encode("utf-8", "surrogatepass")
    rest = {k: v for k, v in payload.items() if k != "codebase"}
    header = {
        "type": "init",
        "options": options,
        "payload": rest,
        "paths": paths,
        "sizes": [len(t) for t in texts],
        "blob_bytes": len(blob),
    }
    return encode(header) + blob


def decode_files(init: dict[str, Any]) -> dict[str, str]:
    """The ``{path: text}`` an :func:`encode_init` message carries (header plus ``blob``)."""
    text = bytes(init.get("blob") or b"").decode("utf-8", "surrogatepass")
    files: dict[str, str] = {}
    pos = 0
    for path, size in zip(init.get("paths") or [], init.get("sizes") or [], strict=True):
        files[path] = text[pos : pos + size]
        pos += size
    return files


def encode_result(result: dict[str, Any], max_bytes: int = MAX_LINE_BYTES // 2) -> bytes:
    """A result message that fits in ``max_bytes``: findings beyond that and an
    over-long answer are dropped, with a note in the output, rather than the whole
    message being refused by the parent."""
    line = encode(result)
    notes: list[str] = []
    findings = list(result.get("findings") or [])
    while len(line) > max_bytes and findings:
        keep = len(findings) // 2
        notes.append(f"{len(findings) - keep} findings")
        findings = findings[:keep]
        line = encode({**result, "findings": findings})
    answer = dict(result.get("answer") or {})
    content = answer.get("content")
    if len(line) > max_bytes and isinstance(content, str):
        answer["content"] = content[: max_bytes // 16]
        notes.append("the end of the answer")
    output = str(result.get("output") or "")
    if len(line) > max_bytes and len(output) > max_bytes // 16:
        output = cut_middle(output, max_bytes // 16)
        notes.append("the middle of the output")
    if notes:
        output = (
            f"{output}[deeprepo] the cell's result was too large; dropped: {', '.join(notes)}.\n"
        )
        line = encode({**result, "findings": findings, "answer": answer, "output": output})
    return line


def encode_llm_request(call_id: int, prompts: list[bytes], system: str | None) -> bytes:
    """An ``llm`` request from prompts already encoded one by one (:func:`encode_text`)."""
    head = encode({"type": "llm", "id": call_id, "system": system})[:-2]
    return head + b',"prompts":[' + b",".join(prompts) + b"]}\n"


def escape_brackets(encoded: str) -> str:
    """``encoded`` (a JSON string literal) with its brackets as ``\\u`` escapes.

    Four ``str.replace`` calls: ~5x faster than ``str.translate`` with a table on the
    child's hot path (every prompt of an ``llm_batch``), the same output. The scaffold
    and the child's JSON encoder inline the same chain (no call per string)."""
    return (
        encoded.replace("[", "\\u005b")
        .replace("]", "\\u005d")
        .replace("{", "\\u007b")
        .replace("}", "\\u007d")
    )


def encode_text(text: str) -> bytes:
    """One string as JSON the way the child writes it: ASCII, brackets escaped."""
    return escape_brackets(json.dumps(text, ensure_ascii=True)).encode("ascii")


def system_error(system: object, max_chars: int) -> str | None:
    """Why ``system`` cannot be sent, as the error each prompt of the call gets, or None."""
    if system is None:
        return None
    if not isinstance(system, str):
        return f"{ERROR_PREFIX} system is a {type(system).__name__}, not a str or None, so nothing was sent."
    if len(system) > max_chars:
        return (
            f"{ERROR_PREFIX} system has {len(system):,} chars, over the {max_chars:,}-char limit "
            "for one prompt, so nothing was sent. Shorten it and put the text in the prompts."
        )
    return None


def oversized_error(index: int, size: int, max_bytes: int) -> str:
    """The error for a prompt whose encoding alone is over what one message may carry."""
    return (
        f"{ERROR_PREFIX} prompt {index} takes {size:,} bytes on the kernel's pipe (JSON-escaped), "
        f"over the {max_bytes:,}-byte limit of one message, so nothing was sent for it. "
        "Split it into smaller prompts."
    )


def refusal_error(asked: int, served: int, left: int | None) -> str:
    """The one error that stands for every prompt of a request past the ``served`` first."""
    if left is not None:
        return (
            f"{ERROR_PREFIX} budget exhausted (sub_calls): a request of {asked:,} prompts came when "
            f"{left:,} sub-calls were left, so the last {asked - served:,} were not sent. "
            "Raise --max-sub-calls or send fewer prompts."
        )
    return (
        f"{ERROR_PREFIX} too many prompts in one request ({asked:,}; at most {MAX_REQUEST_ITEMS:,}), "
        f"so the last {asked - served:,} were not sent. Call llm_batch, which splits big batches."
    )


def prompt_error(index: int, item: object, max_chars: int) -> str | None:
    """Why prompt ``index`` cannot be sent, as the error string the caller gets, or None."""
    if not isinstance(item, str):
        return (
            f"{ERROR_PREFIX} prompt {index} is a {type(item).__name__}, not a str, so nothing was "
            "sent for it. Pass text (for example str(x) or json.dumps(x))."
        )
    if len(item) > max_chars:
        return (
            f"{ERROR_PREFIX} prompt {index} has {len(item):,} chars, over the {max_chars:,}-char "
            "limit for one prompt, so nothing was sent for it. Split the text into smaller "
            "prompts (e.g. file_audit_prompt(path, start_line, end_line))."
        )
    return None


def chunk_by_size(
    sizes: list[int], max_size: int, max_items: int = MAX_REQUEST_ITEMS
) -> list[list[int]]:
    """Group indices of items with the given sizes into runs of at most ``max_size`` total
    and ``max_items`` items (an item bigger than ``max_size`` is a run of its own)."""
    chunks: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, size in enumerate(sizes):
        if current and (total + size > max_size or len(current) >= max_items):
            chunks.append(current)
            current, total = [], 0
        current.append(i)
        total += size
    if current:
        chunks.append(current)
    return chunks


def cut_note(cut: int) -> str:
    return f"\n[... {cut:,} chars cut ...]\n"


def cut_middle(text: str, limit: int) -> str:
    """Keep the first and last ``limit // 2`` chars of ``text``, with a note of what was cut."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return text[:head] + cut_note(len(text) - limit) + (text[-tail:] if tail else "")


# ---------------------------------------------------------------- explaining errors (pure)


def syntax_hint(message: str, line: str) -> str:
    """A hint for the root model, from a SyntaxError message and its offending line."""
    msg = message.lower()
    stripped = line.strip()
    if (
        "triple-quoted" in msg
        or ("f-string" in msg and ('"""' in line or "'''" in line))
        or (("f'''" in line or 'f"""' in line) and "string" in msg)
    ):
        return (
            "A triple-quoted string is not closed. This usually comes from a triple-quoted "
            "string (or the same quote) inside an f-string: the inner quotes end the outer "
            "string. Build the text with + or '\\n'.join([...]) instead, and keep f-strings "
            "on one line."
        )
    if "f-string" in msg:
        return (
            "This f-string cannot be parsed: in Python 3.11 an f-string expression may not "
            "contain a backslash, a comment or the f-string's own quote character. Compute "
            "the value in a variable first, or build the text with + or join."
        )
    if "unterminated string" in msg or "eol while scanning" in msg:
        return (
            "A quote is not closed on this line. For text over several lines use "
            "'\\n'.join([...]) or a triple-quoted string (not inside an f-string)."
        )
    if stripped.startswith("```") or stripped.lower().startswith(("repl output", "output:")):
        return "The cell contains markdown fences or prose: send only the Python code."
    if "await" in msg and "outside" in msg:
        return "llm_query and llm_batch are plain functions here: call them without await."
    if "'return' outside function" in msg:
        return "There is no function to return from: print the value or call set_answer(text)."
    if "indent" in msg:
        return "Check the indentation: top-level code starts at column 0; use 4 spaces per level."
    if "was never closed" in msg or "unmatched" in msg or "does not match" in msg:
        return "A bracket is not balanced: check the brackets on and above this line."
    if "null bytes" in msg:
        return "The code contains NUL characters: resend it as plain text."
    return "Fix the line shown and resend the whole cell."


def format_syntax_error(exc: SyntaxError | ValueError, code: str) -> str:
    """The offending line with a caret, the message and a hint. Nothing of the cell ran."""
    if not isinstance(exc, SyntaxError):
        text = f"SyntaxError: {exc}\n"
        return text + f"Hint: {syntax_hint(str(exc), '')}\nNothing in this cell ran.\n"
    lines = code.split("\n")
    lineno = exc.lineno or 0
    line = lines[lineno - 1] if 0 < lineno <= len(lines) else (exc.text or "").split("\n")[0]
    # The caret is only right when the error's own text is this very line.
    same_text = (exc.text or "").rstrip("\n") == line
    out = [f"SyntaxError: {exc.msg} (line {lineno})" if lineno else f"SyntaxError: {exc.msg}"]
    if line.strip():
        shown = line.lstrip()
        indent = len(line) - len(shown)
        out.append(f"    {shown}")
        if exc.offset and same_text:
            start = max(0, exc.offset - 1 - indent)
            end = (
                exc.end_offset - 1 - indent
                if exc.end_offset and exc.end_lineno == lineno
                else start + 1
            )
            out.append("    " + " " * start + "^" * max(1, min(end - start, len(shown) - start)))
    out.append(f"Hint: {syntax_hint(exc.msg or '', exc.text or line)}")
    out.append("Nothing in this cell ran.")
    return "\n".join(out) + "\n"


def format_exception(exc: BaseException, hide_files: tuple[str, ...] = ()) -> str:
    """A traceback without the frames of ``hide_files`` (the kernel's own code)."""
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
        _drop_frames(te, (*hide_files, os.path.abspath(__file__)), set())
        text = "".join(te.format())
    except Exception:  # formatting can fail under memory pressure
        text = f"{type(exc).__name__}: {exc}\n"
    if isinstance(exc, SystemExit):
        text += "[deeprepo] SystemExit was caught: the kernel keeps running. To finish, call set_answer(report).\n"
    return text


def _drop_frames(te: traceback.TracebackException, hide: tuple[str, ...], seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename not in hide])
    for nxt in (te.__cause__, te.__context__):
        if nxt is not None:
            _drop_frames(nxt, hide, seen)
