"""Suppression comments, baselines, include/exclude paths and the configuration files, as
library calls (the CLI's side is tests/test_cli_ci_config.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import Baseline, Finding
from deeprepo.codebase.loader import codebase_from_files
from deeprepo.codebase.pathfilter import PathFilter, narrow
from deeprepo.findings.baseline import load_baseline, subtract
from deeprepo.findings.fingerprint import FINGERPRINT_KEY
from deeprepo.findings.suppress import SuppressionPolicy, suppress
from deeprepo.providers.spec import parse_model_spec
from deeprepo.providers.suggest import did_you_mean
from deeprepo.run.config import load_repo_config, load_user_config, settle, user_config_path


def _finding(line: int, *, cwe: str = "CWE-78", kind: str = "command-injection") -> Finding:
    return Finding(
        "app.py", line, line, kind, cwe, "high", "shell", detail="x [bandit B602, confidence high]"
    )


def _suppressed(text: str, finding: Finding, policy: SuppressionPolicy | None = None) -> bool:
    _, aside = suppress([finding], {"app.py": text}, policy or SuppressionPolicy())
    return bool(aside)


@pytest.mark.parametrize(
    "line",
    [
        "call(x)  # deeprepo: ignore[CWE-78] reviewed",
        "call(x)  # deeprepo: ignore[78]",
        "call(x)  # deeprepo: ignore[command-injection]",
        "call(x)  # deeprepo: ignore[B602]",
        "call(x)  # deeprepo: ignore[CWE-89, CWE-78]",
        "call(x)  # deeprepo: ignore",
        "call(x); // deeprepo: ignore[CWE-78] a JS comment",
        "call(x)  #deeprepo:ignore[cwe-78]",
    ],
)
def test_an_ignore_comment_on_the_line_suppresses(line: str) -> None:
    assert _suppressed(f"a = 1\n{line}\n", _finding(2))


@pytest.mark.parametrize(
    "line",
    [
        "call(x)  # deeprepo: ignore[CWE-89] another rule",
        "call(x)  # nosec",  # bandit's own: not honoured unless asked
        "call(x)  # nosemgrep",
        "call(x)  # deeprepo ignore",
    ],
)
def test_other_comments_do_not_suppress(line: str) -> None:
    assert not _suppressed(f"a = 1\n{line}\n", _finding(2))


def test_the_reason_and_comment_are_recorded() -> None:
    kept, [aside] = suppress(
        [_finding(1), _finding(3)],
        {"app.py": "call(x)  # deeprepo: ignore[CWE-78]: reviewed by sec\nb\ncall(y)\n"},
        SuppressionPolicy(),
    )
    assert [f.start_line for f in kept] == [3]
    assert (aside.why, aside.reason) == ("suppressed", "reviewed by sec")
    assert aside.source == "# deeprepo: ignore[CWE-78]: reviewed by sec"


def test_a_comment_on_its_own_line_covers_the_next_line_only() -> None:
    text = "# deeprepo: ignore[CWE-78] reviewed\ncall(x)\ncall(y)\n"
    assert _suppressed(text, _finding(2))
    assert not _suppressed(text, _finding(3))
    assert not _suppressed("x = 1  # deeprepo: ignore\ncall(x)\n", _finding(2))


def test_inline_suppressions_can_be_turned_off() -> None:
    off = SuppressionPolicy(inline=False)
    assert not _suppressed("call(x)  # deeprepo: ignore\n", _finding(1), off)


@pytest.mark.parametrize(
    ("line", "suppressed"),
    [
        ("call(x)  # nosec", True),
        ("call(x)  # nosec B602", True),
        ("call(x)  # nosec: B602, B607", True),
        ("call(x)  # nosec B101", False),
        ("call(x)  # nosec reviewed by me", True),  # prose, no test id: the whole line
        ("call(x)  # nosemgrep", True),
        ("call(x)  // nosemgrep: command-injection", True),
        ("call(x)  # nosemgrep: other-rule", False),
    ],
)
def test_honour_nosec_reads_the_analyzers_own_comments(line: str, suppressed: bool) -> None:
    policy = SuppressionPolicy(honour_nosec=True)
    assert _suppressed(f"{line}\n", _finding(1), policy) is suppressed


def test_a_finding_on_a_file_the_codebase_lacks_is_kept() -> None:
    kept, aside = suppress([_finding(1)], {}, SuppressionPolicy())
    assert kept and not aside


def test_a_baseline_reads_sarif_and_findings_json(tmp_path: Path) -> None:
    sarif = tmp_path / "findings.sarif"
    sarif.write_text(
        json.dumps({"runs": [{"results": [{"partialFingerprints": {FINGERPRINT_KEY: "a:1"}}]}]})
    )
    assert load_baseline(sarif).fingerprints == {"a:1"}
    plain = tmp_path / "findings.json"
    plain.write_text(json.dumps([{"file": "x", "fingerprint": "b:1"}]))
    assert load_baseline(plain).fingerprints == {"b:1"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "cannot be read as JSON"),
        (json.dumps([{"file": "x"}]), "older versions wrote none"),
        (json.dumps({"runs": [{"results": [{}]}]}), "older versions wrote none"),
        (json.dumps({"a": 1}), "not a deeprepo findings.sarif"),
    ],
)
def test_a_file_that_is_no_baseline_is_a_usage_error(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=says):
        load_baseline(path)
    with pytest.raises(UsageError, match="does not exist"):
        load_baseline(tmp_path / "missing.sarif")


def test_subtract_sets_aside_what_the_baseline_holds() -> None:
    old, new = _finding(1), _finding(2)
    kept, known = subtract([(old, "a:1"), (new, "b:1")], Baseline("HEAD~1", frozenset({"a:1"})))
    assert kept == [new]
    assert [(k.finding, k.why, k.source) for k in known] == [(old, "baselined", "HEAD~1")]


def test_include_and_exclude_paths_are_gitignore_globs() -> None:
    files = {p: "x = 1\n" for p in ("src/a.py", "src/gen/b.py", "tests/t.py", "vendor/v.js")}
    codebase = codebase_from_files(files)
    narrowed = narrow(codebase, PathFilter(include=("src/", "*.js"), exclude=("gen/",)))
    assert sorted(narrowed.files) == ["src/a.py", "vendor/v.js"]
    assert "2 file(s) left out by the configuration's include/exclude paths" in (
        narrowed.metadata.notes
    )
    assert narrow(codebase, PathFilter()) is codebase
    negated = narrow(codebase, PathFilter(exclude=("*.py", "!src/a.py")))
    assert sorted(negated.files) == ["src/a.py", "vendor/v.js"]
    with pytest.raises(UsageError, match="leave none"):
        narrow(codebase, PathFilter(include=("docs/",)))
    with pytest.raises(UsageError, match="not a valid glob"):
        PathFilter(exclude=("[z-a]",)).check()


def test_a_repository_config_keeps_the_audit_keys_and_refuses_the_rest(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.deeprepo]\nexclude = ["a/"]\nfail-on = "medium"\nsandbox = "process"\n'
    )
    (tmp_path / ".deeprepo.toml").write_text(
        'fail-on = "HIGH"\ninclude-scopes = "source,config"\nroot = "x"\nexlude = []\n'
    )
    settings = load_repo_config(tmp_path)
    assert settings.values == {
        "exclude": ["a/"],
        "fail_on": "high",  # .deeprepo.toml wins a key both set
        "include_scope": ["source", "config"],
    }
    refused = [m for m in settings.messages if "refused" in m]
    assert [m.split(": refused ")[1].split(":")[0] for m in refused] == ["sandbox", "root"]
    assert any(
        "unknown key 'exlude' ignored; did you mean 'exclude'?" in m for m in settings.messages
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("fail-on = 3\n", "fail-on must be a severity"),
        ('fail-on = "severe"\n', "not a severity"),
        ("honour-nosec = 1\n", "honour-nosec must be true or false"),
        ("max-file-size = true\n", "max-file-size must be a whole number"),
        ("exclude = [1]\n", "exclude must be a list of strings"),
        ("exclude = [\n", "not valid TOML"),
    ],
)
def test_a_bad_value_names_its_file_and_key(tmp_path: Path, text: str, says: str) -> None:
    """In the user's own file a bad value stops the run; in a repository's it is named
    and left out: the repository is the audit's input and may not refuse the audit."""
    (tmp_path / ".deeprepo.toml").write_text(text)
    settings = load_repo_config(tmp_path)
    assert settings.values == {}
    (said,) = settings.messages
    assert ".deeprepo.toml" in said and says in said and "ignored" in said
    (tmp_path / "deeprepo").mkdir()
    (tmp_path / "deeprepo" / "config.toml").write_text(text)
    with pytest.raises(UsageError, match=says):
        load_user_config({"XDG_CONFIG_HOME": str(tmp_path)})


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (
            lambda p: p.write_text("[tool.deeprepo]\nx = " + "[" * 5000 + "]" * 5000 + "\n"),
            "nested too deep",
        ),
        (lambda p: p.write_text("# " + "x" * 1_100_000 + "\n"), "over 1,000,000"),
        (lambda p: p.symlink_to("/etc/hostname"), "not a regular file"),
        (lambda p: p.write_bytes(b"\xff\xfe[tool.deeprepo]\n"), "not valid TOML"),
    ],
)
def test_a_repository_pyproject_that_is_no_config_never_refuses_the_audit(
    tmp_path: Path, make: Any, says: str
) -> None:
    """Deep nesting (RecursionError in tomllib), a huge file, a link, bytes that are not
    UTF-8: each is named and ignored, never an exception out of the load."""
    make(tmp_path / "pyproject.toml")
    settings = load_repo_config(tmp_path)
    assert settings.values == {} and settings.files == []
    (said,) = settings.messages
    assert says in said and "ignored" in said


