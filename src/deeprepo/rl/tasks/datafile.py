"""Reading the catalogue data files: TOML under ``data/<lang>/``, checked key by key.

A data file is read once (``document``) with the standard library's ``tomllib``. Its
tables are read through :class:`Entry`, whose typed getters fail with a
:class:`CatalogueError` that names the file, the entry and the key: a missing key, a
value of the wrong type, or a key the schema does not know (a typo would otherwise be
ignored). :func:`check_template` checks the ``«placeholder»`` syntax of a template and
:func:`marks` its ``⟦mark⟧`` syntax; what a catalogue's tables hold is ``catalogue``'s
business.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, NoReturn

from deeprepo.base.errors import ConfigError

CATALOGUE_LANGS = ("python", "js")
"""The languages the catalogues are written in (``mixed`` projects use both)."""
_PACKAGE = "deeprepo.rl.tasks"
_PLACEHOLDER = re.compile(r"«([^«»]*)»")
_NAME = re.compile(r"[\w.:]+")
_MARK = re.compile(r"⟦([^⟦⟧]*)⟧")


class CatalogueError(ConfigError):
    """A catalogue data file is malformed; the message names the file, the entry and the key."""


@cache
def document(lang: str, name: str) -> dict[str, Any]:
    """The parsed file ``data/<lang>/<name>.toml`` (read once per process)."""
    where = f"{lang}/{name}.toml"
    try:
        text = resources.files(_PACKAGE).joinpath("data", lang, f"{name}.toml").read_text("utf-8")
    except FileNotFoundError:
        raise CatalogueError(
            f"the task catalogue {where} is missing from the installed package; reinstall deeprepo"
        ) from None
    return parse(text, where)


def parse(text: str, where: str) -> dict[str, Any]:
    """TOML ``text`` as a dict; a syntax error names the file and the line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(
            f"{where} is not valid TOML: {exc} (fix it in deeprepo/rl/tasks/data/{where})"
        ) from None


class Entry:
    """One table of a data file, read key by key; every problem names ``where``."""

    def __init__(
        self, data: Mapping[str, Any], file: str, where: str = "", item: bool = False
    ) -> None:
        self.data = data
        self.file = file  # "python/bugs.toml"
        self.where = where or file  # "python/bugs.toml [[snippet]] #3 'py-sqli-route'"
        self._item = item  # an element of an array of tables
        self._read: set[str] = set()

    def _child(self, label: str) -> str:
        # An array element is named by its position, so its sub-tables keep that context;
        # a table's own label (``[util.cache]``) already says where it is.
        return f"{self.where} {label}" if self._item else f"{self.file} {label}"

    def fail(self, problem: str) -> NoReturn:
        raise CatalogueError(
            f"{self.where}: {problem} (fix the entry in deeprepo/rl/tasks/data/{self.file})"
        )

    def _get(self, key: str, required: bool) -> Any:
        self._read.add(key)
        if key not in self.data:
            if required:
                self.fail(f"missing key {key!r}")
            return None
        return self.data[key]

    def text(self, key: str, default: str | None = None) -> str:
        """A string; required unless ``default`` is given."""
        value = self._get(key, default is None)
        if value is None:
            return default or ""
        if not isinstance(value, str):
            self.fail(f"{key!r} must be a string, not {type(value).__name__}")
        return value

    def flag(self, key: str) -> bool:
        """A boolean, false when absent."""
        value = self._get(key, False)
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(f"{key!r} must be true or false, not {value!r}")
        return value

    def required_flag(self, key: str) -> bool:
        """A boolean that must be there."""
        self._get(key, True)
        return self.flag(key)

    def texts(self, key: str, required: bool = False) -> tuple[str, ...]:
        """A list of strings, empty when absent (unless ``required``: then also non-empty)."""
        value = self._get(key, required)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(f"{key!r} must be a list of strings")
        if required and not value:
            self.fail(f"{key!r} must not be empty")
        return tuple(value)

    def pairs(self, key: str) -> tuple[tuple[str, str], ...]:
        """A list of ``[a, b]`` string pairs, empty when absent."""
        value = self._get(key, False)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p)
            for p in value
        ):
            self.fail(f"{key!r} must be a list of [section, name] pairs")
        return tuple((p[0], p[1]) for p in value)

    def table(self, key: str, label: str, required: bool = False) -> Entry | None:
        """The sub-table ``key`` (``label`` names it in messages)."""
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail(f"{key!r} must be a table ({label})")
        return Entry(value, self.file, self._child(label))

    def tables(self, key: str, label: str, required: bool = False) -> list[Entry]:
        """The array of tables ``key``; each entry is named by its ``name`` key or position."""
        value = self._get(key, required)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.fail(f"{key!r} must be an array of tables ({label})")
        if required and not value:
            self.fail(f"{key!r} must not be empty")
        out = []
        for i, v in enumerate(value, 1):
            name = v.get("name", v.get("key"))
            tag = f" {name!r}" if isinstance(name, str) else ""
            out.append(Entry(v, self.file, f"{self._child(label)} #{i}{tag}", item=True))
        return out

    def close(self) -> None:
        """Fail on a key the schema does not know: one this entry's reader never asked for."""
        unknown = sorted(set(self.data) - self._read)
        if unknown:
            self.fail(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(self._read))})")


def check_template(entry: Entry, key: str, template: str, known: frozenset[str]) -> list[str]:
    """Check the ``«name»`` placeholders of ``template`` (read from ``key`` of ``entry``).

    Each must be well formed and, unless it is an alias prefix ``«alias.»``, in ``known``;
    returns the aliases (``«repo.»`` → ``repo``) so the caller can check them against the
    block's ``uses``.
    """
    for line in template.split("\n"):
        bare = _PLACEHOLDER.sub("", line)
        if "«" in bare or "»" in bare:
            entry.fail(f"{key!r} has an unclosed « or a stray » in {line.strip()!r}")
    aliases = []
    for name in _PLACEHOLDER.findall(template):
        if not _NAME.fullmatch(name):
            entry.fail(f"{key!r} has a malformed placeholder «{name}»")
        if name in known:
            continue
        if name.endswith("."):
            aliases.append(name[:-1])
        else:
            entry.fail(f"{key!r} has an unknown placeholder «{name}»")
    return aliases


def marks(entry: Entry, key: str, template: str) -> list[str]:
    """The ``⟦mark⟧`` names of ``template``; a stray bracket is an error."""
    for line in template.split("\n"):
        bare = _MARK.sub("", line)
        if "⟦" in bare or "⟧" in bare:
            entry.fail(f"{key!r} has an unclosed ⟦ or a stray ⟧ in {line.strip()!r}")
    return _MARK.findall(template)
