"""The offline engine's rules that judge a match by its use (issue 22 item 7): weak randomness
for secrets, framework signing keys, string-built HTML responses, template ``|safe`` and
autoescape, bandit's temp-path and bind-all tests. Each rule has cases it must report and
cases it must not."""

from __future__ import annotations

import pytest

from deeprepo.builtin.analyzers import analyze_file, run_bandit
from deeprepo.builtin.analyzers.pyuse import names_a_secret_use
from deeprepo.builtin.analyzers.templates import template_finding_matters


def _lines(path: str, src: str, tool: str) -> list[int]:
    return [f.line for f in analyze_file(path, src) if f.tool.endswith(tool)]


def _bandit(src: str, tool: str) -> list[int]:
    """Lines of ``tool``'s findings from the Python analyzer alone (no semgrep process); two
    bandit tests on one line (mark_safe is B308 and B703) are one line."""
    return sorted({f.line for f in run_bandit(src)[0] if f.tool.endswith(tool)})


def _at(src: str, *fragments: str) -> list[int]:
    """The line of each fragment in ``src`` (its first line that holds it)."""
    lines = src.split("\n")
    return [next(n for n, text in enumerate(lines, 1) if frag in text) for frag in fragments]


# --- weak randomness: reported where the value must be unguessable -----------------------

RANDOM_USES = """import random
import string
from random import choice

def backoff(attempt):
    return attempt * random.random()

def pick_winners(entries):
    return random.sample(entries, 3)

def remember(resp):
    value = "".join(choice(string.ascii_letters) for _ in range(24))
    resp.set_cookie("remember", value)

def make_otp():
    digits = [str(random.randint(0, 9)) for _ in range(6)]
    return "".join(digits)

def shard(mapping):
    cache_key = random.choice(list(mapping))
    key = random.choice(list(mapping))
    return cache_key, key

def new_client():
    return {"api_key": random.getrandbits(64), "colour": "blue"}

def greeting(name):
    return "Hello %s, SESSIONID=%s" % (name, random.getrandbits(32))

key = str(random.getrandbits(256)).encode()
"""


def test_random_is_reported_where_its_value_becomes_a_secret() -> None:
    assert _bandit(RANDOM_USES, "B311") == _at(
        RANDOM_USES,
        "choice(string",  # into a cookie, through a name
        "randint(0, 9)",  # returned by make_otp
        '"api_key"',  # under a secret's dict key
        "SESSIONID",  # formatted into a session id
        "key = str(",  # a generated bare ``key``
    )


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("resetToken", True),
        ("SESSION_ID", True),
        ("api_key", True),
        ("otp", True),
        ("csrf", True),
        ("password_salt", True),  # for its password, not its salt
        ("salt", False),  # unique, not secret
        ("cache_key", False),
        ("sort_key", False),
        ("key", False),
        ("author", False),
        ("delay", False),
        ("shipping", False),
    ],
)
def test_names_that_say_a_value_must_be_unguessable(name: str, secret: bool) -> None:
    assert names_a_secret_use(name) is secret


def test_a_generated_bare_key_is_a_secret_a_picked_one_is_not() -> None:
    assert names_a_secret_use("key", generated=True)
    assert not names_a_secret_use("key", generated=False)


# --- hard-coded framework signing keys --------------------------------------------------

SIGNING_KEYS = """import os
import jwt
from flask import Flask
from itsdangerous import URLSafeTimedSerializer

app = Flask(__name__)
app.secret_key = "dev"
app.config["SECRET_KEY"] = "flask-session-signing-key"
app.config.update(JWT_SECRET_KEY="jwt-signing-words")
SECRET_KEY = "django-insecure-3k%(x9!q@w#e$r^t&y*u(i)o_p-a=s+d"
TOKEN_KEY = "hs256-shared"
signer = URLSafeTimedSerializer("itsdangerous-key-42")

def issue(user):
    return jwt.encode({"sub": user}, "jwt-literal-secret", algorithm="HS256")

def check(token):
    return jwt.decode(token, TOKEN_KEY, algorithms=["HS256"])
"""

