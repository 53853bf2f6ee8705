"""Re-create the real-code substrate (``src/deeprepo/rl/tasks/realcode/``) from the registries.

The generator plants bugs into real open-source files so that the clean code around a bug is
code nobody here wrote (decision "real-code substrate"). This script is how that data came to
be, so anyone can audit or rebuild it: it downloads each pinned package with the ordinary
client (``pip download --no-deps`` for PyPI wheels, ``npm pack`` for npm tarballs), checks the
archive, picks source files by a fixed rule, and writes

* ``python.json.xz`` / ``js.json.xz``: ``{path: text}`` of the chosen files, xz-compressed;
* ``manifest.json``: per package its version, licence, source (``pypi:NAME==VER`` /
  ``npm:NAME@VER``), archive name and sha256; per file its package, sha256, line count, where
  a top-level block may go (``anchors``), where imports go (``import_after``) and, for JS,
  whether the file is an ES module;
* ``licenses/NAME-VERSION.txt``: each package's licence text, as shipped in its archive.

Anchors are the first lines of top-level statements after the file's import header (with the
comment block right above a statement kept with it), found by ``ast`` for Python and by the
``acorn`` parser (fetched with ``npm pack`` too) for JavaScript; every anchor is proved by
inserting a probe function there and parsing the result (``ast.parse`` / ``node --check``).

    python3 scripts/fetch_realcode.py [--out src/deeprepo/rl/tasks/realcode] [--work DIR]

Needs ``pip``, ``npm`` and ``node`` on PATH and a registry to reach. Output is byte-stable for
the same archives.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import lzma
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

# (name, version, SPDX licence). Permissive, mature, pure Python; varied style and purpose.
PYPI = (
    ("click", "8.1.7", "BSD-3-Clause"),
    ("itsdangerous", "2.2.0", "BSD-3-Clause"),
    ("werkzeug", "3.0.3", "BSD-3-Clause"),
    ("flask", "3.0.3", "BSD-3-Clause"),
    ("jinja2", "3.1.4", "BSD-3-Clause"),
    ("requests", "2.32.3", "Apache-2.0"),
    ("urllib3", "2.2.2", "MIT"),
    ("attrs", "23.2.0", "MIT"),
    ("packaging", "24.1", "Apache-2.0 OR BSD-2-Clause"),
    ("tomli", "2.0.1", "MIT"),
    ("cachetools", "5.3.3", "MIT"),
    ("h11", "0.14.0", "MIT"),
    ("sqlparse", "0.5.0", "BSD-3-Clause"),
    ("marshmallow", "3.21.3", "MIT"),
    ("blinker", "1.8.2", "MIT"),
    ("humanize", "4.9.0", "MIT"),
    ("rich", "13.7.1", "MIT"),
    ("mistune", "3.0.2", "BSD-3-Clause"),
    ("python-dateutil", "2.9.0.post0", "Apache-2.0 OR BSD-3-Clause"),
)
NPM = (
    ("express", "4.19.2", "MIT"),
    ("body-parser", "1.20.2", "MIT"),
    ("qs", "6.12.1", "BSD-3-Clause"),
    ("cookie", "0.6.0", "MIT"),
    ("debug", "4.3.5", "MIT"),
    ("commander", "12.1.0", "MIT"),
    ("minimist", "1.2.8", "MIT"),
    ("semver", "7.6.2", "ISC"),
    ("dotenv", "16.4.5", "BSD-2-Clause"),
    ("ws", "8.17.1", "MIT"),
    ("axios", "1.7.2", "MIT"),
    ("koa", "2.15.3", "MIT"),
    ("morgan", "1.10.0", "MIT"),
    ("http-errors", "2.0.0", "MIT"),
    ("mime-types", "2.1.35", "MIT"),
    ("ejs", "3.1.10", "Apache-2.0"),
    ("js-yaml", "4.1.0", "MIT"),
    ("joi", "17.13.1", "BSD-3-Clause"),
    ("winston", "3.13.0", "MIT"),
    ("knex", "3.1.0", "MIT"),
    ("mocha", "10.4.0", "MIT"),
    ("passport", "0.7.0", "MIT"),
    ("express-session", "1.18.0", "MIT"),
    ("jsonwebtoken", "9.0.2", "MIT"),
)
ACORN = ("acorn", "8.12.0")
MIN_LINES, MAX_LINES = 40, 900
MIN_ANCHORS = 3
PER_PACKAGE = 16
_LICENCE_RE = re.compile(r"(^|/)(LICEN[CS]E|COPYING)(\.\w+)?$", re.IGNORECASE)
_SKIP_RE = re.compile(r"(^|/)(tests?|__tests__|testing|examples?|docs?|benchmarks?|dist|umd)/")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _run(cmd: list[str], cwd: Path) -> str:
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout


def _pick(files: dict[str, str]) -> list[str]:
    """Up to PER_PACKAGE paths, spread over the package's sorted file list (no hand choice)."""
    paths = sorted(files)
    if len(paths) <= PER_PACKAGE:
        return paths
    step = len(paths) / PER_PACKAGE
    return [paths[int(i * step)] for i in range(PER_PACKAGE)]


