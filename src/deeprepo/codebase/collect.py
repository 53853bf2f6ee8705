"""What a load collects (texts, skips, notes) and the checks every file goes through; shared by
the directory walk (:mod:`deeprepo.codebase.loader`) and the git revision reader
(:mod:`deeprepo.codebase.revision`)."""

from __future__ import annotations

import codecs
import os
from collections import Counter
from pathlib import Path

from deeprepo.codebase.model import SkippedFile

__all__ = [
    "BINARY_SNIFF_BYTES",
    "OPEN_FLAGS",
    "Accumulator",
    "clean_name",
    "inside_reason",
    "os_reason",
    "read_fd",
]

#: Bytes inspected for a NUL when deciding that a file is binary (git uses the same 8 KiB).
BINARY_SNIFF_BYTES = 8192

# No symlink is followed even if one replaced a file after the directory was listed, and a
# FIFO that did cannot block the open.
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOFOLLOW", 0)
)
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class Accumulator:
    """What a walk collects: texts, skips and notes, plus the checks every file goes through."""

    def __init__(self, max_file_bytes: int) -> None:
        self.max_file_bytes = max_file_bytes
        self.files: dict[str, str] = {}
        self.lines = 0
        self.skipped: list[SkippedFile] = []
        self.notes: list[str] = []
        self.file_notes: list[str] = []
        self.ignored = 0
        self.ignore_rules = 0  # rules of the ignore files compiled so far
        # (st_dev, st_ino) -> (path, absolute path, stat) of each name of a hard-linked file
        self.hard_links: dict[tuple[int, int], list[tuple[str, str, os.stat_result]]] = {}

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append(SkippedFile(path, reason))

    def too_large(self, path: str, size: int) -> None:
        self.skip(path, f"too-large ({size:,} bytes > {self.max_file_bytes:,})")

    def add(self, path: str, data: bytes) -> None:
        """Decode ``data`` and keep it, or record why not (binary, too large)."""
        if path in self.files:  # two names that differ only in bytes that are not UTF-8
            self.skip(path, "name-collision (another file shows the same name; not loaded)")
            return
        if len(data) > self.max_file_bytes:
            self.too_large(path, len(data))
            return
        text: str | None = None
        newlines = -1  # counted on the bytes where that is exact: faster than on the str
        if data.startswith(_UTF16_BOMS):
            # UTF-16 text is full of NULs; its BOM is the only sign it is text.
            try:
                text = data.decode("utf-16")
                self.file_notes.append(f"decoded as UTF-16: {path}")
            except UnicodeDecodeError:
                text = None
        if text is None:
            if data.find(b"\x00", 0, BINARY_SNIFF_BYTES) != -1:
                self.skip(path, "binary")
                return
            text = _decode(data)
            if text is None:
                text = data.decode("utf-8", errors="replace")
                self.file_notes.append(f"decoded with replacement (not valid UTF-8): {path}")
            newlines = data.count(b"\n")  # in UTF-8 a 0x0A byte is always a newline
        if newlines < 0:
            newlines = text.count("\n")
        self.files[path] = text
        self.lines += newlines + (0 if not text or text.endswith("\n") else 1)

    def empty_message(self, path: str | Path, run_folders: int = 0) -> str:
        """The error's text when a load kept no file: what was skipped, and what to do."""
        kinds = Counter(s.reason.split(" ")[0].split(":")[0] for s in self.skipped)
        parts = [f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))]
        detail = f"{len(self.skipped)} skipped" + (f": {', '.join(parts)}" if parts else "")
        if self.ignored:
            detail += f"; {self.ignored} ignored by .gitignore"
        if run_folders:
            detail += f"; {run_folders} run folder(s) of deeprepo's own outputs left out"
        hints = ["pass the directory that holds the source code"]
        if kinds.get("too-large"):
            hints.append(f"raise max_file_bytes (now {self.max_file_bytes:,})")
        if kinds.get("hard-link"):
            hints.append("copy a tree of hard links (`cp -al`, a backup) with `cp -r` first")
        if self.ignored:
            hints.append("or pass --no-gitignore (respect_gitignore=False)")
        return f"{path} has no text files to analyse ({detail}); " + ", ".join(hints)


def _decode(data: bytes) -> str | None:
    """Strict UTF-8 (a leading BOM dropped), or ``None`` when the bytes are not UTF-8."""
    try:
        if data.startswith(codecs.BOM_UTF8):
            return data.decode("utf-8-sig")
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_fd(fd: int, limit: int, size_hint: int) -> bytes:
    """Read at most ``limit`` bytes from ``fd``.

    One ``read`` of ``size_hint + 1`` bytes usually settles it: getting exactly ``size_hint``
    bytes means the end of the file. Only a file that changed since ``stat`` (or a short read)
    takes the loop, and no read asks for more than it can use: big spare buffers fragment the
    heap and once doubled the resident memory.
    """
    data = os.read(fd, min(size_hint + 1, limit))
    if len(data) == size_hint or len(data) >= limit:
        return data
    chunks = [data]
    got = len(data)
    while got < limit:
        chunk = os.read(fd, min(limit - got, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def inside_reason(target: str) -> str:
    # The target is loaded under its own path; following the link too would make the
    # workers read (and bill for) the same text twice, and directory links can loop.
    return f"symlink-inside-root (to {target}, loaded under that path)"


def clean_name(acc: Accumulator, rel: str) -> str:
    """File names that are not valid UTF-8 get replacement characters (JSON needs valid text)."""
    if rel.isascii():
        return rel
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:
        clean = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        acc.file_notes.append(f"file name is not valid UTF-8, shown with replacements: {clean}")
        return clean


def os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
