"""The compositional catalogue: every combination renders valid code whose ground truth points
at the bug, the same seed renders the same bytes, and a decoy is never labelled a bug."""

from __future__ import annotations

import ast
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import deeprepo.rl.tasks.compose as compose
import deeprepo.rl.tasks.composed as composed
import deeprepo.rl.tasks.flows as flows
from deeprepo.rl.tasks import generate_task
from deeprepo.rl.tasks.catalogue import safe_pool, snippets
from deeprepo.rl.tasks.compose import Host, recipes, render_bug
from deeprepo.rl.tasks.datafile import CATALOGUE_LANGS as LANGS
from deeprepo.rl.tasks.datafile import CatalogueError, parse

# What the sink line of each composed kind calls (independent of the data's wording).
SINKS = {
    "sql-injection": r"\.(execute|query)\(",
    "command-injection": r"shell=True|os\.system\(|execSync\(|\bexec\(",
    "path-traversal": r"\bopen\(|readFile\(",
    "xss": r"<[a-z]+[^>]*>.*\{",
    "ssrf": r"urlopen\(|fetch\(",
    "unsafe-deserialization": r"pickle\.loads\(|yaml\.load\(|runInNewContext\(",
    "weak-password-hash": r"md5|sha1|pbkdf2",
    "insecure-randomness": r"random\.choice\(|Math\.random\(|secrets\.choice\(|randomBytes\(",
    "hardcoded-secret": r"\"(Bearer )?[A-Za-z0-9]{24}\"",
    "resource-leak": r"\bopen\(|connect\(|openSync\(",
    # The page made 0-based once too few times, or once too many.
    "off-by-one": r"page \* per_page|safePage \* limit|\(page - 1\) \* per_page|\(safePage - 1\) \* limit",
    "race-condition": r"\] = \w+ \+ 1",
}
SAFE_SINKS = (
    r", \(\w+,\)|, \[\w+\]\)|run\(\w+, check=True\)|execFile\(|basename|safe_load|JSON\.parse|pbkdf2|scrypt|secrets\.|randomBytes"
    r"|environ|process\.env|^\s*with |closeSync|- 1\) \*|escape_html|\.quote\(|json\.loads"
    r"|execFileSync|replace\(/\[&|encodeURIComponent|subprocess\.run\(\["
    r"|etag|cache_key|cacheKey|request_id|requestId|vnd\.partner|\.close\(\)|- 1, 0\)|with lock:|lock\.acquire\(\)|\+ 1;\n\s*await|mutex\.acquire\(\)|If-None-Match|if-none-match"
)


def _render_all(lang: str, host: Host) -> list[tuple[compose.Recipe, compose.RenderedBug]]:
    return [
        (r, render_bug(r, host, random.Random(k), name=f"f{k}"))
        for k, r in enumerate(recipes(lang))
    ]