def test_the_user_config_lives_in_xdg_config_home(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert user_config_path(env) == tmp_path / "deeprepo" / "config.toml"
    assert load_user_config(env).values == {}
    (tmp_path / "deeprepo").mkdir()
    (tmp_path / "deeprepo" / "config.toml").write_text(
        'root = "anthropic/claude-sonnet-4-5"\nmax-cost = 5\nout = "x"\n'
    )
    settings = load_user_config(env)
    assert settings.values == {"root": "anthropic/claude-sonnet-4-5", "max_cost": 5.0}
    assert any("out ignored" in m for m in settings.messages)


def test_settle_command_line_then_user_then_repository_then_default(tmp_path: Path) -> None:
    (tmp_path / ".deeprepo.toml").write_text('fail-on = "low"\nexclude = ["r/"]\n')
    repo = load_repo_config(tmp_path)
    user_home = tmp_path / "home"
    (user_home / "deeprepo").mkdir(parents=True)
    (user_home / "deeprepo" / "config.toml").write_text('fail-on = "medium"\nmax-turns = 5\n')
    user = load_user_config({"XDG_CONFIG_HOME": str(user_home)})
    defaults = {"fail_on": None, "max_turns": 20, "exclude": [], "sandbox": "auto"}
    assert settle(set(), defaults, user, repo) == {
        "fail_on": "medium",
        "max_turns": 5,
        "exclude": ["r/"],
        "sandbox": "auto",
    }
    given = {**defaults, "fail_on": "critical"}
    assert settle({"fail_on"}, given, user, repo)["fail_on"] == "critical"


def test_a_misspelt_model_gets_a_did_you_mean() -> None:
    assert did_you_mean("anthropic/claude-sonet-4-5") == (
        " (did you mean 'anthropic/claude-sonnet-4-5'?)"
    )
    assert did_you_mean("anthropic/claude-sonnet-4-5") == ""
    assert did_you_mean("zzz/qqq") == ""
    with pytest.raises(Exception, match="did you mean 'anthropic/claude-sonnet-4-5'"):
        parse_model_spec("antropic/claude-sonnet-4-5")


def test_a_provider_404_suggests_the_nearest_known_model() -> None:
    from deeprepo.providers.openai_compat import translate_sdk_error

    class NotFoundError(Exception):
        status_code = 404

    hosted = translate_sdk_error(
        NotFoundError("nope"), parse_model_spec("anthropic/claude-sonet-4-5")
    )
    assert "did you mean 'anthropic/claude-sonnet-4-5'?" in str(hosted)
    # a server of one's own serves its own names: no suggestion from the price table
    local = translate_sdk_error(
        NotFoundError("nope"), parse_model_spec("openai/gpt-4o-mimi", "http://127.0.0.1:1/v1")
    )
    assert "did you mean" not in str(local)
