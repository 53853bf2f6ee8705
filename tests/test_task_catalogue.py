"""The generator's catalogues as data files: one schema for both languages, checked on load."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources

import pytest

import deeprepo.rl.tasks.catalogue as cat
from deeprepo.base.errors import DeeprepoError
from deeprepo.rl.tasks import BUG_KINDS
from deeprepo.rl.tasks.catalogue import (
    ENTITY_ROLES,
    clean_code,
    safe_pool,
    snippets,
    util_modules,
)
from deeprepo.rl.tasks.datafile import CATALOGUE_LANGS as LANGS
from deeprepo.rl.tasks.datafile import CatalogueError, parse
from deeprepo.rl.tasks.structure import OPTIONAL_UTILS

FILES = ("bugs", "logic", "decoys", "safe", "clean", "utils")
_CACHED = (cat.snippets, cat.catalogue, cat.safe_pool, cat.clean_code, cat.util_modules)


def _text(lang: str, name: str) -> str:
    path = resources.files("deeprepo.rl.tasks").joinpath("data", lang, f"{name}.toml")
    return path.read_text("utf-8")


def _clear() -> None:
    for fn in _CACHED:
        fn.cache_clear()


@pytest.fixture
def files(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[tuple[str, str], str]]:
    """The shipped data files as text; a test edits one and loads the catalogues from them."""
    texts = {(lang, name): _text(lang, name) for lang in LANGS for name in FILES}
    monkeypatch.setattr(
        cat, "document", lambda lang, name: parse(texts[lang, name], f"{lang}/{name}.toml")
    )
    _clear()
    yield texts
    monkeypatch.undo()
    _clear()


def _load_all() -> None:
    for lang in LANGS:
        snippets(lang)
        safe_pool(lang)


def _entry(text: str, name: str) -> str:
    """The ``[[snippet]]`` entry named ``name``, up to the next entry."""
    start = text.index(f'[[snippet]]\nname = "{name}"')
    end = text.find("\n[[snippet]]", start + 1)
    return text[start : end if end > 0 else len(text)]


def _edit(
    files: dict[tuple[str, str], str], lang: str, name: str, entry: str, old: str, new: str
) -> None:
    """Replace ``old`` by ``new`` in one snippet entry of ``data/<lang>/<name>.toml``."""
    text = files[lang, name]
    before = _entry(text, entry)
    assert old in before, (entry, old)
    files[lang, name] = text.replace(before, before.replace(old, new, 1))


# --- the shipped catalogues ------------------------------------------------------------------------


def test_both_languages_cover_every_bug_kind_and_the_same_roles() -> None:
    for lang in LANGS:
        planted = snippets(lang)
        assert {s.kind for s in planted if s.vulnerable} == set(BUG_KINDS), lang
        assert all(s.lang == lang for s in planted)
        assert safe_pool(lang)
    py, js = clean_code("python"), clean_code("js")
    assert set(py.entity) == set(js.entity) == set(ENTITY_ROLES)
    assert set(py.core) == set(js.core)
    for role in ENTITY_ROLES:  # the same per-entity blocks, so a snippet replaces either
        assert [b.key for b in py.entity[role]] == [b.key for b in js.entity[role]], role
    assert set(util_modules("python")) == set(util_modules("js"))
    assert set(util_modules("python")) >= {"pagination", *OPTIONAL_UTILS}


def test_python_and_js_files_have_the_same_tables() -> None:
    for name in FILES:
        py, js = parse(_text("python", name), name), parse(_text("js", name), name)
        assert set(py) == set(js), name
        if name == "utils":
            assert set(py["util"]) == set(js["util"])


def test_an_entry_moves_between_languages_unchanged(files: dict[tuple[str, str], str]) -> None:
    """One schema: a Python entry pasted into the JS file loads there as a JS snippet, and back."""
    py_entry = _entry(files["python", "bugs"], "py-obo-top")
    js_entry = _entry(files["js", "bugs"], "js-obo-top")
    files["js", "bugs"] += "\n" + py_entry.replace('"py-obo-top"', '"js-obo-top-from-python"')
    files["python", "bugs"] += "\n" + js_entry.replace('"js-obo-top"', '"py-obo-top-from-js"')
    moved = {s.name: s for lang in LANGS for s in snippets(lang)}
    assert moved["js-obo-top-from-python"].lang == "js"
    assert moved["js-obo-top-from-python"].block == moved["py-obo-top"].block
    assert moved["py-obo-top-from-js"].lang == "python"
    assert moved["py-obo-top-from-js"].block == moved["js-obo-top"].block


def test_cross_file_bugs_carry_their_guard_and_twin_arguments() -> None:
    for s in cat.catalogue():
        if s.vulnerable and s.source is not None:
            assert s.guard is not None and s.guard.what, s.name
            assert "«sink.»«sink_fn»(" in s.source.code
        if s.twin_args:
            assert s.vulnerable and s.source is not None, s.name


# --- a bad entry is a clear error ------------------------------------------------------------------

BAD_SNIPPETS = [
    # (lang, file, entry, old, new, message)
    (
        "python",
        "bugs",
        "py-sqli-route",
        'kind = "sql-injection"\n',
        "",
        r"python/bugs.toml \[\[snippet\]\] #3 'py-sqli-route': missing key 'kind'",
    ),
    (
        "js",
        "bugs",
        "js-sqli-search",
        "twin_args =",
        "twin_arg =",
        r"js/bugs.toml \[\[snippet\]\] #1 'js-sqli-search': unknown key 'twin_arg'",
    ),
    (
        "python",
        "bugs",
        "py-sqli-search",
        "list[«Entity»]:",
        "list[«Entitty»]:",
        r"'py-sqli-search': 'code' has an unknown placeholder «Entitty»",
    ),
    (
        "python",
        "decoys",
        "py-decoy-sqli-like",
        "(«selfp»term",
        "(«selfp term",
        r"'py-decoy-sqli-like': 'code' has an unclosed « or a stray »",
    ),
    (
        "python",
        "bugs",
        "py-sqli-search",
        "search_«entities»_view():",
        "search_«entities!»_view():",
        r"'py-sqli-search' \[snippet.source\]: 'code' has a malformed placeholder «entities!»",
    ),
    (
        "python",
        "bugs",
        "py-race-reserve",
        'uses = ["repo"]\n',
        "",
        r"'py-race-reserve': 'code' calls «repo.» but 'uses' does not list 'repo'",
    ),
    (
        "js",
        "decoys",
        "js-decoy-sqli-like",
        'uses = ["db"]\n',
        "",
        r"'js-decoy-sqli-like': 'code' queries through «dbq»/«dbpool», so 'uses' must list 'db'",
    ),
    (
        "js",
        "logic",
        "js-obo-tags",
        "  ⟦sink⟧",
        "",
        r"js/logic.toml \[\[snippet\]\] #4 'js-obo-tags': 'code' needs one ⟦sink⟧",
    ),
    (
        "python",
        "bugs",
        "py-xss-banner",
        "vulnerable = true",
        'vulnerable = "yes"',
        r"'py-xss-banner': 'vulnerable' must be true or false",
    ),
    (
        "python",
        "logic",
        "py-decoy-obo-tags",
        "vulnerable = false",
        "vulnerable = true",
        r"'py-decoy-obo-tags': a decoy's name contains '-decoy-'",
    ),
    (
        "js",
        "bugs",
        "js-ssrf-preview",
        "[snippet.guard]",
        "[snippet.guardx]",
        r"'js-ssrf-preview': a cross-file bug needs a \[snippet.guard\]",
    ),
    (
        "python",
        "bugs",
        "py-deser-pickle",
        'host = "cache"',
        'host = "cahce"',
        r"'py-deser-pickle': unknown host 'cahce'",
    ),
    (
        "js",
        "bugs",
        "js-obo-count",
        'key = "page_count"',
        'key = "page_total"',
        r"'js-obo-count': replaces 'page_total', but 'pagination' has no such block",
    ),
    (
        "python",
        "bugs",
        "py-sqli-order",
        'kind = "sql-injection"',
        'kind = "sqli"',
        r"'py-sqli-order': unknown kind 'sqli'",
    ),
]


@pytest.mark.parametrize(
    ("lang", "name", "entry", "old", "new", "message"),
    BAD_SNIPPETS,
    ids=[f"{b[2]}:{b[5][-30:]}" for b in BAD_SNIPPETS],
)
def test_a_bad_snippet_names_its_file_entry_and_key(
    files: dict[tuple[str, str], str],
    lang: str,
    name: str,
    entry: str,
    old: str,
    new: str,
    message: str,
) -> None:
    _edit(files, lang, name, entry, old, new)
    with pytest.raises(CatalogueError, match=message) as info:
        _load_all()
    assert isinstance(info.value, DeeprepoError)


def test_bad_clean_code_safe_uses_and_utilities_are_named(
    files: dict[tuple[str, str], str],
) -> None:
    files["python", "clean"] = files["python", "clean"].replace("[part.wsgi]", "[part.wsgy]")
    with pytest.raises(CatalogueError, match=r"python/clean.toml \[part\]: missing key 'wsgi'"):
        clean_code("python")
    _clear()
    files["js", "safe"] = files["js", "safe"].replace('where = "fn"', 'where = "func"', 1)
    with pytest.raises(
        CatalogueError, match=r"js/safe.toml \[\[safe\]\] #1: unknown 'where' 'func'"
    ):
        safe_pool("js")
    _clear()
    files["js", "utils"] = files["js", "utils"].replace('stems = ["cache", "memo"]\n', "")
    with pytest.raises(CatalogueError, match=r"js/utils.toml \[util.cache\]: missing key 'stems'"):
        util_modules("js")


def test_a_file_that_is_not_toml_is_named_with_its_line(
    files: dict[tuple[str, str], str],
) -> None:
    text = files["python", "decoys"]
    files["python", "decoys"] = text.replace("vulnerable = false", "vulnerable = false false", 1)
    line = text[: text.index("vulnerable = false")].count("\n") + 1
    with pytest.raises(
        CatalogueError, match=rf"python/decoys.toml is not valid TOML: .*line {line}"
    ):
        snippets("python")
