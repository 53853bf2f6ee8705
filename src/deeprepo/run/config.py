"""Configuration files: the repository's (``[tool.deeprepo]`` in ``pyproject.toml``,
``.deeprepo.toml``) for the shape of the audit, the user's (``config.toml`` in the user
config directory) for everything else.

A repository's own configuration is written by whoever wrote the repository, so it may
only shape the audit of that repository (:data:`REPO_KEYS`: paths, scopes, the gate's
threshold, the suppression policy). A key that would choose models, endpoints, keys,
budgets, the sandbox, the cache or where outputs go is refused with one line naming it and
ignored (docs/security.md: "Untrusted inputs: a repository's own configuration"). Unknown
keys are a warning with the nearest known key.

The command line beats the user's file, which beats the repository's, which beats the
defaults, key by key (:func:`settle`).
"""

from __future__ import annotations

import difflib
import os
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir

from deeprepo.base.errors import UsageError
from deeprepo.findings.gate import check_threshold

__all__ = [
    "REPO_FILES",
    "REPO_KEYS",
    "USER_KEYS",
    "Settings",
    "load_repo_config",
    "load_user_config",
    "settle",
    "user_config_path",
]


def _strings(key: str, value: Any) -> list[str]:
    """A list of strings; a comma-separated string is accepted too."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise UsageError(f"{key} must be a list of strings (got {value!r})")


def _of(kind: type, label: str) -> Callable[[str, Any], Any]:
    def check(key: str, value: Any) -> Any:
        # bool is an int in Python: a number key must not take true/false; 3 is a float
        number = kind is float and isinstance(value, int | float)
        if isinstance(value, bool) != (kind is bool) or not (number or isinstance(value, kind)):
            raise UsageError(f"{key} must be {label} (got {value!r})")
        return float(value) if kind is float else value

    return check


def _threshold(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{key} must be a severity (got {value!r})")
    return check_threshold(value)


def _path(key: str, value: Any) -> Path:
    if not isinstance(value, str) or not value:
        raise UsageError(f"{key} must be a path (got {value!r})")
    return Path(value).expanduser()


_BOOL, _INT, _NUM, _STR = (
    _of(bool, "true or false"),
    _of(int, "a whole number"),
    _of(float, "a number"),
    _of(str, "a string"),
)

#: Keys a repository's own file may set: the shape of the audit, and nothing that spends,
#: reaches out, runs code differently or writes anywhere. key -> (CLI parameter, check).
REPO_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "include": ("include", _strings),
    "exclude": ("exclude", _strings),
    "include-scopes": ("include_scope", _strings),
    "exclude-scopes": ("exclude_scope", _strings),
    # the command line's spelling (--include-scope, repeated) works too
    "include-scope": ("include_scope", _strings),
    "exclude-scope": ("exclude_scope", _strings),
    "fail-on": ("fail_on", _threshold),
    "honour-nosec": ("honour_nosec", _BOOL),
    "inline-suppressions": ("inline_suppressions", _BOOL),
    "max-file-size": ("max_file_size", _INT),
    "gitignore": ("gitignore", _BOOL),
}
#: Keys only the user's own file (or the command line) may set.
USER_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    **REPO_KEYS,
    "root": ("root", _STR),
    "sub": ("sub", _STR),
    "root-base-url": ("root_base_url", _STR),
    "sub-base-url": ("sub_base_url", _STR),
    "max-cost": ("max_cost", _NUM),
    "max-turns": ("max_turns", _INT),
    "max-sub-calls": ("max_sub_calls", _INT),
    "timeout": ("timeout", _NUM),
    "sub-concurrency": ("sub_concurrency", _INT),
    "cache": ("cache", _BOOL),
    "cache-dir": ("cache_dir", _path),
    "sandbox": ("sandbox", _STR),
    "cell-timeout": ("cell_timeout", _NUM),
    "output-limit": ("output_limit", _INT),
    "prices": ("prices", _path),
    "prompt": ("prompt", _STR),
    "log": ("log", _BOOL),
}
#: Known keys no file sets: where outputs go is the command line's, keys the environment's.
COMMAND_LINE_KEYS = ("out", "output", "format", "baseline", "since", "rev")
SECRET_KEYS = ("api-key", "anthropic-api-key", "openai-api-key", "openrouter-api-key", "env")
_KNOWN = (*USER_KEYS, *COMMAND_LINE_KEYS, *SECRET_KEYS)

#: The repository's files, least specific first: ``.deeprepo.toml`` wins a key both set.
REPO_FILES = ("pyproject.toml", ".deeprepo.toml")


@dataclass(frozen=True)
class Settings:
    """What the configuration files say: CLI parameter -> value, and the lines the user
    must read (refused and unknown keys), each naming its file."""

    values: dict[str, Any] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


#: A configuration file is a few hundred bytes; a bigger one is not read.
MAX_CONFIG_BYTES = 1_000_000


def _read_toml(path: Path, *, follow_links: bool = False) -> dict[str, Any] | None:
    """The TOML table in ``path``, ``None`` when there is none; :class:`UsageError` when it
    cannot be read as configuration (not a regular file, too large, not TOML, nested past
    the parser's recursion). ``follow_links`` for the user's own file (dotfiles are often
    links); a repository's link is not its configuration."""
    try:
        st = path.stat() if follow_links else path.lstat()
    except (FileNotFoundError, NotADirectoryError):  # no such file (or the target is a file)
        return None
    except OSError as exc:
        raise UsageError(f"{path} cannot be read ({exc})") from None
    if not stat.S_ISREG(st.st_mode):
        # A FIFO or a device is nobody's configuration; nor, in a repository, a link.
        raise UsageError(f"{path} is not a regular file")
    if st.st_size > MAX_CONFIG_BYTES:
        raise UsageError(f"{path} is {st.st_size:,} bytes, over {MAX_CONFIG_BYTES:,}")
    try:
        with path.open("rb") as fh:
            return tomllib.loads(fh.read(MAX_CONFIG_BYTES + 1).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML ({exc}); fix it or remove it") from None
    except (RecursionError, MemoryError):
        raise UsageError(f"{path} is nested too deep to read") from None


def _unknown(where: str, keys: list[str]) -> list[str]:
    out = []
    for key in keys:
        near = difflib.get_close_matches(key, _KNOWN, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        out.append(f"{where}: unknown key {key!r} ignored{hint}")
    return out


def _apply(
    table: Mapping[str, Any],
    where: str,
    allowed: Mapping[str, tuple[str, Callable[[str, Any], Any]]],
    settings: Settings,
    *,
    lenient: bool = False,
) -> list[str]:
    """Check and take the allowed keys of ``table``; return the known keys it may not set.
    A bad value is an error (the user's own file), or with ``lenient`` (a repository's)
    a message, the key left out."""
    refused: list[str] = []
    unknown: list[str] = []
    for key, value in table.items():
        if key in allowed:
            param, check = allowed[key]
            try:
                settings.values[param] = check(key, value)
            except UsageError as exc:
                if not lenient:
                    raise UsageError(f"{where}: {exc}") from None
                settings.messages.append(f"{where}: {exc}; the key was ignored")
        elif key in _KNOWN:
            refused.append(key)
        else:
            unknown.append(key)
    settings.messages.extend(_unknown(where, unknown))
    return refused


def load_repo_config(target: Path) -> Settings:
    """The audit shape the repository at ``target`` asks for; refused keys are named."""
    settings = Settings()
    for name in REPO_FILES:
        path = target / name
        # The repository's files are the audit's input, not the user's: one that cannot be
        # read as configuration is named and ignored, never a reason to refuse the audit.
        try:
            data = _read_toml(path)
            tool = data.get("tool", {}) if data is not None and name == "pyproject.toml" else {}
            table = (
                (tool.get("deeprepo") if isinstance(tool, dict) else None)
                if name == "pyproject.toml"
                else data
            )
            where = f"{path} [tool.deeprepo]" if name == "pyproject.toml" else str(path)
            if table is not None and not isinstance(table, dict):
                raise UsageError(f"{where} must be a table of settings")
        except UsageError as exc:
            settings.messages.append(f"{exc}: the repository's configuration there was ignored")
            continue
        if table is None:
            continue
        settings.files.append(str(path))
        refused = _apply(table, where, REPO_KEYS, settings, lenient=True)
        if refused:
            settings.messages.append(
                f"{where}: refused {', '.join(refused)}: a repository's own configuration "
                "may not choose models, endpoints, keys, budgets, the sandbox, the cache or "
                "where outputs go (docs/security.md); give them on the command line or in "
                f"{user_config_path()}"
            )
    return settings


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/deeprepo/config.toml`` (the platform's user config directory)."""
    environ = os.environ if env is None else env
    xdg = environ.get("XDG_CONFIG_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "deeprepo" / "config.toml"
    return Path(user_config_dir("deeprepo")) / "config.toml"


def load_user_config(env: Mapping[str, str] | None = None) -> Settings:
    """The user's own settings; keys and where outputs go are refused (the environment and
    the command line own them)."""
    settings = Settings()
    path = user_config_path(env)
    data = _read_toml(path, follow_links=True)
    if data is None:
        return settings
    settings.files.append(str(path))
    table = data.get("analyze", data)  # top level, or an [analyze] table
    refused = _apply(table, str(path), USER_KEYS, settings)
    if refused:
        settings.messages.append(
            f"{path}: {', '.join(refused)} ignored: API keys come from the environment, and "
            "outputs, formats, baselines and revisions from the command line"
        )
    return settings


def settle(
    given: set[str], defaults: Mapping[str, Any], user: Settings, repo: Settings
) -> dict[str, Any]:
    """Every parameter's value: the command line's (``given`` names those typed), else the
    user's file, else the repository's, else the default."""
    values = dict(defaults)
    for name in values:
        if name in given:
            continue
        if name in user.values:
            values[name] = user.values[name]
        elif name in repo.values:
            values[name] = repo.values[name]
    return values
