"""CWE families: which CWEs and kind names graders treat as the same bug class
(``data/cwe_families.json``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from deeprepo.base.finding import normalize_cwe

__all__ = ["CweFamily", "FamilyTable", "default_families", "normalize_kind"]

_KIND_SEP_RE = re.compile(r"[\s_/]+")


@dataclass(frozen=True)
class CweFamily:
    """A group of CWEs that graders treat as the same bug class."""

    name: str
    title: str
    cwes: frozenset[str]
    kinds: tuple[str, ...]
    fix: str = ""


def normalize_kind(kind: str) -> str:
    """``"SQL_Injection"`` → ``"sql-injection"``."""
    return _KIND_SEP_RE.sub("-", kind.strip().lower()).strip("-")


class FamilyTable:
    """The CWE family table: CWE → family, kind → family."""

    def __init__(self, families: list[CweFamily]) -> None:
        self.families: dict[str, CweFamily] = {f.name: f for f in families}
        self._by_cwe: dict[str, str] = {}
        self._by_kind: dict[str, str] = {}
        for fam in families:
            for cwe in fam.cwes:
                if cwe in self._by_cwe:
                    raise ValueError(f"{cwe} is in two families: {self._by_cwe[cwe]}, {fam.name}")
                self._by_cwe[cwe] = fam.name
            for kind in (fam.name, *fam.kinds):
                self._by_kind.setdefault(normalize_kind(kind), fam.name)

    @classmethod
    def from_json(cls, data: object) -> FamilyTable:
        """The table of a parsed ``cwe_families.json``; raises ``ValueError`` on a wrong shape."""
        families = data.get("families") if isinstance(data, Mapping) else None
        if not isinstance(families, Mapping):
            raise ValueError("a family table is an object with a 'families' object")
        fams = []
        for name, d in families.items():
            if not isinstance(d, Mapping):
                raise ValueError(f"family {name!r} is not an object")
            listed = d.get("cwes", ())
            if not isinstance(listed, list | tuple):
                raise ValueError(f"family {name!r}: 'cwes' must be a list")
            cwes = frozenset(c for c in (normalize_cwe(x) for x in listed) if c)
            title, fix = d.get("title", name), d.get("fix", "")
            if not isinstance(title, str) or not isinstance(fix, str):
                raise ValueError(f"family {name!r}: 'title' and 'fix' must be strings")
            fams.append(CweFamily(str(name), title, cwes, _strings(d, "kinds"), fix))
        return cls(fams)

    def of_cwe(self, cwe: str | None) -> str | None:
        """The family name of a CWE (any spelling), or ``None`` when it has none."""
        norm = normalize_cwe(cwe)
        return self._by_cwe.get(norm) if norm else None

    def of_kind(self, kind: str | None) -> str | None:
        """The family of a kind name: exact alias first, then an alias inside a longer kind
        (``blind-sql-injection`` → ``sql-injection``), longest alias winning."""
        if not kind:
            return None
        k = normalize_kind(kind)
        if k in self._by_kind:
            return self._by_kind[k]
        padded = f"-{k}-"
        best = max(
            (a for a in self._by_kind if len(a) >= 3 and f"-{a}-" in padded), key=len, default=None
        )
        return self._by_kind[best] if best else None

    def label(self, cwe: str | None, kind: str | None) -> str:
        """Family for reporting: by CWE, else by kind, else the CWE itself, else ``other``."""
        return self.of_cwe(cwe) or self.of_kind(kind) or normalize_cwe(cwe) or "other"


def _strings(d: Mapping[str, object], key: str) -> tuple[str, ...]:
    value = d.get(key, ())
    if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
        raise ValueError(f"{key!r} must be a list of strings")
    return tuple(str(x) for x in value)


@lru_cache(maxsize=1)
def default_families() -> FamilyTable:
    """The family table shipped in ``deeprepo/data/cwe_families.json``."""
    text = resources.files("deeprepo").joinpath("data/cwe_families.json").read_text("utf-8")
    return FamilyTable.from_json(json.loads(text))