def _comment_start(lines: list[str], line: int, lang: str) -> int:
    """The first line of the comment block above ``line`` (1-based), or ``line``. A JSDoc
    block one blank line above still belongs to the statement (``/** Module exports. */``,
    blank, ``module.exports = …``), so a block planted there does not split them."""
    prefixes = ("#",) if lang == "python" else ("//", "/*", "*")

    def is_comment(k: int) -> bool:  # 1-based line k
        return lines[k - 1].lstrip().startswith(prefixes) and lines[k - 1][:1] in "#/ *"

    i = line - 1
    if lang == "js" and i >= 2 and not lines[i - 1].strip() and lines[i - 2].strip() == "*/":
        i -= 1
    while i >= 1 and is_comment(i):
        i -= 1
    return i + 1


# --- Python ---------------------------------------------------------------------------------------


def _py_layout(text: str) -> tuple[list[int], int] | None:
    tree = ast.parse(text)
    body = tree.body
    header = 0
    for node in body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if isinstance(node, ast.Import | ast.ImportFrom) or (docstring and header == 0):
            header += 1
            continue
        break
    import_after = body[header - 1].end_lineno or 0 if header else 0
    lines = text.split("\n")
    anchors = []
    for node in body[header:]:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        anchors.append(_comment_start(lines, first, "python"))
    anchors.append(len(lines) + (0 if lines[-1] == "" else 1))
    anchors = sorted({a for a in anchors if a > import_after})
    probe = "def __probe__():\n    return None\n"
    for a in anchors:
        ast.parse("\n".join(lines[: a - 1]) + "\n\n\n" + probe + "\n\n" + "\n".join(lines[a - 1 :]))
    return anchors, import_after


def _pypi(work: Path) -> tuple[list[dict[str, object]], dict[str, str], list[dict[str, object]]]:
    pkgs, texts, meta = [], {}, []
    for name, version, licence in PYPI:
        dest = work / "pypi"
        dest.mkdir(exist_ok=True)
        _run(
            [
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                str(dest),
                f"{name}=={version}",
            ],
            work,
        )
        wheel = next(
            p
            for p in sorted(dest.glob("*.whl"))
            if p.name.lower().startswith(name.replace("-", "_").lower() + "-" + version)
        )
        data = wheel.read_bytes()
        zf = zipfile.ZipFile(io.BytesIO(data))
        lic = [n for n in zf.namelist() if ".dist-info/" in n and _LICENCE_RE.search(n)]
        cands: dict[str, str] = {}
        for n in zf.namelist():
            if not n.endswith(".py") or ".dist-info/" in n or _SKIP_RE.search(n):
                continue
            text = zf.read(n).decode("utf-8")
            if MIN_LINES <= text.count("\n") <= MAX_LINES:
                cands[n] = text
        chosen = []
        for path in _pick(cands):
            layout = _py_layout(cands[path])
            if layout is None or len(layout[0]) < MIN_ANCHORS:
                continue
            texts[path] = cands[path]
            meta.append(
                {
                    "path": path,
                    "package": name,
                    "lang": "python",
                    "anchors": layout[0],
                    "import_after": layout[1],
                }
            )
            chosen.append(path)
        pkgs.append(
            _package(
                name,
                version,
                licence,
                f"pypi:{name}=={version}",
                wheel.name,
                data,
                _join(lic, lambda n, zf=zf: zf.read(n).decode("utf-8")),
                len(chosen),
            )
        )
    return pkgs, texts, meta


