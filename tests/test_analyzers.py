"""The offline engine's analyzers: whole files, one finding per issue, secrets, JS/TS and templates."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deeprepo.base.prompts import file_audit_prompt
from deeprepo.builtin import make_static_worker
from deeprepo.builtin.analyzers import (
    analyze_file,
    analyze_file_result,
    analyze_texts,
    looks_like_secret,
    semgrep,
)
from deeprepo.builtin.static import StaticWorker


def _reply(worker: StaticWorker, prompt: str) -> dict[str, Any]:
    return dict(json.loads(worker.answer(prompt)))


def _kinds(path: str, src: str) -> list[tuple[int, str, str | None]]:
    return [(f.line, f.kind, f.cwe) for f in analyze_file(path, src)]


# --- whole files behind slices ------------------------------------------------------------


def _far_import_module() -> str:
    filler = [f"def helper_{i}(x):\n    return x + {i}\n" for i in range(200)]
    return (
        "import yaml\nfrom hashlib import md5\n\n"
        + "\n".join(filler)
        + "\ndef load(text):\n    return yaml.load(text)\n\n"
        + "def digest_password(password):\n    return md5(password.encode()).hexdigest()\n"
    )


def test_a_slice_is_analysed_with_its_whole_file() -> None:
    src = _far_import_module()
    lines = src.split("\n")
    yaml_line = next(i for i, ln in enumerate(lines, 1) if "yaml.load(" in ln)
    md5_line = next(i for i, ln in enumerate(lines, 1) if "md5(password" in ln)
    assert yaml_line > 400
    start = yaml_line - 20
    piece = "\n".join(lines[start - 1 :])
    prompt = file_audit_prompt("app/loader.py", piece, start)

    alone = _reply(StaticWorker(), prompt)["findings"]  # the slice alone: imports unseen
    assert [f["line"] for f in alone] == []

    worker = StaticWorker({"app/loader.py": src})
    got = {(f["line"], f["cwe"]) for f in _reply(worker, prompt)["findings"]}
    assert got == {(yaml_line, "CWE-502"), (md5_line, "CWE-916")}
    # Findings outside the slice shown are not reported for it.
    head = "\n".join(lines[:50])
    assert _reply(worker, file_audit_prompt("app/loader.py", head))["findings"] == []


def test_the_whole_file_is_analysed_once_for_many_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    import deeprepo.builtin.static as static

    calls: list[int] = []
    real = static.analyze_texts

    def counting(files: Any, **kw: Any) -> Any:
        calls.append(len(files))
        return real(files, **kw)

    monkeypatch.setattr(static, "analyze_texts", counting)
    src = _far_import_module()
    lines = src.split("\n")
    worker = StaticWorker({"app/loader.py": src})
    for start in range(1, len(lines), 100):
        piece = "\n".join(lines[start - 1 : start + 99])
        worker.answer(file_audit_prompt("app/loader.py", piece, start))
    assert calls == [1]


def test_a_block_that_is_not_the_files_text_is_analysed_as_shown() -> None:
    worker = StaticWorker({"app/x.py": "print('hello')\n"})
    edited = "import pickle\n\ndef load(b):\n    return pickle.loads(b)\n"
    got = _reply(worker, file_audit_prompt("app/x.py", edited))["findings"]
    assert [(f["line"], f["cwe"]) for f in got] == [(4, "CWE-502")]


def test_make_worker_takes_the_codebase() -> None:
    class Fake:
        def __init__(self) -> None:
            self.files = {"a.py": "import pickle\npickle.loads(x)\n"}

    worker = make_static_worker(codebase=Fake())
    assert isinstance(worker, StaticWorker)
    got = _reply(worker, file_audit_prompt("a.py", "import pickle\npickle.loads(x)\n"))
    assert [f["line"] for f in got["findings"]] == [2]


# --- unparseable files are reported, not silently skipped ---------------------------------


def test_python_newer_than_the_interpreter_is_a_warning() -> None:
    src = "type Pair[T] = tuple[T, T]\n\ndef first[T](p: Pair[T]) -> T:\n    return p[0]\n"
    worker = StaticWorker({"lib/new.py": src})
    data = _reply(worker, file_audit_prompt("lib/new.py", src))
    assert data["findings"] == []
    (warning,) = data["warnings"]
    assert warning["file"] == "lib/new.py" and warning["tool"] == "bandit"
    assert "does not parse as Python 3." in warning["message"]


def test_a_clean_file_has_no_warnings_key() -> None:
    data = _reply(StaticWorker(), file_audit_prompt("a.py", "x = 1\n"))
    assert data == {"findings": []}


def test_missing_semgrep_is_a_warning_not_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semgrep, "_semgrep_command", lambda: None)
    result = analyze_file_result("web/app.js", "eval(location.hash)\n")
    assert result.findings == ()
    assert [w.tool for w in result.warnings] == ["semgrep"]
    assert "pip install semgrep" in result.warnings[0].message


# --- one finding per real issue ------------------------------------------------------------


@pytest.mark.e2e
def test_bandit_and_detect_secrets_on_one_secret_are_one_finding() -> None:
    src = (
        "import requests\n\n"
        "def client():\n"
        "    return requests.Session(\n"
        '        password="Zq8#fT2!pLx9vR4m",\n'
        "    )\n"
    )
    findings = analyze_file("app/client.py", src)
    assert [(f.cwe, f.severity) for f in findings] == [("CWE-798", "high")]


def test_two_secrets_on_adjacent_lines_by_one_tool_stay_two() -> None:
    src = 'STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"\nOLD = "sk_live_9dR2kLm4TqX7vB1nZ8pW3yHc"\n'
    assert [f.line for f in analyze_file("app/keys.py", src)] == [1, 2]


# --- secrets that look like secrets ---------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [None, "", "None", "changeme", "change-me", "xxxxxxxx", "<your-key>", "${API_KEY}",
     "{{ secret }}", "password_reset", "SECRET_KEY", "x-auth-token", "https://example.org/token",
     "Enter your password: ", "Invalid token", "your-api-key-here", "****"],
)  # fmt: skip
def test_placeholders_names_and_prose_are_not_secrets(value: str | None) -> None:
    assert not looks_like_secret(value)


@pytest.mark.parametrize(
    "value", ["sk_live_4eC39HqLyjWDarjtT1zdp7dc", "dev-secret-key-123", "hunter2!", "keyboard cat"]
)
def test_real_looking_values_are_secrets(value: str) -> None:
    assert looks_like_secret(value)


@pytest.mark.e2e
def test_no_secret_findings_on_hashes_ids_fixtures_or_placeholders() -> None:
    src = "\n".join(
        [
            'CONFIG = {"SECRET_KEY": None, "DEBUG": False}',
            'app.config["SECRET_KEY"] = None',
            'commit = "3f786850e387550fdab836ed7e6dc881de23001b"',
            'EXPECTED_SHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"',
            'request_id = "4f9a8c2e-7b1d-4e3a-9c5f-2d8e6b0a1c3d"',
            'GZIP_BODY = "H4sIAAAAAAAA/8tIzcnJBwCGphA2BQAAAA=="',
            'password = "changeme"',
            'api_key = "${API_KEY}"',
            'PASSWORD_FIELD = "password"',
            'token_url = "https://oauth2.example.com/token"',
            'SECRET_KEY = os.environ["SECRET_KEY"]',
        ]
    )
    assert analyze_file("app/settings.py", src) == []


def test_entropy_with_a_secret_name_is_reported() -> None:
    src = 'signing_secret = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"\n'
    assert [(f.line, f.cwe) for f in analyze_file("app/settings.py", src)] == [(1, "CWE-798")]


# --- JavaScript / TypeScript ----------------------------------------------------------------

EXPRESS = """const express = require('express');
const { exec } = require('child_process');
const crypto = require('crypto');
const app = express();

