"""The integer graph of the MiniLM model: its int8 weights multiplied as integers.

The packaged model stores each weight matrix as int8 with one scale per column, and its
graph turns them back into float32 before every `MatMul`. `integer_model()` rewrites each
such `MatMul` into onnxruntime's `DynamicQuantizeMatMul`, which quantizes the activations
to uint8 per call and multiplies with the stored int8 weights unchanged (u8s8 kernels:
0.5-0.6x the CPU of a query on an AVX2 machine without VNNI, measured). The conversion
needs the `onnx` package; it runs once and its result is kept on disk.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from ._cache import default_cache_path

CONVERSION = 2
"""The version of the conversion: part of the converted file's name."""

_HASHES: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()


def integer_model(source: str | Path, folder: str | Path | None = None) -> Path:
    """The path of `source`'s integer graph, converted on the first call and kept in `folder`.

    `folder` defaults to `models/` beside `default_cache_path()`. The file's name holds the
    SHA-256 of the source file, onnxruntime's version (the rewritten graph uses one of
    its own operators) and `CONVERSION`, so a changed model, runtime or conversion gets a
    new file and a kept one is reused as is. The file is written under a temporary name
    and renamed, so processes converting at once never read a partial file.

    Raises `ImportError` without the `onnx` package (or onnxruntime), `ValueError` when
    `source` holds no `MatMul` of int8 weights with per-column scales (nothing to
    convert), and `OSError` when `folder` cannot be written.
    """
    import onnxruntime

    source = Path(source)
    if folder is None:
        folder = default_cache_path().parent / "models"
    folder = Path(folder)
    digest = _file_hash(source)
    target = folder / f"{source.stem}-{digest[:24]}-ort{onnxruntime.__version__}-c{CONVERSION}.onnx"
    if target.is_file():
        return target
    onnx: Any = importlib.import_module("onnx")  # only the conversion needs it
    with _LOCK:
        if target.is_file():
            return target
        model = onnx.load(str(source))
        if convert(model) == 0:
            raise ValueError(f"{source} has no MatMul of int8 weights to convert")
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".partial")
        os.close(handle)
        try:
            onnx.save(model, temporary)
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    return target


def convert(model: Any) -> int:
    """Rewrite, in place, each `MatMul(x, Cast(q) * scale)` with `q` an int8 initializer of
    shape (k, n) and `scale` n floats into `DynamicQuantizeMatMul(x, q, scale, 0)`, with
    the bias of an `Add` that alone follows it; fuse `x * 0.5 * (1 + erf(x / sqrt 2))`
    into one `Gelu`; drop what no longer feeds the outputs. Returns how many `MatMul`s
    were rewritten (0: the model is left as it was)."""
    onnx: Any = importlib.import_module("onnx")
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    producer = {output: node for node in graph.node for output in node.output}
    consumers = _consumers(graph)
    outputs = {o.name for o in graph.output}
    nodes: list[Any] = []
    added: list[Any] = []
    folded: set[int] = set()
    rewritten = 0
    for node in graph.node:
        if id(node) in folded:
            continue
        weights = _int8_weights(node, producer, initializers, numpy_helper)
        if weights is None:
            nodes.append(node)
            continue
        replacement, bias_add, new_initializers = _integer_matmul(
            node, weights, producer, consumers, initializers, outputs, onnx
        )
        nodes.append(replacement)
        added += new_initializers
        if bias_add is not None:
            folded.add(id(bias_add))
        rewritten += 1
    if not rewritten:
        return 0
    graph.initializer.extend(added)
    _replace(graph.node, nodes)
    _fuse_gelu(graph, initializers, outputs, helper, numpy_helper)
    _replace(graph.node, _live(list(graph.node), outputs))
    used = {name for node in graph.node for name in node.input}
    _replace(graph.initializer, [i for i in graph.initializer if i.name in used])
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return rewritten


def _integer_matmul(
    node: Any,
    weights: tuple[Any, Any],
    producer: dict[str, Any],
    consumers: dict[str, list[Any]],
    initializers: dict[str, Any],
    outputs: set[str],
    onnx: Any,
) -> tuple[Any, Any | None, list[Any]]:
    """`DynamicQuantizeMatMul` in place of the `MatMul` `node` of int8 `weights` `(q, scale)`:
    the new node, the `Add` whose bias it folded in (or `None`), and the initializers
    it adds (the scale and zero point)."""
    import numpy as np

    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    quantized, scale = weights
    columns = quantized.shape[1]
    scale_name, zero_name = f"{node.name}_b_scale", f"{node.name}_b_zero"
    added = [
        numpy_helper.from_array(scale.reshape(columns).astype(np.float32), scale_name),
        numpy_helper.from_array(np.zeros(columns, dtype=np.int8), zero_name),
    ]
    inputs = [node.input[0], producer[producer[node.input[1]].input[0]].input[0]]
    inputs += [scale_name, zero_name]
    output = node.output[0]
    bias = _bias(output, consumers, initializers, outputs, columns, numpy_helper)
    add = None
    if bias is not None:
        add, bias_name = bias
        inputs.append(bias_name)
        output = add.output[0]
    replacement = helper.make_node(
        "DynamicQuantizeMatMul",
        inputs,
        [output],
        name=f"{node.name}_integer",
        domain="com.microsoft",
    )
    return replacement, add, added