def _node_ok(source: str, tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    path = tmp_path / "all.js"
    path.write_text(source, encoding="utf-8")
    run = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[:2000]


def test_the_catalogue_is_compositional_and_large() -> None:
    for lang in LANGS:
        rs = recipes(lang)
        bugs = [r for r in rs if r.vulnerable]
        assert len(bugs) >= 200 and len(rs) - len(bugs) >= 150, lang
        assert len({r.name for r in rs}) == len(rs)
        # Each kind has bugs through every source and propagation, and decoys of its own; the
        # sources with a caller go with the kinds whose label the value decides.
        for kind in {r.kind for r in rs}:
            mine = [r for r in rs if r.kind == kind]
            tainted = any(r.sink.tainted for r in mine)
            assert {r.source.id for r in mine if r.vulnerable} >= {
                s.id
                for s in compose.parts(lang).sources
                if not s.trusted and (tainted or not s.caller)
            }
            assert any(not r.vulnerable for r in mine), kind


@pytest.mark.parametrize("method", [False, True])
def test_every_python_combination_parses_and_marks_its_sink(method: bool) -> None:
    host = Host("python", indent="    " if method else "", method=method)
    rendered = _render_all("python", host)
    module = "\n\n".join(r.code for _, r in rendered)
    ast.parse("class Host:\n" + module if method else module)
    for recipe, r in rendered:
        lines = r.code.split("\n")
        assert 1 < r.start_line <= r.sink_line <= len(lines), recipe.name
        sink = lines[r.sink_line - 1]
        assert re.search(SINKS[recipe.kind], sink) or re.search(SAFE_SINKS, sink), sink
        if recipe.guard is not None:  # a check (holding or not) opens the range
            first = recipe.guard.code.split("\n")[0].replace("⟦start⟧", "").strip()
            pattern = re.sub(r"@\w+", ".+", re.escape(first))
            assert re.fullmatch(pattern, lines[r.start_line - 1].strip()), recipe.name


@pytest.mark.parametrize("method", [False, True])
def test_every_js_combination_passes_node_check(method: bool, tmp_path: Path) -> None:
    host = Host("js", indent="  " if method else "", method=method)
    rendered = _render_all("js", host)
    body = "\n\n".join(r.code for _, r in rendered)
    _node_ok("class Host {\n" + body + "\n}\n" if method else body + "\n", tmp_path)
    for recipe, r in rendered:
        sink = r.code.split("\n")[r.sink_line - 1]
        assert r.start_line <= r.sink_line
        assert re.search(SINKS[recipe.kind], sink) or re.search(SAFE_SINKS, sink), sink


def test_the_label_follows_the_guard_and_a_decoy_sink_line_is_a_safe_one() -> None:
    for lang in LANGS:
        for k, recipe in enumerate(recipes(lang)):
            r = render_bug(recipe, Host(lang), random.Random(k))
            lines = r.code.split("\n")
            sink = lines[r.sink_line - 1]
            guarded = recipe.guard is not None and recipe.guard.safe
            holds = recipe.safe_sink or (recipe.sink.tainted and (recipe.source.trusted or guarded))
            assert r.vulnerable is (not holds), recipe.name
            assert r.description.startswith("Safe:") is holds
            if recipe.safe_sink:  # the safe way is written in the function
                assert re.search(SAFE_SINKS, r.code, re.M), r.code
            else:  # guarded or not, the sink line is the dangerous call itself
                assert re.search(SINKS[recipe.kind], sink), sink


def test_a_seed_renders_the_same_bytes_and_seeds_vary_the_style() -> None:
    recipe = next(r for r in recipes("python") if r.guard is not None and r.guard.safe)
    host = Host("python", taken=frozenset({"name", "value"}))
    one = render_bug(recipe, host, random.Random(7))
    assert one == render_bug(recipe, host, random.Random(7))
    styles = {render_bug(recipe, host, random.Random(s)).code for s in range(30)}
    assert len(styles) >= 20
    # The host's names stay free.
    assert not any(re.search(r"^\s*(name|value) =", code, re.M) for code in styles)
    assert composed.composed_snippets("js") == composed.composed_snippets("js")


def test_composed_snippets_and_safe_uses_join_the_generators_catalogues() -> None:
    for lang in LANGS:
        names = {s.name for s in snippets(lang)}
        assert {r.name for r in recipes(lang)} <= names
        mine = [s for s in snippets(lang) if s.name in {r.name for r in recipes(lang)}]
        assert all(("-decoy" in s.name) is (not s.vulnerable) for s in mine)
        clean = [u for u in safe_pool(lang) if u in composed.composed_safe_uses(lang)]
        assert len(clean) >= 10 and all("«nm»" in u.block.code for u in clean)


def test_composed_decoys_are_never_labelled_bugs_in_generated_tasks() -> None:
    seen = 0
    for seed in range(6):
        for lang in ("python", "js"):
            task = generate_task(seed, "medium", lang)
            for e in task.ground_truth:
                if e.description.startswith("Safe:"):
                    assert not e.vulnerable, e
                if "its check does not stop" in e.description or "with no check" in e.description:
                    assert e.vulnerable
                    seen += 1
    assert seen  # composed bugs are planted


def test_a_body_without_its_sink_mark_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (Path(compose.__file__).parent / "data" / "python" / "compose.toml").read_text("utf-8")
    bad = text.replace("rows = conn.execute(sql).fetchall()  ⟦sink⟧", "rows = 1", 1)
    monkeypatch.setattr(compose, "document", lambda lang, name: parse(bad, "python/compose.toml"))
    compose.parts.cache_clear()
    try:
        with pytest.raises(CatalogueError, match=r"python/compose.toml \[\[sink\]\] #1.*⟦sink⟧"):
            compose.parts("python")
    finally:
        monkeypatch.undo()
        compose.parts.cache_clear()


def test_draw_recipe_filters_by_kind_and_label() -> None:
    rng = random.Random(3)
    for _ in range(20):
        r = compose.draw_recipe(rng, "js", kind="xss", vulnerable=False)
        assert r.kind == "xss" and not r.vulnerable and r.lang == "js"
    with pytest.raises(CatalogueError, match="no python recipe"):
        compose.draw_recipe(rng, "python", kind="missing-authorization")


def test_a_composed_snippet_is_rendered_afresh_per_placement() -> None:
    snip = next(s for s in snippets("python") if s.name.startswith("py-c-sql-injection"))
    drawn = {flows.renamed(snip, random.Random(k)).block.code for k in range(20)}
    assert len(drawn) >= 15  # names and style per placement, not one text per recipe
    again = flows.renamed(snip, random.Random(3))
    assert again == flows.renamed(snip, random.Random(3)) and again.name == snip.name
    assert "⟦sink⟧" in again.block.code and again.vulnerable == snip.vulnerable


def test_a_caller_decides_the_label_where_the_function_reads_a_parameter() -> None:
    """The function with a caller is the same text whichever its label: its one caller, after
    it, passes the sink's constant (a decoy) or what it reads itself (the bug)."""
    for lang in LANGS:
        called = [r for r in recipes(lang) if r.source.caller]
        assert {r.source.id for r in called if r.vulnerable} == {"relay"}
        assert any(not r.vulnerable and not r.safe_sink for r in called)
        for k, recipe in enumerate(called[::7]):
            r = render_bug(recipe, Host(lang), random.Random(k), name="f")
            call = [ln for ln in r.code.split("\n")[r.sink_line :] if re.search(r"\bf\(", ln)]
            assert len(call) == 1, r.code  # the caller follows the function, outside its range
            args = re.split(r"\bf\(", call[0], maxsplit=1)[1]
            if recipe.source.trusted:
                assert re.search(r"[\"'][^\"']*[\"']\)", args), call  # a literal, not input
                assert "only caller passes a constant" in r.description or recipe.safe_sink
            else:
                assert re.search(r"\.get\(|\.\w+ \|\|", args), call
        # Where the sink alone is the defect, a caller would change nothing: none is rendered.
        assert all(r.sink.tainted for r in called)


def test_a_check_whose_result_is_not_used_leaves_the_bug() -> None:
    for lang in LANGS:
        stale = [
            r
            for r in recipes(lang)
            if r.guard is not None and r.guard.stale and not (r.safe_sink or r.source.trusted)
        ]
        assert stale and all(r.vulnerable for r in stale)
        for k, recipe in enumerate(stale[::5]):
            r = render_bug(recipe, Host(lang), random.Random(k))
            lines = r.code.split("\n")
            bound = re.match(r"\s*(?:const )?(\w+) = ", lines[r.start_line - 1])
            assert bound, lines[r.start_line - 1]
            assert bound.group(1) not in re.findall(r"\w+", lines[r.sink_line - 1]), r.code


def test_a_holding_lookup_and_its_look_alike_differ_only_in_the_default() -> None:
    from deeprepo.rl import line_shape

    for lang in LANGS:
        guards = {g.id: g for g in compose.parts(lang).guards}
        for held, leaky in (("lookup", "lookup-fallback"), ("url-lookup", "url-lookup-fallback")):
            assert guards[held].safe and not guards[leaky].safe
            held_code, leaky_code = (
                re.sub(r"@\w+", "x", g.code) for g in (guards[held], guards[leaky])
            )
            assert line_shape(held_code) == line_shape(leaky_code)