# --- JavaScript -----------------------------------------------------------------------------------

_ACORN_SCRIPT = r"""
const acorn = require(process.argv[1]);
const files = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = {};
for (const [path, text] of Object.entries(files)) {
  const esm = /^\s*(import\s[^(]|export\s)/m.test(text);
  let tree;
  try {
    tree = acorn.parse(text, {ecmaVersion: "latest", sourceType: esm ? "module" : "script",
                              locations: true, allowHashBang: true, allowReturnOutsideFunction: true});
  } catch (e) { out[path] = null; continue; }
  const body = tree.body;
  let header = 0;
  const isRequire = (s) => s.type === "VariableDeclaration" && s.declarations.every(
    (d) => d.init && /^(require\(|require\(.*\)\.)/.test(text.slice(d.init.start, d.init.end)));
  for (const s of body) {
    if (s.type === "ImportDeclaration" || s.directive || isRequire(s)) { header++; continue; }
    break;
  }
  out[path] = {esm, importAfter: header ? body[header - 1].loc.end.line : 0,
               starts: body.slice(header).map((s) => s.loc.start.line)};
}
process.stdout.write(JSON.stringify(out));
"""


def _node_check(text: str, esm: bool, work: Path) -> bool:
    f = work / ("probe.mjs" if esm else "probe.cjs")
    f.write_text(text, encoding="utf-8")
    return subprocess.run(["node", "--check", str(f)], capture_output=True).returncode == 0


def _npm_fetch(name: str, version: str, work: Path) -> tuple[str, bytes, tarfile.TarFile]:
    dest = work / "npm"
    dest.mkdir(exist_ok=True)
    out = (
        _run(
            ["npm", "pack", "--silent", f"{name}@{version}", "--pack-destination", str(dest)], work
        )
        .strip()
        .splitlines()[-1]
    )
    data = (dest / out).read_bytes()
    return out, data, tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")


