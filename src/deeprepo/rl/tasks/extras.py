"""Files around the code: tests, entry points, scripts, README, manifests, docs and migrations.

``code_extras`` builds code files outside the section layout (they are parsed
and checked like the rest); ``text_extras`` writes the non-code files once the
code is rendered, so ``requirements.txt`` / ``package.json`` list exactly the
third-party modules the code imports.
"""

from __future__ import annotations

import json
import re
import sys

from deeprepo.rl.tasks.catalogue import clean_code
from deeprepo.rl.tasks.naming import snake_to_kebab
from deeprepo.rl.tasks.project import Project
from deeprepo.rl.tasks.render import Block, Section, SourceFile, js_relpath
from deeprepo.rl.tasks.structure import filler_path

_PY_PACKAGES = {
    "flask": "Flask>=3.0",
    "requests": "requests>=2.31",
    "yaml": "PyYAML>=6.0",
    "bcrypt": "bcrypt>=4.1",
    "argon2": "argon2-cffi>=23.1",
    "markupsafe": "MarkupSafe>=2.1",
    "itsdangerous": "itsdangerous>=2.1",
    "pytest": "pytest>=8.0",
}
_JS_PACKAGES = {
    "express": "^4.19.2",
    "pg": "^8.11.5",
    "jsonwebtoken": "^9.0.2",
    "bcrypt": "^5.1.1",
    "js-yaml": "^4.1.0",
    "node-serialize": "^0.0.4",
    "supertest": "^7.0.0",
}
_JS_DEV = {"jest": "^29.7.0", "supertest": "^7.0.0", "eslint": "^8.57.0"}
_PY_IMPORT_RE = re.compile(r"^(?:from|import) ([A-Za-z_][\w]*)", re.MULTILINE)
_JS_REQUIRE_RE = re.compile(r'require\("([^".][^"]*)"\)')


def _code_file(
    p: Project, path: str, doc: str, blocks: list[Block], ctx: dict[str, str] | None = None
) -> SourceFile:
    f = SourceFile(
        path, p.lang, doc=doc, ctx={**p.ctx, **(ctx or {})}, strict=p.style.strict, exports="none"
    )
    f.sections.append(Section("extra:" + path, blocks))
    return f


def add_code_extras(p: Project) -> None:
    """Add the code files outside the section layout (tests, conftest, entry points, scripts)."""
    for path, f in code_extras(p):
        p.files[path] = f