app.get('/ping', (req, res) => {
  exec('ping -c 1 ' + req.query.host, (err, out) => res.json({ out }));
});

app.get('/hello', (req, res) => {
  res.send('<h1>Hello ' + req.query.name + '</h1>');
});

app.get('/escaped', (req, res) => {
  res.send('<h1>Hello ' + escapeHtml(req.query.name) + '</h1>');
});

app.post('/calc', (req, res) => {
  res.json({ value: eval(req.body.expr) });
});

app.get('/users', (req, res) => {
  db.query("SELECT * FROM users WHERE name = '" + req.query.name + "'", (e, rows) => res.json(rows));
  db.query('SELECT * FROM users WHERE id = ?', [req.query.id], (e, rows) => res.json(rows));
});

function hashPassword(password) {
  return crypto.createHash('md5').update(password).digest('hex');
}
"""


@pytest.mark.e2e
def test_express_handlers() -> None:
    got = _kinds("server/app.js", EXPRESS)
    assert got == [
        (7, "command-injection", "CWE-78"),
        (11, "xss", "CWE-79"),
        (19, "code-injection", "CWE-95"),
        (23, "sql-injection", "CWE-89"),
        (28, "weak-password-hash", "CWE-916"),
    ]


@pytest.mark.e2e
def test_typescript_and_react() -> None:
    src = """import { exec } from 'child_process';