def _int8_weights(
    node: Any, producer: dict[str, Any], initializers: dict[str, Any], numpy_helper: Any
) -> tuple[Any, Any] | None:
    """`(q, scale)` when `node` is `MatMul(x, Cast(q) * scale)` as `convert` needs."""
    import numpy as np

    if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx"):
        return None
    mul = producer.get(node.input[1])
    if mul is None or mul.op_type != "Mul" or len(mul.input) != 2:
        return None
    cast = producer.get(mul.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
        return None
    if mul.input[1] not in initializers:
        return None
    quantized = numpy_helper.to_array(initializers[cast.input[0]])
    scale = numpy_helper.to_array(initializers[mul.input[1]])
    if quantized.dtype != np.int8 or quantized.ndim != 2:
        return None
    if scale.size != quantized.shape[1] or scale.shape not in (
        (quantized.shape[1],),
        (1, quantized.shape[1]),
    ):
        return None
    return quantized, scale


def _consumers(graph: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _constant(name: str, initializers: dict[str, Any], numpy_helper: Any) -> float | None:
    """The value of a one-element float initializer, else None."""
    if name not in initializers:
        return None
    value = numpy_helper.to_array(initializers[name])
    if value.size != 1 or value.dtype.kind != "f":
        return None
    return float(value.reshape(()))


def _bias(
    output: str,
    consumers: dict[str, list[Any]],
    initializers: dict[str, Any],
    outputs: set[str],
    columns: int,
    numpy_helper: Any,
) -> tuple[Any, str] | None:
    """`(add, bias)` when `output` feeds only `Add(output, bias)`, `bias` n floats."""
    users = consumers.get(output, [])
    if output in outputs or len(users) != 1 or users[0].op_type != "Add":
        return None
    add = users[0]
    others = [name for name in add.input if name != output]
    if len(add.input) != 2 or len(others) != 1 or others[0] not in initializers:
        return None
    bias = numpy_helper.to_array(initializers[others[0]])
    if bias.dtype.kind != "f" or bias.shape != (columns,):
        return None
    return add, others[0]


def _fuse_gelu(
    graph: Any, initializers: dict[str, Any], outputs: set[str], helper: Any, numpy_helper: Any
) -> None:
    """Replace each `x * 0.5 * (1 + erf(x / sqrt 2))` (the two products in either order)
    by `Gelu(x)`, whose intermediate values feed nothing else."""
    consumers = _consumers(graph)
    producer = {output: node for node in graph.node for output in node.output}

    def only_user(node: Any, op_type: str) -> Any:
        users = consumers.get(node.output[0], [])
        if node.output[0] in outputs or len(users) != 1 or users[0].op_type != op_type:
            return None
        return users[0]

    def other(node: Any, name: str) -> str | None:
        rest = [i for i in node.input if i != name]
        return rest[0] if len(node.input) == 2 and len(rest) == 1 else None

    def near(name: str | None, value: float) -> bool:
        found = None if name is None else _constant(name, initializers, numpy_helper)
        return found is not None and abs(found - value) < 1e-4

    fused: dict[int, Any] = {}
    for erf in [n for n in graph.node if n.op_type == "Erf"]:
        div = producer.get(erf.input[0])
        if div is None or div.op_type != "Div" or not near(div.input[1], math.sqrt(2.0)):
            continue
        x = div.input[0]
        add = only_user(erf, "Add")
        first = (
            only_user(add, "Mul")
            if add is not None and near(other(add, erf.output[0]), 1.0)
            else None
        )
        if first is None or div.output[0] in outputs or len(consumers[div.output[0]]) != 1:
            continue
        second = only_user(first, "Mul")
        if second is None:
            continue
        pair = {other(first, add.output[0]), other(second, first.output[0])}
        if x not in pair or not any(near(name, 0.5) for name in pair if name != x):
            continue
        fused[id(second)] = helper.make_node(
            "Gelu", [x], list(second.output), name=f"{erf.name}_gelu", domain="com.microsoft"
        )
    if fused:
        _replace(graph.node, [fused.get(id(n), n) for n in graph.node])


def _live(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """The nodes that feed `outputs` (the graph's nodes are in topological order)."""
    needed = set(outputs)
    kept: list[Any] = []
    for node in reversed(nodes):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(node.input)
    kept.reverse()
    return kept


def _replace(field: Any, items: list[Any]) -> None:
    del field[:]
    field.extend(items)


def _file_hash(path: Path) -> str:
    """SHA-256 of a file, computed once per process for a given path, size and mtime."""
    status = path.stat()
    key = (str(path), status.st_size, status.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


__all__ = ["CONVERSION", "convert", "integer_model"]