def code_extras(p: Project) -> list[tuple[str, SourceFile]]:
    """Code files the structure asked for that are not made of layered sections."""
    s, py = p.style, p.lang == "python"
    parts = clean_code(p.lang).parts
    out: list[tuple[str, SourceFile]] = []
    app_path = p.registry["app"][0].path
    ents = [e for e, _ in p.structure.entities]
    if py and s.root + "tests/conftest.py" in p.structure.paths:
        out.append(
            (
                s.root + "tests/conftest.py",
                _code_file(
                    p,
                    s.root + "tests/conftest.py",
                    "Shared test fixtures.",
                    [parts["client_fixture"]],
                ),
            )
        )
    server = s.base + "server.js"
    if not py and (server in p.structure.paths):
        out.append(
            (
                server,
                _code_file(
                    p,
                    server,
                    "Starts the HTTP server.",
                    [parts["server"]],
                    {"app_rel": js_relpath(server, app_path)},
                ),
            )
        )
    for key in p.structure.fillers:
        path = filler_path(s, key, p.structure.utils)
        if (
            path is None
            or not path.endswith((".py", ".js"))
            or key.startswith("util:")
            or path == server
        ):
            continue
        if key == "wsgi":
            out.append((path, _code_file(p, path, "WSGI entry point.", [parts["wsgi"]])))
        elif key == "script:seed":
            uses = tuple(f"svc:{e.name}" for e in ents[:2])
            calls = []
            for e in ents[:2]:
                c = p.entity_ctx[e.name]
                num = "5" if e.number.type == "int" else "12.5"
                if py:
                    calls.append(
                        f'«svc:{e.name}.»{c["s_create"]}({{"{e.label.name}": "Sample {e.name.replace("_", " ")}", "{e.number.name}": {num}}})'
                    )
                else:
                    calls.append(
                        f'await «svc:{e.name}.»{c["s_create"]}({{ {c["labelC"]}: "Sample {e.name.replace("_", " ")}", {c["numC"]}: {num} }});'
                    )
            if py:
                code = 'def main() -> None:\n    init_db()\n    «seed_calls»\n\n\nif __name__ == "__main__":\n    main()'
                block = Block("main", code, uses=uses, names=(("db", "init_db"),))
            else:
                code = (
                    "async function main() {\n  «seed_calls»\n  await «db.»pool.end();\n}\n\n"
                    "main().catch((err) => {\n  console.error(err);\n  process.exit(1);\n});"
                )
                block = Block("main", code, uses=(*uses, "db"))
            out.append(
                (
                    path,
                    _code_file(
                        p,
                        path,
                        "Load sample rows into a development database.",
                        [block],
                        {"seed_calls": "\n".join(calls)},
                    ),
                )
            )
        elif key == "test:auth":
            if py:
                block = Block(
                    "t",
                    """def test_hash_is_not_the_password() -> None:
    hashed = hash_password("correct horse battery staple")
    assert hashed != "correct horse battery staple"
    assert verify_password("correct horse battery staple", hashed)
    assert not verify_password("wrong", hashed)


def test_tokens_are_unique() -> None:
    assert generate_token() != generate_token()""",
                    names=(
                        ("auth", "hash_password"),
                        ("auth", "verify_password"),
                        ("auth", "generate_token"),
                    ),
                )
            else:
                block = Block(
                    "t",
                    """test("hashes and verifies a password", async () => {
  const hashed = await hashPassword("correct horse battery staple");
  expect(hashed).not.toBe("correct horse battery staple");
  expect(await verifyPassword("correct horse battery staple", hashed)).toBe(true);
});

test("generates distinct tokens", () => {
  expect(generateToken()).not.toBe(generateToken());
});""",
                    names=(
                        ("auth", "hashPassword"),
                        ("auth", "verifyPassword"),
                        ("auth", "generateToken"),
                    ),
                )
            out.append(
                (path, _code_file(p, path, "Tests of password hashing and tokens.", [block]))
            )
        elif key == "test:pagination":
            if py:
                block = Block(
                    "t",
                    """def test_page_size_is_capped() -> None:
    limit, _ = page_bounds(2, 10_000)
    assert limit == 100


def test_no_rows_no_pages() -> None:
    assert page_count(0, 25) == 0""",
                    names=(("pagination", "page_bounds"), ("pagination", "page_count")),
                )
            else:
                block = Block(
                    "t",
                    """test("caps the page size", () => {
  expect(pageBounds(2, 10000).limit).toBe(100);
});

test("has no pages without rows", () => {
  expect(pageCount(0, 25)).toBe(0);
});""",
                    names=(("pagination", "pageBounds"), ("pagination", "pageCount")),
                )
            out.append((path, _code_file(p, path, "Tests of the page arithmetic.", [block])))
    return out


def _third_party_py(texts: dict[str, str], local: set[str]) -> list[str]:
    mods: set[str] = set()
    for path, text in texts.items():
        if path.endswith(".py"):
            mods.update(
                m
                for m in _PY_IMPORT_RE.findall(text)
                if m not in sys.stdlib_module_names and m not in local
            )
    return sorted(_PY_PACKAGES[m] for m in mods if m in _PY_PACKAGES)


def _third_party_js(texts: dict[str, str]) -> set[str]:
    mods: set[str] = set()
    for path, text in texts.items():
        if path.endswith(".js"):
            mods.update(_JS_REQUIRE_RE.findall(text))
    return {m for m in mods if m in _JS_PACKAGES}