export function Bio({ html }: { html: string }) {
  return <div dangerouslySetInnerHTML={{ __html: html }} />;
}
export function Safe({ html }: { html: string }) {
  return <div dangerouslySetInnerHTML={{ __html: DOMPurify.sanitize(html) }} />;
}
"""
    assert _kinds("web/Bio.tsx", src) == [(3, "xss", "CWE-79")]


@pytest.mark.e2e
def test_dom_sinks() -> None:
    src = "el.innerHTML = location.hash.slice(1);\nel.innerHTML = '<b>static</b>';\n"
    assert _kinds("web/page.js", src) == [(1, "xss", "CWE-79")]


# --- templates ----------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("path", "src", "line"),
    [
        ("templates/post.html", "<p>{{ title }}</p>\n<div>{{ post.body | safe }}</div>\n", 2),
        ("views/user.hbs", "<h1>{{name}}</h1>\n{{{ user.bio }}}\n", 2),
        (
            "views/user.ejs",
            "<%- include('header') %>\n<p><%- user.bio %></p>\n<%= user.name %>\n",
            2,
        ),
        ("templates/raw.jinja2", "{% autoescape false %}\n{{ x }}\n{% endautoescape %}\n", 1),
        ("src/Comment.vue", '<template>\n  <div v-html="comment.body"></div>\n</template>\n', 2),
    ],
)
def test_unescaped_template_output(path: str, src: str, line: int) -> None:
    assert [(f.line, f.cwe) for f in analyze_file(path, src)] == [(line, "CWE-79")]


def test_escaped_template_output_is_clean() -> None:
    src = "<p>{{ post.body }}</p>\n<%= user.name %>\n{{ user.bio }}\n"
    assert analyze_file("templates/post.html", src) == []


# --- Python web flows semgrep adds to bandit ------------------------------------------------


@pytest.mark.e2e
def test_flask_flows() -> None:
    src = """from flask import Flask, request, render_template_string, redirect
app = Flask(__name__)

@app.route("/hello")
def hello():
    return "<h1>Hello " + request.args.get("name", "") + "</h1>"

@app.route("/page")
def page():
    return render_template_string("<p>" + request.args["t"] + "</p>")

@app.route("/go")
def go():
    return redirect(request.args.get("next"))
"""
    assert _kinds("web/views.py", src) == [
        (6, "xss", "CWE-79"),
        (10, "template-injection", "CWE-1336"),
        (14, "open-redirect", "CWE-601"),
    ]


@pytest.mark.e2e
def test_one_semgrep_process_for_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []
    real = semgrep._scan

    def counting(command: str, config: str, targets: list[str], *a: Any, **kw: Any) -> Any:
        runs.append(len(targets))
        return real(command, config, targets, *a, **kw)

    monkeypatch.setattr(semgrep, "_scan", counting)
    files = [(f"web/f{i}.js", "eval(location.hash);\n") for i in range(5)] + [("a.md", "# x\n")]
    results = analyze_texts(files)
    assert runs == [5]
    assert [len(r.findings) for r in results] == [1, 1, 1, 1, 1, 0]


def test_concurrent_callers_share_semgrep_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from deeprepo.builtin.analyzers.findings import FileResult

    batches: list[int] = []
    scanning, release = threading.Event(), threading.Event()

    def held(files: Any) -> list[FileResult]:
        # The first scan is held until every other caller has queued its file, so what is
        # batched does not depend on how fast the threads happen to start.
        batches.append(len(files))
        scanning.set()
        assert release.wait(60)
        return [FileResult() for _ in files]

    monkeypatch.setattr(semgrep, "_scan_files", held)
    threads = [
        threading.Thread(target=semgrep.run_semgrep, args=([(f"f{i}.js", "x")],)) for i in range(6)
    ]
    threads[0].start()
    assert scanning.wait(60)
    for t in threads[1:]:
        t.start()
    while len(semgrep._BATCHER._queue) < 5 and all(t.is_alive() for t in threads[1:]):
        time.sleep(0.001)
    release.set()
    for t in threads:
        t.join()
    assert batches == [1, 5]  # the first file alone, then the five queued meanwhile


def test_secrets_in_docstrings_and_comments_are_documentation() -> None:
    src = (
        'def configure(app):\n    """Example::\n\n        SECRET_KEY = "dev-key-7f3a9b21"\n    """\n'
        '# password = "hunter2!x"\nAPI_TOKEN = "tok-7f3a9b21c4d5e6"\n'
    )
    assert [f.line for f in analyze_file("app/conf.py", src)] == [7]


@pytest.mark.e2e
def test_sinks_fed_by_an_argument_are_medium() -> None:
    js = """const { exec } = require('child_process');