def _npm(work: Path) -> tuple[list[dict[str, object]], dict[str, str], list[dict[str, object]]]:
    _, _, acorn_tar = _npm_fetch(*ACORN, work)
    acorn_dir = work / "acorn"
    acorn_tar.extractall(acorn_dir, filter="data")
    acorn_main = str(acorn_dir / "package" / "dist" / "acorn.js")
    pkgs, texts, meta = [], {}, []
    for name, version, licence in NPM:
        archive, data, tar = _npm_fetch(name, version, work)
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        lic = [n for n in sorted(members) if n.count("/") == 1 and _LICENCE_RE.search(n)]
        cands: dict[str, str] = {}
        for n in sorted(members):
            rel = n.removeprefix("package/")
            if not rel.endswith((".js", ".cjs", ".mjs")) or _SKIP_RE.search(rel):
                continue
            text = tar.extractfile(members[n]).read().decode("utf-8")  # type: ignore[union-attr]
            lines = text.split("\n")
            if not MIN_LINES <= text.count("\n") <= MAX_LINES:
                continue
            if max(len(ln) for ln in lines) > 300:  # minified or generated
                continue
            cands[f"{name}/{rel}"] = text
        chosen_texts = {p: cands[p] for p in _pick(cands)}
        parsed = json.loads(
            subprocess.run(
                ["node", "-e", _ACORN_SCRIPT, acorn_main],
                input=json.dumps(chosen_texts),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        chosen = 0
        for path, text in chosen_texts.items():
            info = parsed.get(path)
            if not info:
                continue
            lines = text.split("\n")
            starts = [_comment_start(lines, s, "js") for s in info["starts"]]
            end = len(lines) + (0 if lines[-1] == "" else 1)
            anchors = sorted({a for a in [*starts, end] if a > info["importAfter"]})
            probe = "function __probe__() {\n  return null;\n}\n"
            anchors = [
                a
                for a in anchors
                if _node_check(
                    "\n".join(lines[: a - 1]) + "\n\n" + probe + "\n" + "\n".join(lines[a - 1 :]),
                    info["esm"],
                    work,
                )
            ]
            if len(anchors) < MIN_ANCHORS:
                continue
            texts[path] = text
            meta.append(
                {
                    "path": path,
                    "package": name,
                    "lang": "js",
                    "esm": info["esm"],
                    "anchors": anchors,
                    "import_after": info["importAfter"],
                }
            )
            chosen += 1
        licence_text = _join(
            lic,
            lambda n, tar=tar, members=members: tar.extractfile(members[n]).read().decode("utf-8"),  # type: ignore[union-attr]
        )
        pkgs.append(
            _package(
                name, version, licence, f"npm:{name}@{version}", archive, data, licence_text, chosen
            )
        )
    return pkgs, texts, meta


def _join(names: list[str], read: Callable[[str], str]) -> str:
    """Every licence file of an archive (``LICENSE``, ``LICENSE.APACHE`` …), each under its name."""
    if len(names) == 1:
        return read(names[0])
    return "\n".join(f"--- {n.rsplit('/', 1)[-1]} ---\n\n{read(n)}" for n in sorted(names))


def _package(
    name: str,
    version: str,
    licence: str,
    source: str,
    archive: str,
    data: bytes,
    licence_text: str,
    files: int,
) -> dict[str, object]:
    if not licence_text.strip():
        raise SystemExit(f"{source}: no licence file in {archive}; pick another package")
    return {
        "name": name,
        "version": version,
        "licence": licence,
        "source": source,
        "archive": archive,
        "archive_sha256": _sha(data),
        "files": files,
        "licence_file": f"licenses/{name}-{version}.txt",
        "licence_text": licence_text,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("src/deeprepo/rl/tasks/realcode"))
    ap.add_argument("--work", type=Path, default=None, help="download folder (default: a temp dir)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        py_pkgs, py_texts, py_meta = _pypi(work)
        js_pkgs, js_texts, js_meta = _npm(work)
    out: Path = args.out
    (out / "licenses").mkdir(parents=True, exist_ok=True)
    packages = []
    for p in [*py_pkgs, *js_pkgs]:
        (out / str(p["licence_file"])).write_text(str(p.pop("licence_text")), encoding="utf-8")
        packages.append(p)
    files = []
    for m in [*py_meta, *js_meta]:
        text = (py_texts if m["lang"] == "python" else js_texts)[str(m["path"])]
        files.append({**m, "sha256": _sha(text.encode("utf-8")), "lines": text.count("\n") + 1})
    manifest = {"packages": packages, "files": sorted(files, key=lambda f: str(f["path"]))}
    (out / "manifest.json").write_text(
        json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    for lang, texts in (("python", py_texts), ("js", js_texts)):
        blob = json.dumps(texts, sort_keys=True, ensure_ascii=False).encode("utf-8")
        (out / f"{lang}.json.xz").write_bytes(lzma.compress(blob, preset=9 | lzma.PRESET_EXTREME))
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{len(files)} files from {len(packages)} packages, {total / 1e6:.2f} MB in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
