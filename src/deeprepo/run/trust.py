"""What a resumed run may take from its run folder.

A run folder is shared (attached to a bug report, copied from a colleague, downloaded
from CI), so its ``start`` record is untrusted: it must not pick where the user's key
and files go, which files are read, or how the model's code is isolated. A folder this
user wrote on this machine carries a seal (an HMAC of its options under a key kept in
the private data home), and its options are the user's own choices. Any other folder
gives only what cannot hurt (its turns, answered calls, spend, the limits where they
narrow); each option that picks an endpoint, a model's provider, a path or the sandbox
must be what the resuming command would choose, or be passed there explicitly.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets
import warnings
from collections.abc import Mapping
from typing import Any

from deeprepo.base.errors import UsageError
from deeprepo.base.private import UnsafePathError, private_dir, read_private, write_private
from deeprepo.local.paths import data_home
from deeprepo.providers.cache import default_cache_dir
from deeprepo.providers.spec import parse_model_spec
from deeprepo.run.models import default_models
from deeprepo.run.options import AnalyzeOptions
from deeprepo.run.wiring import RunLimits

__all__ = ["GUARDED_OPTIONS", "SEAL_FIELD", "narrowed_limits", "refuse_foreign", "seal", "sealed"]

#: Where a start record keeps its seal.
SEAL_FIELD = "options_seal"
#: Options a foreign run folder may not choose: (option, flag that sets it).
GUARDED_OPTIONS = (
    ("path", "PATH"),
    ("rev", "--rev"),
    ("root", "--root"),
    ("sub", "--sub"),
    ("root_base_url", "--root-base-url"),
    ("sub_base_url", "--sub-base-url"),
    ("sandbox", "--sandbox"),
    ("cache_dir", "--cache-dir"),
    ("prices_file", "--prices"),
)
_KEY_BYTES = 32


def _key(env: Mapping[str, str], *, create: bool) -> bytes | None:
    folder = data_home(env) / "keys"
    path = folder / "run-folders.key"
    if create:
        private_dir(folder, "the key folder")
    key = read_private(path, "the run-folder key", limit=_KEY_BYTES)
    if key is None and create:
        write_private(path, secrets.token_bytes(_KEY_BYTES))
        key = read_private(path, "the run-folder key", limit=_KEY_BYTES)
    return key if key is not None and len(key) == _KEY_BYTES else None


def _digest(key: bytes, options: Mapping[str, Any]) -> str:
    # Canonical JSON of the record as it will be read back (tuples become lists).
    canonical = json.dumps(json.loads(json.dumps(options)), sort_keys=True, separators=(",", ":"))
    return hmac.new(key, canonical.encode("utf-8"), hashlib.sha256).hexdigest()


def seal(options: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """The seal to record beside ``options``; None when the key cannot be kept (a
    read-only data home): such a folder resumes as a foreign one would."""
    try:
        key = _key(env, create=True)
    except OSError:
        return None  # an unusable data home: the run log's warning already names it
    except UnsafePathError as exc:
        warnings.warn(
            f"this run's folder is not sealed ({exc}), so --resume will ask for its "
            "repository and models again",
            stacklevel=2,
        )
        return None
    return None if key is None else _digest(key, options)


def sealed(start: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """True when ``start``'s options carry this user's seal (written by them, here)."""
    recorded, mark = start.get("options"), start.get(SEAL_FIELD)
    if not isinstance(recorded, dict) or not isinstance(mark, str):
        return False
    try:
        key = _key(env, create=False)
    except OSError:
        return False
    return key is not None and hmac.compare_digest(_digest(key, recorded), mark)


def _own_choice(name: str, overrides: Mapping[str, Any], env: Mapping[str, str]) -> Any:
    """What the resuming command would use for ``name`` if the folder said nothing."""
    default_root, default_sub = default_models(env)
    if name in ("root", "sub"):
        given = overrides.get(name) or (default_root if name == "root" else default_sub)
        return parse_model_spec(str(given)).name
    if name == "cache_dir":
        return os.path.abspath(default_cache_dir())
    return "auto" if name == "sandbox" else None


def _same(name: str, recorded: Any, mine: Any) -> bool:
    if name in ("path", "cache_dir", "prices_file") and recorded and mine:
        return os.path.abspath(str(recorded)) == os.path.abspath(str(mine))
    return bool(recorded == mine or (recorded in (None, "") and mine in (None, "")))


def refuse_foreign(
    recorded: Mapping[str, Any], overrides: Mapping[str, Any], env: Mapping[str, str], where: str
) -> None:
    """Refuse (:class:`UsageError`) an unsealed folder whose guarded options differ from
    what this command would choose and were not passed explicitly; the message names
    each field with both values and the flag that accepts the folder's value."""
    lines = []
    for name, flag in GUARDED_OPTIONS:
        if name in overrides:
            continue  # passed explicitly: the command line decides
        if name == "cache_dir" and recorded.get("cache") is False:
            continue  # the run used no cache
        value, mine = recorded.get(name), _own_choice(name, overrides, env)
        if (value is None and name != "path") or _same(name, value, mine):  # None: the default
            continue
        accept = str(value) if flag == "PATH" else f"{flag} {value}"
        lines.append(f"{name} is {value!r} there but {mine!r} here (pass {accept} to accept it)")
    if lines:
        raise UsageError(
            f"{where} was not written by you on this machine, so it may not choose where "
            "your key and files go: " + "; ".join(lines)
        )


def narrowed_limits(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded limits of a foreign folder where they are tighter than the defaults;
    the defaults where the folder would widen them (or holds something else)."""
    # The file size cap too: a huge one would make the loader hold the user's big files.
    defaults = {**vars(RunLimits()), "max_file_bytes": AnalyzeOptions.max_file_bytes}
    out: dict[str, Any] = {}
    for name, default in defaults.items():
        value = recorded.get(name)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            out[name] = default
        elif default is None or value < default:
            out[name] = type(default)(value) if default is not None else value
        else:
            out[name] = default
    return out
