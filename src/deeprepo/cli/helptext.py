"""``--help`` that reads well at 80 columns: plain click layout, click-style value names.

Typer's rich panels squeeze option help into a narrow third column (a word or two a line),
keep the docstrings' hard line breaks (sentences broken mid-line) and read
``[tool.deeprepo]`` as markup; its plain layout labels every value ``<str>``, ``<int>``,
``<list[str]>``. Here the plain layout is kept, each label becomes the name click uses
(``TEXT``, ``INTEGER``, ``PATH``…), and text is wrapped at spaces only, so that
``--max-cost`` is never split at its hyphens.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from typer._click import Context, HelpFormatter
from typer._click.core import Command
from typer.core import TyperGroup

__all__ = ["ReadableGroup", "first_sentence", "plain_labels"]

_LABEL = re.compile(r"<([A-Za-z_\[\]|.,\- ]+)>")
_NAMES = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "FLOAT",
    "bool": "BOOLEAN",
    "path": "PATH",
    "file": "PATH",
    "directory": "DIR",
    "datetime": "DATETIME",
    "uuid": "UUID",
}


def _label(match: re.Match[str]) -> str:
    inner = match.group(1)
    list_of = re.fullmatch(r"list\[(.+)\]", inner)
    if list_of:  # a repeatable option: one value per use, as click shows it
        inner = list_of.group(1)
    if "|" in inner:
        return f"[{inner}]"
    bare = inner.replace(" range", "")
    return _NAMES.get(bare, bare.upper())


def plain_labels(text: str) -> str:
    """``--root <str>`` → ``--root TEXT``; a choice keeps its values, ``[a|b|c]``."""
    return _LABEL.sub(_label, text)


def _wrap(text: str, width: int, indent: str = "") -> str:
    """Paragraphs (blank-line separated) rewrapped at spaces, never inside a word; a
    paragraph whose first line is ``\\b`` is kept as written (click's convention)."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", textwrap.dedent(text).strip("\n")):
        lines = para.splitlines()
        if lines and lines[0].strip() == "\b":
            out.append("\n".join(indent + line for line in lines[1:]))
            continue
        out.append(
            textwrap.fill(
                " ".join(para.split()),
                width=max(width, 20),
                initial_indent=indent,
                subsequent_indent=indent,
                break_on_hyphens=False,
                break_long_words=False,
            )
        )
    return "\n\n".join(out)


class _Formatter(HelpFormatter):
    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, plain_labels(args), prefix)

    def write_text(self, text: str) -> None:
        self.write(_wrap(text, self.width, " " * self.current_indent))
        self.write("\n")

    def write_dl(
        self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        rows = [(plain_labels(first), second) for first, second in rows]
        first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
        pad = " " * (first_col + self.current_indent)
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + pad)
            lines = _wrap(second, max(self.width - first_col - 2, 10)).splitlines() or [""]
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write((pad + line).rstrip() + "\n")


class _Context(Context):
    formatter_class = _Formatter


def _every(command: Command) -> Iterable[Command]:
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _every(sub)


def first_sentence(text: str) -> str:
    """A command's line in its group's list: the first sentence of its help, whole (click
    would cut it at about 45 characters, mid-sentence, with "...")."""
    para = " ".join(re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0].split())
    end = re.search(r"\.(\s|$)", para)
    return para if end is None else para[: end.start() + 1]


class ReadableGroup(TyperGroup):
    """The root group: every command of the tree, nested groups included, formats its
    help with the readable formatter (click builds a subcommand's context from that
    command's own ``context_class``)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        for command in _every(self):
            command.context_class = _Context
            if command is not self and not command.short_help and command.help:
                command.short_help = first_sentence(command.help)
        return super().main(*args, **kwargs)
