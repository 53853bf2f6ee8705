"""The records the catalogues are made of: planted snippets, safe uses, clean code, utilities.

A snippet is a block of code with marks (``⟦start⟧``, ``⟦sink⟧``, ``⟦end⟧``)
that the generator places in a host section: an entity's repository,
service or routes, or a project-wide module (``auth``, ``config``, a utility).
A cross-file snippet also has a ``source``: a route handler, placed in the
routes of an entity, that reads untrusted input (``⟦source⟧``) and passes it
to the sink through ``«sink.»«sink_fn»(...)``.

The records are read from the data files under ``data/`` (``catalogue``); this
module only says what they hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from deeprepo.rl.tasks.render import Block

ENTITY_HOSTS = frozenset({"repo", "svc", "routes"})


@dataclass(frozen=True)
class Guard:
    """The check that makes a cross-file bug's route safe (its guarded decoy, ``flows``)."""

    code: str  # lines inserted after the route's ⟦source⟧ line, at its indentation
    imports: tuple[str, ...]
    what: str  # what the check does, for the decoy's description
    rebind: tuple[str, str] | None = None  # the guard binds a new name: (old, new) in the call


@dataclass(frozen=True)
class Snippet:
    """One way to plant a bug kind (or its decoy) in one language."""

    name: str  # unique, e.g. "py-sqli-search"
    kind: str  # a key of taxonomy.BUG_KINDS
    lang: str  # python | js
    host: str  # section role: repo | svc | routes | auth | config | db | a utility id
    block: Block  # its key is the function name (a template) or, with ``replaces``, the slot
    description: str  # template filled with the block's context
    vulnerable: bool = True
    replaces: bool = False  # replace the host's block with the same key instead of adding one
    source: Block | None = None  # cross-file: the route that feeds the sink
    needs: tuple[str, ...] = ()  # other project sections the code uses (e.g. "cache")
    pinned: bool = False  # calls a helper of its host module unqualified, so it stays there
    guard: Guard | None = None  # cross-file bugs: the check of their guarded decoy
    twin_args: str = ""  # cross-file bugs: constant arguments a clean caller passes the helper


@dataclass(frozen=True)
class SafeUse:
    """A clean block whose name (``«nm»``) is drawn per placement from ``names``."""

    names: tuple[str, ...]
    where: str  # fn: any code section | const: module level | route | repo | svc | tests
    block: Block


@dataclass(frozen=True)
class UtilModule:
    """A utility module of one language: one section of clean blocks."""

    stems: tuple[str, ...]  # module names to choose from
    doc: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class CleanCode:
    """The clean blocks of one language that every generated project is built from."""

    entity: Mapping[str, tuple[Block, ...]]  # per-entity role → its blocks
    core: Mapping[str, tuple[Block, ...]]  # project-wide role → its blocks
    parts: Mapping[str, Block]  # single blocks the project builder wires by name