function archive(name) {
  exec(`tar -czf ${name}.tgz ${name}`);
}
function banner(message) {
  return `<div class="banner">${message}</div>`;
}
function table(rows) {
  return `<table>${rows.map((r) => `<td>${escapeHtml(r)}</td>`).join('')}</table>`;
}
async function search(term, db) {
  const sql = `SELECT * FROM people WHERE name LIKE '%${term}%'`;
  const ok = 'SELECT * FROM people WHERE id = $1';
  return db.query(sql);
}
"""
    got = [(f.line, f.cwe, f.severity) for f in analyze_file("lib/util.js", js)]
    assert got == [(3, "CWE-78", "medium"), (6, "CWE-79", "medium"), (12, "CWE-89", "medium")]
    py = (
        "from html import escape\n\n"
        "def banner(message):\n    return f'<div class=\"b\">{message}</div>'\n\n"
        "def safe(message):\n    return f'<div>{escape(message)}</div>'\n"
    )
    assert [(f.line, f.cwe) for f in analyze_file("app/html.py", py)] == [(4, "CWE-79")]


@pytest.mark.e2e
def test_flask_route_parameters_are_request_data() -> None:
    src = """import os
from flask import send_file

@bp.route("/files/<path:filename>")
def download(filename):
    return send_file(os.path.join("/srv/uploads", filename))

@bp.route("/report")
def report(filename="daily.csv"):
    return send_file(os.path.join("/srv/reports", filename))
"""
    assert _kinds("app/views.py", src) == [(6, "path-traversal", "CWE-22")]


def test_random_is_reported_only_where_it_must_be_unguessable() -> None:
    src = (
        "import random\n\n"
        "def jitter(delay):\n    return delay * random.random()\n\n"
        "def reset_token():\n    return str(random.randint(0, 10**6))\n"
    )
    assert [(f.line, f.cwe) for f in analyze_file("app/util.py", src)] == [(7, "CWE-330")]


def test_a_string_annotation_is_not_a_default_secret() -> None:
    src = 'def connect(secret_key: "Optional[str]" = None):\n    return secret_key\n'
    assert analyze_file("app/client.py", src) == []


@pytest.mark.e2e
def test_a_timer_given_a_function_is_not_code_injection() -> None:
    src = "const h = location.hash;\nsetTimeout(() => show(h), 10);\nsetTimeout('show(' + h + ')', 10);\n"
    assert [(f.line, f.cwe) for f in analyze_file("web/a.js", src)] == [(3, "CWE-95")]


@pytest.mark.e2e
def test_public_values_under_secret_sounding_names_are_not_secrets() -> None:
    src = (
        'PASSWORD_SALT = "staffline"\nTOKEN_HEADER = "X-Session-Token-v2"\n'
        'password_field = "pw1"\nSECRET_KEY_ENV = "APP_SECRET_KEY"\n'
        'JWT_SECRET = "s3cr3t-signing"\n'
    )
    assert [f.line for f in analyze_file("app/auth.py", src)] == [5]
    assert [f.line for f in analyze_file("app/auth.js", src.replace("\n", ";\n"))] == [5]


@pytest.mark.e2e
def test_autoescape_off_in_any_python_template_setup() -> None:
    src = (
        "import aiohttp_jinja2\n\ndef setup(app, loader):\n"
        "    aiohttp_jinja2.setup(app, loader=loader, autoescape=False)\n"
    )
    assert [(f.line, f.cwe, f.severity) for f in analyze_file("app/main.py", src)] == [
        (4, "CWE-79", "high")
    ]


@pytest.mark.e2e
def test_the_worker_scans_ahead_so_semgrep_starts_rarely(monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[int] = []
    real = semgrep._scan_files

    def counting(files: Any) -> Any:
        batches.append(len(files))
        return real(files)

    monkeypatch.setattr(semgrep, "_scan_files", counting)
    files = {f"web/f{i:02d}.js": f"eval(location.hash + '{i}');\n" for i in range(30)}
    worker = StaticWorker(files)
    lines = [
        [f["line"] for f in _reply(worker, file_audit_prompt(p, text))["findings"]]
        for p, text in sorted(files.items())
    ]
    assert lines == [[1]] * 30
    assert sum(batches) == 30 and len(batches) == 2


def test_scanning_for_secrets_leaves_the_warning_display_alone(tmp_path: Any) -> None:
    """Importing detect-secrets turns on logging.captureWarnings, which sent deeprepo's own
    warnings (a run log or a page not written) to an unconfigured logger: the console's
    warning display must still be the one in charge after a scan."""
    import subprocess
    import sys

    code = (
        "import warnings\n"
        "seen = []\n"
        "warnings.showwarning = lambda msg, *a, **k: seen.append(str(msg))\n"
        "from deeprepo.builtin.analyzers.secrets import run_detect_secrets\n"
        "run_detect_secrets('a.py', 'password = \"hunter2hunter2\"\\n')\n"
        "warnings.warn('the run log was not written')\n"
        "print(seen)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "the run log was not written" in out.stdout