SAFE_SIGNING = """import os

app.secret_key = os.environ.get("SECRET_KEY", "dev")
app.config["SECRET_KEY"] = os.environ.get("FLASK_SECRET") or "local-only"
SECRET_KEY = "change-me"
JWT_SECRET_KEY = "<your jwt secret>"
SESSION_SECRET = None
app.config.update(TESTING=True, SECRET_KEY="testing-key")

def test_login(client):
    client.application.secret_key = "test-secret"
"""


def test_signing_keys_written_in_the_source_are_reported() -> None:
    assert _bandit(SIGNING_KEYS, "signing-key") == _at(
        SIGNING_KEYS,
        '"dev"',
        "flask-session-signing-key",
        "jwt-signing-words",
        "django-insecure",
        "hs256-shared",  # passed to jwt.decode by name
        "itsdangerous-key-42",
        "jwt-literal-secret",
    )
    findings = run_bandit(SIGNING_KEYS)[0]
    assert all("dev" not in f.detail and "django-insecure" not in f.detail for f in findings)


def test_env_fallbacks_placeholders_and_test_keys_are_not_reported() -> None:
    assert _bandit(SAFE_SIGNING, "signing-key") == []


# --- bandit's temp paths and bind-all: only where the value is used that way ------------

TEMP_PATHS = """import os
import tempfile
from pathlib import Path

LOG = "/tmp/app.log"
UPLOADS = "/tmp/uploads"

def write(text):
    with open(LOG, "a") as fh:
        fh.write(text)

def stamp(name):
    Path(f"/tmp/stamp-{name}").write_text("x")

def serve(app):
    app.run(ssl_context=("/tmp/site.crt", "/tmp/site.key"))

def is_temp(path):
    return path.startswith("/var/tmp/") or path == "/tmp"

def scratch():
    return tempfile.mkstemp(dir="/tmp")
"""


def test_temp_paths_are_reported_where_they_are_opened_or_written() -> None:
    assert _bandit(TEMP_PATHS, "B108") == _at(TEMP_PATHS, "LOG =", "stamp-", "site.crt")


BIND = """import socket

ALLOWED = {"127.0.0.1", "0.0.0.0"}

def listening_everywhere(host):
    return host == "0.0.0.0"

def serve(host="0.0.0.0", port=8000):
    sock = socket.socket()
    sock.bind((host, port))

def main(app):
    app.run(host="0.0.0.0", port=5000)
"""


def test_bind_all_is_reported_where_a_server_binds_to_it() -> None:
    assert _bandit(BIND, "B104") == _at(BIND, "def serve", "app.run")


# --- mark_safe / Markup: only on values that can carry data -----------------------------

MARKUP = """from markupsafe import Markup, escape
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from flask_babel import gettext as _

def banner():
    return Markup("<b>Maintenance tonight</b>")

def welcome():
    return mark_safe(_("Welcome <em>back</em>"))

def badge(name):
    return format_html("<span>{}</span>", name), Markup(f"<i>{escape(name)}</i>")

def dotted(name):
    return mark_safe(escape(name).replace(".", "<wbr>."))

def duplicate(identifier):
    message = _('A project named "%(name)s" exists', name=identifier)
    return Markup(message)

def bio(user):
    return mark_safe(f"<p>{user.bio}</p>")
"""


def test_marked_safe_is_reported_only_where_data_can_reach_it() -> None:
    found = sorted({f.line for f in run_bandit(MARKUP)[0] if f.cwe == "CWE-79"})
    assert found == _at(MARKUP, "Markup(message)", "user.bio")


# --- templates --------------------------------------------------------------------------

