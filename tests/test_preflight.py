"""The local model's preflight: a child that dies by a signal becomes one clear error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisorchain import cli
from advisorchain.providers.llamacpp import LlamaCppChatModel
from advisorchain.providers.local import preflight as preflight_module
from advisorchain.providers.local.preflight import PreflightError, ensure_preflight, preflight

SIGILL_CHILD = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"]
OK_CHILD = [sys.executable, "-c", "print(96)"]


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def test_a_child_killed_by_sigill_names_the_cause_and_the_rebuild(model_file: Path) -> None:
    with pytest.raises(PreflightError) as caught:
        preflight(model_file, command=SIGILL_CHILD)
    message = str(caught.value)
    assert "SIGILL" in message
    assert "CPU instructions" in message
    assert "AVX2" in message
    assert "make local-llama" in message
    assert "\n" not in message


def test_another_signal_is_named_too(model_file: Path) -> None:
    child = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    with pytest.raises(PreflightError, match="SIGSEGV"):
        preflight(model_file, command=child)


def test_a_failing_child_reports_its_last_line(model_file: Path) -> None:
    child = [sys.executable, "-c", "import sys; sys.exit('cannot load model')"]
    with pytest.raises(PreflightError, match="exit 1.*cannot load model"):
        preflight(model_file, command=child)


def test_the_real_child_command_evaluates_a_long_prompt(model_file: Path) -> None:
    command = preflight_module.child_command(model_file, 2)
    assert command[0] == sys.executable
    assert command[-3:] == [str(model_file), "2", str(preflight_module.PROMPT_TOKENS)]
    assert preflight_module.PROMPT_TOKENS >= 64
    assert "llm.eval(tokens)" in command[2]


def _use_child(monkeypatch: pytest.MonkeyPatch, child: list[str]) -> list[int]:
    runs: list[int] = []

    def command(model_path: Path, n_threads: int | None) -> list[str]:
        runs.append(1)
        return child

    monkeypatch.setattr(preflight_module, "child_command", command)
    monkeypatch.delenv("ADVISORCHAIN_SKIP_PREFLIGHT", raising=False)
    return runs


def test_a_passed_preflight_is_stamped_and_runs_once(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _use_child(monkeypatch, OK_CHILD)
    ensure_preflight(model_file, 1, cache_dir=tmp_path)
    ensure_preflight(model_file, 1, cache_dir=tmp_path)
    assert len(runs) == 1
    ensure_preflight(model_file, 2, cache_dir=tmp_path)  # other threads: checked again
    assert len(runs) == 2


def test_a_failed_preflight_is_not_stamped(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _use_child(monkeypatch, SIGILL_CHILD)
    for _ in range(2):
        with pytest.raises(PreflightError):
            ensure_preflight(model_file, None, cache_dir=tmp_path)
    assert len(runs) == 2


def test_prepare_model_prints_one_line_and_fails(
    model_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _use_child(monkeypatch, SIGILL_CHILD)
    monkeypatch.setenv("ADVISORCHAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(
        "advisorchain.providers.local.weights.ensure_local_model", lambda: model_file
    )
    status = cli.run(["prepare-model"])
    out, err = capsys.readouterr()
    assert status != 0
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert "SIGILL" in lines[0] and "make local-llama" in lines[0]


@pytest.mark.anyio
async def test_the_first_load_runs_the_preflight_before_loading_in_process(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_child(monkeypatch, SIGILL_CHILD)
    monkeypatch.setenv("ADVISORCHAIN_CACHE_DIR", str(tmp_path / "cache"))
    model = LlamaCppChatModel(model_file)
    with pytest.raises(PreflightError, match="SIGILL"):
        await model.load()
