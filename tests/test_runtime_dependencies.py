"""The package imports and runs a turn with its runtime dependencies alone.

A subprocess blocks every installed module whose distribution is not advisorchain's
runtime requirement or one of theirs (the dev and optional extras: trio, sniffio, numpy,
mcp, ...), then imports the package's public modules and runs a scripted turn, sync and
async. A module-level import of anything else fails here instead of in a user's bare
install (`make demo` once failed that way on `sniffio`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions

from packaging.requirements import Requirement


def _runtime_closure() -> set[str]:
    """Normalised names of the runtime requirements and everything they require."""
    seen: set[str] = set()
    todo = [r for r in distribution("advisorchain").requires or () if "extra ==" not in r]
    while todo:
        requirement = Requirement(todo.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = requirement.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            todo.extend(distribution(name).requires or ())
        except PackageNotFoundError:
            continue
    return seen


def test_the_package_runs_on_its_runtime_dependencies_alone() -> None:
    allowed = _runtime_closure()
    blocked = sorted(
        module
        for module, names in packages_distributions().items()
        if module.isidentifier()
        and module != "advisorchain"
        and not any(n.lower().replace("_", "-") in allowed for n in names)
    )
    assert "trio" in blocked and "pydantic" not in blocked  # the test can fail
    script = textwrap.dedent(
        f"""
        import importlib.abc, sys

        BLOCKED = set({blocked!r})

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"{{name}} is not a runtime dependency")
                return None

        sys.meta_path.insert(0, Block())
        import advisorchain, advisorchain.advisors, advisorchain.providers
        import advisorchain.toolsets, advisorchain.ui, advisorchain.transcript
        import advisorchain.evals, advisorchain.cli
        from advisorchain import Chain, ToolCallingAdvisor
        from advisorchain.providers import ScriptedChatModel

        chain = Chain([ToolCallingAdvisor()], model=ScriptedChatModel(["hi", "again"]))
        print(chain.call_sync("hello").text)
        print([type(e).__name__ for e in chain.stream_sync("hello")][-1])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hi", "ResponseCompleted"]