PAGE = """<html><body>
{{ "<b>hi</b>"|safe }}
{{ _("Welcome <b>back</b>")|safe }}
{{ settings|tojson|safe }}
{{ comment.body|safe }}
{% autoescape off %}<p>static</p>{% endautoescape %}
{% autoescape off %}{{ user.bio }}{% endautoescape %}
</body></html>
"""


@pytest.mark.parametrize(
    ("rule", "line", "matters"),
    [
        ("template-jinja-safe-filter", 2, False),  # a constant
        ("template-jinja-safe-filter", 3, False),  # a translated constant
        ("template-jinja-safe-filter", 4, False),  # serialised before |safe
        ("template-jinja-safe-filter", 5, True),  # a user's text
        ("template-autoescape-off", 6, False),  # no variable in the block
        ("template-autoescape-off", 7, True),
        ("template-vue-v-html", 5, True),  # other rules are not judged here
    ],
)
def test_unescaped_output_in_an_html_page(rule: str, line: int, matters: bool) -> None:
    assert template_finding_matters(rule, "templates/page.html", PAGE, line, line) is matters


@pytest.mark.parametrize(
    ("expr", "matters"),
    [
        ('icon("plus", size=2)', False),  # a helper given literals only
        ("form.username", False),  # a form field: its widget escapes the value
        ("field(class=css)", False),
        ("csrf_token", False),
        ("formatted_bio", True),  # a name that merely starts like one
        ('render(user.bio, "md")', True),  # a helper given data
        ("user.bio|striptags", False),
    ],
)
def test_helpers_forms_and_filters_before_safe(expr: str, matters: bool) -> None:
    page = f"<div>{{{{ {expr}|safe }}}}</div>\n"
    assert template_finding_matters("template-jinja-safe-filter", "t.html", page, 1, 1) is matters


def test_plain_text_templates_are_not_html() -> None:
    email = "Hello {{ user.name|safe }},\n\n{% autoescape off %}{{ note }}{% endautoescape %}\n"
    for path in ("templates/emails/welcome-body.html", "templates/emails/welcome.txt"):
        assert not template_finding_matters("template-jinja-safe-filter", path, email, 1, 1)
        assert not template_finding_matters("template-autoescape-off", path, email, 3, 3)
    # A fragment of template tags alone may be included into a page: still judged as HTML.
    fragment = "{{ comment.body|safe }}\n"
    assert template_finding_matters("template-jinja-safe-filter", "_c.html", fragment, 1, 1)
    # A subject line of template tags alone: its name says it is text.
    subject = "{{ status|upper }} | {{ check.name|safe }}\n"
    assert not template_finding_matters(
        "template-jinja-safe-filter", "emails/alert-subject.html", subject, 1, 1
    )
    assert template_finding_matters("template-jinja-safe-filter", "alert.html", subject, 1, 1)
    # A .txt name says plain text whatever the body holds.
    assert not template_finding_matters(
        "template-jinja-safe-filter", "mail/body.txt.j2", "<p>{{ x|safe }}</p>", 1, 1
    )


@pytest.mark.e2e
def test_templates_end_to_end() -> None:
    assert [f.line for f in analyze_file("templates/page.html", PAGE)] == [5, 7]


# --- reflected XSS from string-built responses (semgrep) ---------------------------------