def _endpoints(p: Project) -> list[str]:
    rows = []
    for e, _ in p.structure.entities:
        base = f"{p.style.api_prefix}/{snake_to_kebab(e.plural)}"
        num = snake_to_kebab(e.number.name)
        rows += [
            f"| GET | `{base}` | list {e.plural.replace('_', ' ')} (paged) |",
            f"| GET | `{base}/{{id}}` | one {e.name.replace('_', ' ')} |",
            f"| POST | `{base}` | create (login) |",
            f"| POST | `{base}/{{id}}/{num}` | change {e.number.name.replace('_', ' ')} (login) |",
            f"| DELETE | `{base}/{{id}}` | delete (admin) |",
        ]
    return rows


def _readme(p: Project) -> str:
    py, s = p.lang == "python", p.style
    domain = p.structure.entities[0][0].domain
    setup = (
        [
            "python -m venv .venv && . .venv/bin/activate",
            "pip install -r requirements.txt",
            "flask --app " + p.registry["app"][0].module + ":create_app run",
        ]
        if py
        else ["npm install", "npm start"]
    )
    lines = [
        f"# {p.title}",
        "",
        f"A small {domain} service: "
        + ", ".join(e.plural.replace("_", " ") for e, _ in p.structure.entities)
        + f", behind a JSON API ({'Flask + SQLite' if py else 'Express + PostgreSQL'}).",
        "",
        "## Running it",
        "",
        "```sh",
        *setup,
        "```",
        "",
        "## Endpoints",
        "",
        "| method | path | what |",
        "|---|---|---|",
        *_endpoints(p),
        "",
        "## Configuration",
        "",
        "Settings come from the environment; see `.env.example`."
        if py
        else "Settings come from the environment (`PORT`, `DATABASE_URL`, `JWT_SECRET`, `UPLOAD_DIR`).",
        "",
    ]
    if s.layout != "compact":
        lines += ["## Tests", "", "```sh", "pytest" if py else "npm test", "```", ""]
    return "\n".join(lines)


def _package_json(p: Project, texts: dict[str, str]) -> str:
    deps = _third_party_js(texts) - {"supertest"}
    main = p.style.base.removeprefix(p.style.root) + (
        "server.js" if p.style.layout != "compact" else "app.js"
    )
    data = {
        "name": p.ctx["pkg_name"],
        "version": "1.4.0",
        "private": True,
        "main": main,
        "scripts": {"start": f"node {main}", "test": "jest", "lint": "eslint ."},
        "dependencies": {d: _JS_PACKAGES[d] for d in sorted(deps)},
        "devDependencies": dict(sorted(_JS_DEV.items())),
        "engines": {"node": ">=18"},
    }
    return json.dumps(data, indent=2) + "\n"


def _migration(p: Project, n: int) -> str:
    ents = [e for e, _ in p.structure.entities]
    if n == 0:
        return "-- Initial schema.\n\n" + p.ctx["schema_sql"] + "\n"
    e = ents[n % len(ents)]
    return {
        1: f"CREATE INDEX IF NOT EXISTS idx_{e.plural}_{e.label.name} ON {e.plural} ({e.label.name});\n",
        2: f"ALTER TABLE {e.plural} ADD COLUMN updated_at TEXT;\n",
        3: f"ALTER TABLE {e.plural} ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;\n",
        4: f"UPDATE {e.plural} SET {e.number.name} = 0 WHERE {e.number.name} IS NULL;\n",
    }[n % 5]


