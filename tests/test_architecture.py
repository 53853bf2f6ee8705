"""Architecture from imports: parsing, resolution, components, edges, cycles, tests reached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deeprepo.architecture import (
    Architecture,
    analyze_architecture,
    architecture_markdown,
    architecture_of,
    architecture_summary,
    mermaid,
)
from deeprepo.architecture.graph import assign_components, strongly_connected
from deeprepo.architecture.imports import PyImport, js_imports, python_imports
from deeprepo.base.records import RunResult
from deeprepo.codebase import codebase_from_files, load_codebase
from deeprepo.orchestrator.episode import metadata_summary
from deeprepo.report.outputs import write_outputs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vulnapi"
PAD = "# " + "x" * 200 + "\n"  # weight, so that a folder dominates by characters


def _edges(arch: Architecture) -> dict[tuple[str, str], int]:
    return {(e.source, e.target): e.imports for e in arch.edges}


def _analyze(files: dict[str, str]) -> Architecture:
    return architecture_of(codebase_from_files(files))


# --------------------------------------------------------------------------- parsing


def test_python_imports_relative_absolute_and_nested() -> None:
    text = (
        "import os, pkg.sub as s\n"
        "from . import util\n"
        "from ..db.models import (\n    Model,\n    Other,\n)\n"
        "from . aix_data import DATA\n"
        "def f():\n    import yaml\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg.core import Engine\n"
        'def g():\n    """Example:\n\n    import fakepkg\n    """\n'
    )
    found = set(python_imports(text))
    assert found == {
        PyImport("os", (), 0),
        PyImport("pkg.sub", (), 0),
        PyImport("", ("util",), 1),
        PyImport("db.models", ("Model", "Other"), 2),
        PyImport("aix_data", ("DATA",), 1),
        PyImport("yaml", (), 0),
        PyImport("typing", ("TYPE_CHECKING",), 0),
    }


def test_python_imports_of_a_file_that_does_not_parse_keep_the_statements_that_do() -> None:
    text = "import json\nfrom . import util\ndef broken(:\n    pass\nprint 'py2'\n"
    assert set(python_imports(text)) == {PyImport("json", (), 0), PyImport("", ("util",), 1)}
    assert python_imports("x = 1\n") == []
    assert python_imports("") == []


def test_js_imports_every_form_and_no_comments() -> None:
    text = (
        "import a from 'a-pkg'\n"
        'import {\n  b,\n  c as d,\n} from "./b"\n'
        "import './side-effect.css'\n"
        "export * from './reexport'\n"
        "export { x } from '@scope/pkg/sub'\n"
        "const r = require('./req');\n"
        "const lazy = await import('./lazy.js')\n"
        "import type { T } from './types'\n"
        "// const ghost = require('ghost')\n"
        "/* import z from 'ghost2' */\n"
        "const notAnImport = Array.from('abc'); obj.require('nope')\n"
    )
    assert js_imports(text) == [
        "a-pkg",
        "./b",
        "./side-effect.css",
        "./reexport",
        "@scope/pkg/sub",
        "./req",
        "./lazy.js",
        "./types",
    ]


# --------------------------------------------------------------------------- graphs


def test_python_package_with_relative_imports_and_a_cycle() -> None:
    files = {
        "pkg/__init__.py": "from .core import run\n",
        "pkg/core.py": "from . import util\nfrom .db.models import Model\n" + PAD,
        "pkg/util.py": "from pkg import core\n" + PAD,
        "pkg/db/__init__.py": "",
        "pkg/db/models.py": (
            "import os\nimport requests\nfrom ..util import helper\n"
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import core\n"
            'def f():\n    """Use it like this:\n\n    import fakepkg\n    """\n    import yaml\n'
        )
        + PAD,
        "pkg/broken.py": "from . import util\ndef broken(:\n" + PAD,
        "pkg/__main__.py": "from pkg.core import run\nrun()\n",
        "tests/test_core.py": "import pytest\nfrom pkg.core import run\n",
        "setup.py": "from setuptools import setup\nsetup()\n",
    }
    arch = _analyze(files)
    assert arch.modules == 8  # setup.py is source too
    names = {c.name for c in arch.components}
    assert names == {"pkg/__init__", "core", "util", "db", "broken", "__main__", "setup"}
    assert _edges(arch) == {
        ("pkg/__init__", "core"): 1,
        ("core", "util"): 1,
        ("core", "db"): 1,
        ("util", "core"): 1,
        ("db", "util"): 1,
        ("broken", "util"): 1,
        ("__main__", "core"): 1,
    }
    assert arch.component_cycles == [["core", "db", "util"]]
    assert arch.module_cycles == [["pkg/core.py", "pkg/db/models.py", "pkg/util.py"]]
    assert arch.fan_in[:2] == [("pkg/core.py", 3), ("pkg/util.py", 3)]
    assert [(d.name, d.ecosystem, d.files) for d in arch.external] == [
        ("requests", "python", 1),
        ("setuptools", "python", 1),
        ("yaml", "python", 1),
    ]
    assert [d.name for d in arch.test_only_external] == ["pytest"]
    (main,) = [e for e in arch.entry_points if e.path == "pkg/__main__.py"]
    assert (main.tests, main.reached, main.component) == (0, False, "__main__")
    # The test imports pkg.core: core, what it imports, and the package's __init__ are reached.
    assert sorted(arch.untested_components) == ["__main__", "broken", "setup"]
    assert arch.unresolved == 0


def test_js_project_require_import_index_and_tsconfig_paths() -> None:
    files = {
        "package.json": json.dumps({"name": "app", "main": "src/index.js"}),
        "tsconfig.json": (
            '{\n  // comments and trailing commas are allowed here\n  "compilerOptions": {\n'
            '    "baseUrl": ".",\n    "paths": { "@/*": ["src/*"], },\n  },\n}\n'
        ),
        "src/index.js": "const server = require('./server')\nconst l = import('./lazy.js')\n" + PAD,
        "src/server.js": (
            "import express from 'express'\nimport { helper } from './lib'\n"
            "export * from './routes/users'\nimport fs from 'node:fs'\nimport path from 'path'\n"
            "import './missing'\nimport './style.css'\n"
        )
        + PAD,
        "src/lib/index.ts": "export const helper = 1\n" + PAD,
        "src/routes/users.ts": (
            "import { db } from '@/db'\n/* const ghost = require('ghost') */\n" + PAD
        ),
        "src/db.ts": "import fp from 'lodash/fp'\nimport { x } from '@scope/pkg/sub'\n" + PAD,
        "src/lazy.js": "module.exports = {}\n" + PAD,
        "test/server.test.js": "const s = require('../src/server')\nconst t = require('tap')\n",
    }
    arch = _analyze(files)
    assert {c.name for c in arch.components} == {
        "src/index",
        "server",
        "lib",
        "routes",
        "db",
        "lazy",
    }
    assert _edges(arch) == {
        ("src/index", "server"): 1,
        ("src/index", "lazy"): 1,
        ("server", "lib"): 1,
        ("server", "routes"): 1,
        ("routes", "db"): 1,
    }
    assert {d.name for d in arch.external} == {"express", "lodash", "@scope/pkg"}
    assert all(d.ecosystem == "npm" for d in arch.external)
    assert [d.name for d in arch.test_only_external] == ["tap"]
    assert arch.unresolved == 1  # './missing'; the stylesheet is an asset, not a module
    entry = next(e for e in arch.entry_points if e.path == "src/index.js")  # package.json main
    assert (entry.tests, entry.reached) == (0, False)
    assert sorted(arch.untested_components) == ["lazy", "src/index"]
    assert arch.languages == {"JavaScript": 3, "TypeScript": 3}


def test_src_layout_with_namespace_package_and_scripts() -> None:
    files = {
        "pyproject.toml": '[project.scripts]\ntool = "acme.tool.cli:main"\n',
        "src/acme/tool/__init__.py": "",
        "src/acme/tool/cli.py": (
            "from acme.tool import core\nfrom acme.tool.core import Engine\ndef main(): ...\n"
        )
        + PAD * 3,
        "src/acme/tool/core.py": "import numpy as np\nfrom acme.tool.plugins import base\n"
        + PAD * 3,
        "src/acme/tool/plugins/__init__.py": "",
        "src/acme/tool/plugins/base.py": "import json\n" + PAD * 3,
        "scripts/run.py": "import helpers\nfrom acme.tool import cli\n",
        "scripts/helpers.py": "import click\n",
        "tests/test_cli.py": "from acme.tool.cli import main\n",
    }
    arch = _analyze(files)
    paths = {c.name: c.path for c in arch.components}
    assert paths == {
        "cli": "src/acme/tool/cli.py",
        "core": "src/acme/tool/core.py",
        "plugins": "src/acme/tool/plugins/",
        "tool/__init__": "src/acme/tool/__init__.py",
        "scripts": "scripts/",
    }
    # `from acme.tool import core` and `from acme.tool.core import Engine`: one file pair.
    assert _edges(arch) == {("cli", "core"): 1, ("core", "plugins"): 1, ("scripts", "cli"): 1}
    assert {d.name for d in arch.external} == {
        "numpy",
        "click",
    }  # `helpers` is the script's sibling
    (entry,) = arch.entry_points
    assert (entry.path, entry.tests, entry.reached) == ("src/acme/tool/cli.py", 1, True)
    assert arch.untested_components == ["scripts"]


def test_example_repository() -> None:
    codebase = load_codebase(EXAMPLE)
    arch = architecture_of(codebase)
    assert arch is architecture_of(codebase)  # computed once per codebase
    assert {c.name for c in arch.components} == {
        "routes",
        "vulnapi/__init__",
        "auth",
        "config",
        "db",
        "models",
        "render",
        "utils",
        "wsgi",
    }
    assert _edges(arch) == {
        ("routes", "models"): 3,
        ("routes", "auth"): 3,
        ("routes", "utils"): 3,
        ("routes", "render"): 1,
        ("vulnapi/__init__", "routes"): 3,
        ("vulnapi/__init__", "db"): 1,
        ("vulnapi/__init__", "config"): 1,
        ("auth", "models"): 1,
        ("models", "db"): 1,
        ("wsgi", "vulnapi/__init__"): 1,
    }
    assert arch.component_cycles == [] and arch.module_cycles == []
    assert arch.fan_in[0] == ("vulnapi/models.py", 4)
    assert {(d.name, d.files) for d in arch.external} == {
        ("flask", 7),
        ("jwt", 1),
        ("click", 1),
        ("markupsafe", 1),
    }
    assert [e.path for e in arch.untested_entry_points] == ["wsgi.py"]


# --------------------------------------------------------------------------- building blocks


def test_components_open_the_folder_that_holds_most_of_the_code() -> None:
    sizes = {
        "setup.py": 10,
        "src/pkg/__init__.py": 10,
        "src/pkg/a/x.py": 500,
        "src/pkg/b.py": 400,
        "docs_tool/t.py": 50,
    }
    assert assign_components(sizes) == {
        "setup.py": "setup.py",
        "src/pkg/__init__.py": "src/pkg/__init__.py",
        "src/pkg/a/x.py": "src/pkg/a/",
        "src/pkg/b.py": "src/pkg/b.py",
        "docs_tool/t.py": "docs_tool/",
    }
    balanced = {"app/a.py": 100, "lib/b.py": 100, "web/c.py": 100}
    assert set(assign_components(balanced).values()) == {"app/", "lib/", "web/"}


def test_strongly_connected_finds_rings_not_chains() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(strongly_connected(graph)) == [["a", "b", "c"], ["d", "e"]]
    chain = {str(i): {str(i + 1)} for i in range(5000)}  # deep: no recursion limit
    assert strongly_connected(chain) == []


# --------------------------------------------------------------------------- rendering


def test_mermaid_caps_nodes_and_edges_and_says_what_was_cut() -> None:
    files = {f"pkg/m{i}.py": f"from . import m{(i + 1) % 30}\n" + PAD for i in range(30)}
    files["pkg/lonely.py"] = PAD
    arch = _analyze(files)
    body, note = mermaid(arch)
    assert body[0] == "flowchart LR"
    assert sum(1 for line in body if '["' in line) == 20
    assert "the 20 most connected of 30 linked components" in note
    assert "1 component with no import to or from another left out" in note
    assert "classDef cycle" in "\n".join(body)  # the ring is marked
    section = "\n".join(architecture_markdown(arch))
    assert "```mermaid" in section and "**Cycles between components**" in section
    assert "… and 1 smaller components" in section


def test_summary_for_the_root_is_short_and_named_in_the_first_message() -> None:
    files = {f"pkg/sub{i}/mod.py": f"from pkg.sub{(i + 1) % 60} import mod\n" for i in range(60)}
    files["pkg/__init__.py"] = ""
    files["tests/test_x.py"] = "from pkg.sub0 import mod\n"
    files["pkg/sub0/main.py"] = "if __name__ == '__main__':\n    pass\n"
    codebase = codebase_from_files(files)
    summary = architecture_summary(architecture_of(codebase))
    assert len(summary) <= 1500
    assert "metadata['architecture']" in summary and "component cycles:" in summary
    assert "entry points no test imports: pkg/sub0/main.py" in summary
    overview = metadata_summary(codebase)
    assert summary in overview
    assert "tests/test_x.py" not in overview.split("entry points:")[1].split("\n")[0]


def test_report_and_metrics_carry_the_architecture(tmp_path: Path) -> None:
    codebase = load_codebase(EXAMPLE)
    result = RunResult(
        answer="done",
        incomplete=False,
        stop_reason="answer_ready",
        stop_detail="",
        findings=[],
        turns=[],
        sub_calls=0,
        files_covered=[],
        coverable_files=0,
        usage=[],
        total_cost_usd=0.0,
        wall_seconds=0.0,
        root_model="scripted/expert",
        sub_model="static",
        sandbox_mode="process",
    )
    write_outputs(tmp_path, result, codebase, offline=True)
    report = (tmp_path / "report.md").read_text()
    assert "## Architecture from imports" in report
    assert "c0 -->|3|" in report or "-->|3|" in report
    assert "- **routes** (`vulnapi/routes/`, 4 files" in report
    metrics = json.loads((tmp_path / "metrics.json").read_text())["architecture"]
    assert {"source": "routes", "target": "models", "imports": 3} in metrics["edges"]
    assert metrics["untested_entry_points"] == ["wsgi.py"]
    assert metrics["truncated"] == {}


def test_no_code_no_graph_and_odd_files_do_not_crash() -> None:
    arch = analyze_architecture({"README.md": "# hi\n", "a.go": "package main\n"})
    assert arch.modules == 0 and arch.components == []
    assert "no import graph" in "\n".join(architecture_markdown(arch))
    odd = {
        "a.py": "from . import (\n",  # unterminated
        "b.py": "\x00\x01 import \xff",
        "c.js": "import x from '",
        "d.ts": "require(`./tpl${x}`)",
        "pkg/__init__.py": "from ........ import nothing\n",
        "e.py": "import " + "a." * 2000 + "b\n",
    }
    arch = analyze_architecture(odd)
    assert arch.modules == 6


@pytest.mark.e2e  # 5,050 modules: slow; the speed target is benchmarks/bench_architecture.py's
def test_a_large_synthetic_repository_keeps_every_module_and_component() -> None:
    files: dict[str, str] = {}
    for p in range(50):
        files[f"src/app/pkg{p}/__init__.py"] = ""
        for m in range(100):
            body = "".join(
                f"from app.pkg{(p + k) % 50}.mod{(m + k) % 100} import thing{k}\n" for k in range(8)
            )
            files[f"src/app/pkg{p}/mod{m}.py"] = (
                "import os\nimport requests\n" + body + "def f():\n    return 1\n" * 40
            )
    arch = analyze_architecture(files)
    assert arch.modules == 5050 and len(arch.components) == 50


@pytest.mark.e2e
async def test_the_root_starts_from_the_architecture_and_finds_it_in_metadata() -> None:
    from deeprepo.base.chat import ChatRequest, Completion, Usage
    from deeprepo.builtin import make_static_worker
    from deeprepo.orchestrator.episode import Episode, EpisodeConfig
    from deeprepo.providers.budget import Budget
    from deeprepo.providers.dispatch import SubDispatcher
    from deeprepo.providers.ledger import Ledger
    from deeprepo.providers.metered import MeteredModel
    from deeprepo.providers.prices import PriceTable
    from deeprepo.sandbox.config import SandboxConfig

    seen: list[ChatRequest] = []

    class Root:
        name = "test/root"

        async def complete(self, request: ChatRequest) -> Completion:
            seen.append(request)
            cell = (
                "e = metadata['architecture']['edges'][0]\n"
                "print(e['source'], e['target'], e['imports'])\n"
                "set_answer('done')"
            )
            return Completion(f"```python\n{cell}\n```", Usage(10, 10), model=self.name)

        async def aclose(self) -> None:
            return None

    codebase = load_codebase(EXAMPLE)
    ledger, prices = Ledger(), PriceTable.load()
    budget = Budget(ledger=ledger)
    episode = Episode(
        codebase,
        root=MeteredModel(Root(), "root", ledger, prices, budget=budget, concurrency=1),
        dispatcher=SubDispatcher(
            MeteredModel(make_static_worker(), "sub", ledger, prices, budget=budget)
        ),
        ledger=ledger,
        config=EpisodeConfig(max_turns=2),
        sandbox=SandboxConfig(cell_timeout_s=20),
    )
    result = await episode.run()
    first = seen[0].messages[0].content
    assert "architecture (from imports" in first and "routes→models (3)" in first
    assert result.turns[0].output.strip().splitlines()[0] == "routes auth 3"


def test_external_names_are_package_names() -> None:
    files = {
        "src/a.ts": (
            "import x from 'left-pad'\nimport './data.json'\nconst m = import('' + name)\n"
            "import cfg from 'settings.json'\nimport h from 'highlight.js'\n" + PAD
        ),
        "src/b.py": "import StringIO\nimport __main__\nimport urllib2\nimport attr\n" + PAD,
        "tests/fixtures_app/helper.py": "",
        "tests/test_b.py": "import helper\nimport hypothesis\n",
    }
    arch = _analyze(files)
    assert {d.name for d in arch.external} == {"left-pad", "highlight.js", "attr"}
    assert [d.name for d in arch.test_only_external] == ["hypothesis"]  # not the fixture


def test_base_url_at_the_root_and_files_that_are_no_modules() -> None:
    files = {
        "tsconfig.json": '{"compilerOptions": {"baseUrl": "."}}',
        "types/index.d.ts": "export type T = string\n",
        "lib/util.ts": "export const u = 1\n" + PAD,
        "app/page.tsx": (
            "import { T } from 'types'\nimport { u } from 'lib/util'\n"
            "import data from './data.json'\nimport './page.css'\nimport React from 'react'\n"
        )
        + PAD,
        "app/data.json": "{}",
        "app/page.css": "a {}",
    }
    arch = _analyze(files)
    assert _edges(arch) == {("app", "lib"): 1}
    assert [d.name for d in arch.external] == ["react"]  # `types` is the repository's own
    assert arch.unresolved == 0


def test_a_paren_in_an_import_lines_comment_opens_nothing() -> None:
    """``import os  # a note (with a paren`` is one line: the comment's "(" is not a
    parenthesised import list (it raised IndexError and stopped the whole run)."""
    text = "import os  # a note (with a paren\nfrom a import (b,\n  c)  # (x\nimport re\n"
    assert set(python_imports(text)) == {
        PyImport("os", (), 0),
        PyImport("a", ("b", "c"), 0),
        PyImport("re", (), 0),
    }