VIEWS = """from flask import Flask, make_response, request
from django.http import HttpResponse
from django.template.loader import render_to_string
from markupsafe import escape
import http.server
from urllib.parse import urlparse

app = Flask(__name__)

@app.route("/search")
def search():
    q = request.args.get("q", "")
    page = "<h1>Results</h1>"
    page += f"<p>You searched for {q}</p>"
    return page

@app.route("/search-escaped")
def search_escaped():
    q = request.args.get("q", "")
    page = "<h1>Results</h1>"
    page += f"<p>{escape(q)}</p>"
    return page

@app.route("/data")
def data():
    q = request.args.get("q", "")
    out = {"q": q}
    return out

def metrics(request):
    name = request.GET.get("name")
    return HttpResponse("metric " + name, content_type="text/plain")

@app.route("/debug")
def debug():
    text = ""
    for name, value in request.headers.items():
        text += f"{name}: {value}\n"
    resp = make_response(text)
    resp.mimetype = "text/plain"
    return resp

def hello(request):
    name = request.GET.get("name")
    return HttpResponse(render_to_string("hello.html", {"name": name}))

def echo(request):
    html = "<p>" + request.GET.get("name") + "</p>"
    return HttpResponse(html)

def referer_query(request):
    return "?" + urlparse(request.headers.get("Referer", "")).query

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        query = self.path.split("?", 1)[-1]
        body = "<p>%s</p>" % query
        self.wfile.write(body.encode())
"""


@pytest.mark.e2e
def test_reflected_xss_through_string_built_responses() -> None:
    found = [f.line for f in analyze_file("app/views.py", VIEWS) if f.cwe == "CWE-79"]
    # The first "return page" is the unescaped search; the escaped one is not reported.
    assert found == _at(VIEWS, "    return page", "HttpResponse(html)", "wfile.write")


# --- Math.random (semgrep) ---------------------------------------------------------------

RANDOM_JS = """function jitter(ms) { return ms * Math.random(); }
function generateResetToken() {
  let out = "";
  for (let i = 0; i < 16; i++) out += chars[Math.floor(Math.random() * chars.length)];
  return out;
}
const makeSessionId = () => Math.random().toString(36).slice(2);
function login(req, res) {
  res.cookie("remember", Math.random().toString(36));
  const colour = Math.random() > 0.5 ? "red" : "blue";
  const apiKey = Math.random().toString(16);
  res.json({ colour, apiKey });
}
function pickAuthor(list) { return list[Math.floor(Math.random() * list.length)]; }
function cacheSalt() { return Date.now().toString(36) + Math.random().toString(36); }
"""


@pytest.mark.e2e
def test_math_random_is_reported_where_it_makes_a_secret() -> None:
    assert _lines("web/auth.js", RANDOM_JS, "js-insecure-random-token") == [4, 7, 9, 11]


def test_a_secrets_scan_waiting_behind_another_keeps_its_whole_budget() -> None:
    # Under load many files queue for detect-secrets (one scan at a time); the budget is the
    # scan's own, so time spent waiting for the lock must not turn a file "not analysed".
    import threading

    from deeprepo.builtin.analyzers import secrets

    text = "".join(f'name_{i} = "value {i}"\n' for i in range(64)) + (
        'password = "hunter2hunter2"\n'
    )
    secrets.run_detect_secrets("warm.py", "x = 1\n")  # plugins loaded outside the timed part
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with secrets._SECRETS_LOCK:
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    threading.Timer(1.0, release.set).start()
    try:
        found = secrets.run_detect_secrets("a.py", text, budget_s=0.5)
    finally:
        release.set()
        holder.join()
    assert [f.line for f in found] == [65]


CIPHERS_JS = """const crypto = require("crypto");
const a = crypto.createCipheriv("aes-128-ecb", key, null);
const b = crypto.createCipheriv("aes-256-gcm", key, iv);
const c = crypto.createDecipheriv("des-ede3-cbc", key, iv);
const d = crypto.createCipheriv("chacha20-poly1305", key, iv, { authTagLength: 16 });
const e = crypto.createCipheriv("AES-192-ECB", key, null);
"""


@pytest.mark.e2e
def test_a_weak_cipher_is_reported_wherever_its_name_says_so() -> None:
    # semgrep's metavariable-regex matches from the start of the value: ECB mode sits at the
    # end of the algorithm's name ("aes-128-ecb"), so it was never reported.
    assert _lines("lib/crypt.js", CIPHERS_JS, "js-weak-cipher") == [2, 4, 6]