def _docs(p: Project, name: str) -> str:
    title = name.replace("_", " ").capitalize()
    py = p.lang == "python"
    body = {
        "architecture": "Requests go through three layers: the HTTP layer parses and authorises, the service layer "
        "applies business rules, and the repository layer talks to the database. Shared helpers live in the "
        "utilities package.",
        "api": "\n".join(["| method | path | what |", "|---|---|---|", *_endpoints(p)]),
        "deployment": "Build the container image, set the environment variables listed in the README and run "
        + ("`gunicorn 'app:create_app()'`." if py else "`node server.js`.")
        + " Put the service behind a TLS-terminating proxy.",
        "development": "Create a virtual environment, install the requirements and run the tests before sending a change."
        if py
        else "Install the dependencies with `npm install`; `npm test` runs the suite.",
        "security": "Report vulnerabilities privately to the maintainers. Secrets belong in the environment, never in the repository.",
        "runbook": "If the service returns 5xx errors, check the database connection first, then the logs of the last deploy.",
    }[name]
    return f"# {title}\n\n{body}\n"


def text_extras(p: Project, texts: dict[str, str]) -> dict[str, str]:
    """Non-code files of the project, given the rendered code ``texts``."""
    s, py, r = p.style, p.lang == "python", p.style.root
    out: dict[str, str] = {}
    local = set(p.local_modules())
    if py:
        out[r + "requirements.txt"] = "\n".join(_third_party_py(texts, local)) + "\n"
    else:
        out[r + "package.json"] = _package_json(p, texts)
    if r + "README.md" in p.structure.paths:
        out[r + "README.md"] = _readme(p)
    simple = {
        "dockerfile": (
            "FROM python:3.12-slim\nWORKDIR /app\nCOPY requirements.txt .\nRUN pip install --no-cache-dir -r requirements.txt\n"
            'COPY . .\nCMD ["flask", "run", "--host=0.0.0.0"]\n'
        )
        if py
        else (
            'FROM node:20-alpine\nWORKDIR /app\nCOPY package.json .\nRUN npm install --omit=dev\nCOPY . .\nCMD ["npm", "start"]\n'
        ),
        "env": ("SECRET_KEY=\nDATABASE_PATH=app.sqlite3\nUPLOAD_DIR=./uploads\nWEBHOOK_URL=\n")
        if py
        else (
            "PORT=3000\nDATABASE_URL=postgres://localhost:5432/app\nJWT_SECRET=\nUPLOAD_DIR=./uploads\n"
        ),
        "gitignore": ("__pycache__/\n*.pyc\n.venv/\n*.sqlite3\n.env\n")
        if py
        else ("node_modules/\ncoverage/\n.env\n"),
        "changelog": "# Changelog\n\n## 1.4.0\n\n- Paged list endpoints.\n- Admin-only deletes.\n\n## 1.3.0\n\n- CSV exports.\n",
        "editorconfig": "root = true\n\n[*]\nindent_style = space\nindent_size = "
        + ("4" if py else "2")
        + "\nend_of_line = lf\n",
        "license": "MIT License\n\nPermission is hereby granted, free of charge, to any person obtaining a copy of this software.\n",
        "contributing": "# Contributing\n\nOpen an issue first for larger changes. Every change needs tests.\n",
        "makefile": ".PHONY: test lint\n\ntest:\n\tpytest -q\n\nlint:\n\truff check .\n",
        "pyproject": '[tool.ruff]\nline-length = 100\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
        "eslintrc": json.dumps(
            {"env": {"node": True, "es2022": True, "jest": True}, "extends": "eslint:recommended"},
            indent=2,
        )
        + "\n",
        "prettierrc": json.dumps(
            {"singleQuote": False, "trailingComma": "all", "printWidth": 100}, indent=2
        )
        + "\n",
        "nvmrc": "20\n",
        "readme": _readme(p),
    }
    for key in p.structure.fillers:
        path = filler_path(s, key, p.structure.utils)
        if path is None or path in texts:
            continue
        kind, _, arg = key.partition(":")
        if kind in simple:
            out[path] = simple[kind]
        elif kind == "docs":
            out[path] = _docs(p, arg)
        elif kind == "migration":
            out[path] = _migration(p, int(arg))
    return out
