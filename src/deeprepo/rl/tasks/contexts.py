"""Placeholder contexts: how an entity, a style and a role are spelled in the templates.

``entity_context`` names an entity and its repository/service functions in
the project's language and naming scheme; ``style_context`` says how a section
of a role is written (methods of a class or module functions); ``schema_sql``
is the ``CREATE TABLE`` text for the entities.
"""

from __future__ import annotations

from deeprepo.rl.tasks.layout import Style
from deeprepo.rl.tasks.naming import Entity, snake_to_camel, snake_to_kebab, snake_to_pascal

_REPO_VERBS = (
    (
        "fetch_{p}",
        "fetch_{e}",
        "insert_{e}",
        "increment_{e}_{n}",
        "set_{e}_{n}",
        "delete_{e}_row",
        "count_{p}",
    ),
    (
        "select_{p}",
        "select_{e}",
        "insert_{e}_row",
        "bump_{e}_{n}",
        "write_{e}_{n}",
        "remove_{e}_row",
        "total_{p}",
    ),
    (
        "find_all_{p}",
        "find_{e}",
        "save_{e}",
        "add_to_{e}_{n}",
        "store_{e}_{n}",
        "erase_{e}",
        "count_{p}_rows",
    ),
)
_SVC_VERBS = (
    ("list_{p}", "get_{e}", "create_{e}", "adjust_{e}_{n}", "delete_{e}"),
    ("page_{p}", "fetch_{e}_details", "register_{e}", "change_{e}_{n}", "remove_{e}"),
    ("browse_{p}", "load_{e}", "add_{e}", "update_{e}_{n}", "discard_{e}"),
)
_PY_TYPES = {"str": "str", "int": "int", "float": "float"}
_SQL_TYPES = {"str": "TEXT", "int": "INTEGER", "float": "REAL"}
_PG_TYPES = {"str": "TEXT", "int": "INTEGER", "float": "NUMERIC(12, 2)"}


def _names(e: Entity, s: Style) -> dict[str, str]:
    fmt = {"p": e.plural, "e": e.name, "n": e.number.name}
    repo = [v.format(**fmt) for v in _REPO_VERBS[s.verbs]]
    svc = [v.format(**fmt) for v in _SVC_VERBS[s.verbs]]
    conv = (lambda x: x) if s.lang == "python" else snake_to_camel
    keys = ("r_list", "r_get", "r_create", "r_update", "r_set", "r_delete", "r_count")
    out = {k: conv(v) for k, v in zip(keys, repo, strict=True)}
    out.update(
        {
            k: conv(v)
            for k, v in zip(
                ("s_list", "s_get", "s_create", "s_adjust", "s_delete"), svc, strict=True
            )
        }
    )
    return out


def entity_context(e: Entity, s: Style) -> dict[str, str]:
    """Every placeholder that names ``e`` or its functions, for the project's language."""
    ctx = {**e.ctx(), **_names(e, s)}
    ctx["num_url"] = snake_to_kebab(e.number.name)
    ctx["NumP"] = snake_to_pascal(e.number.name)
    ctx["num_type"] = _PY_TYPES[e.number.type]
    ent, ident = snake_to_pascal(e.name), f"{e.name}_id"
    if s.lang == "python":
        ctx["field_decls"] = "\n".join(f"{f.name}: {_PY_TYPES[f.type]}" for f in e.fields)
        msgs = {
            "f": (
                f'f"{ent} {{{ident}}} not found"',
                f'f"cannot change {e.number.name} of {e.name} {{{ident}}} by {{delta}}"',
                f"f\"invalid {e.name}: {{', '.join(sorted(errors))}}\"",
            ),
            "format": (
                f'"{ent} {{}} not found".format({ident})',
                f'"cannot change {e.number.name} of {e.name} {{}} by {{}}".format({ident}, delta)',
                f'"invalid {e.name}: {{}}".format(", ".join(sorted(errors)))',
            ),
            "percent": (
                f'"{ent} %s not found" % {ident}',
                f'"cannot change {e.number.name} of {e.name} %s by %s" % ({ident}, delta)',
                f'"invalid {e.name}: %s" % ", ".join(sorted(errors))',
            ),
        }[s.fmt]
    else:
        ctx["field_assigns"] = "\n".join(
            f"this.{snake_to_camel(f.name)} = row.{f.name};" for f in e.fields
        )
        ctx["json_fields"] = ", ".join(
            f"{snake_to_camel(f.name)}: this.{snake_to_camel(f.name)}" for f in e.fields
        )
        if s.fmt == "template":
            msgs = (
                f"`{ent} ${{id}} not found`",
                f"`cannot change {ctx['numC']} of {e.name} ${{id}} by ${{delta}}`",
                f'`invalid {e.name}: ${{Object.keys(errors).join(", ")}}`',
            )
        else:
            msgs = (
                f'"{ent} " + id + " not found"',
                f'"cannot change {ctx["numC"]} of {e.name} " + id + " by " + delta',
                f'"invalid {e.name}: " + Object.keys(errors).join(", ")',
            )
    ctx["nf_msg"], ctx["adjust_msg"], ctx["schema_msg"] = msgs
    return ctx


def style_context(s: Style, role: str) -> dict[str, str]:
    cls = s.classes and role in ("repo", "svc")
    if s.lang == "python":
        return {
            "selfp": "self, " if cls else "",
            "self0": "self" if cls else "",
            "me.": "self." if cls else "",
            "conn": "get_connection(self.db_path)" if cls else "get_connection()",
        }
    return {
        "afn": "async " if cls else "async function ",
        "fn": "" if cls else "function ",
        "me.": "this." if cls else "",
        "dbq": "this.db.query" if cls else "«db.»query",
        "dbpool": "this.db.pool" if cls else "«db.»pool",
    }


def schema_sql(entities: list[tuple[Entity, str]], lang: str) -> str:
    types = _SQL_TYPES if lang == "python" else _PG_TYPES
    pk = "id INTEGER PRIMARY KEY AUTOINCREMENT" if lang == "python" else "id SERIAL PRIMARY KEY"
    stmts = []
    for e, _ in entities:
        cols = [
            pk,
            f"{e.label.name} TEXT NOT NULL",
            f"{e.number.name} {types[e.number.type]} NOT NULL DEFAULT 0",
        ]
        cols += [f"{f.name} {types[f.type]}" for f in e.extras]
        cols.append(
            "created_at TEXT DEFAULT CURRENT_TIMESTAMP"
            if lang == "python"
            else "created_at TIMESTAMPTZ DEFAULT now()"
        )
        stmts.append(
            f"CREATE TABLE IF NOT EXISTS {e.plural} (\n"
            + ",\n".join("    " + c for c in cols)
            + "\n);"
        )
    return "\n\n".join(stmts)
