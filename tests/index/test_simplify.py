"""`export.simplify`: what torch's attention export adds that changes no output goes, and the outputs stay equal to
the bit. Needs the `onnx` package (the `[export]` extra)."""

from __future__ import annotations

import numpy as np
import pytest

from citewise.index.export import simplify

pytestmark = pytest.mark.extras


def attention_like(onnx, path) -> None:
    """Two "layers" of softmax(x + mask) with the NaN guard torch's export puts after each softmax, each computing
    the same additive mask from the boolean one; then a last Identity, as a model's head would read the layers."""
    from onnx import TensorProto, helper

    def const(name, value):
        return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(value, np.float32)))

    nodes = []
    previous = "x"
    for layer in range(2):
        zero, minus_inf, nan_zero = f"zero{layer}", f"minf{layer}", f"nz{layer}"
        nodes += [
            const(zero, 0.0),
            const(minus_inf, -np.inf),
            const(nan_zero, 0.0),
            helper.make_node("Where", ["keep", zero, minus_inf], [f"add_mask{layer}"]),
            helper.make_node("Add", [previous, f"add_mask{layer}"], [f"scores{layer}"]),
            helper.make_node("Softmax", [f"scores{layer}"], [f"p{layer}"], axis=-1),
            helper.make_node("IsNaN", [f"p{layer}"], [f"nan{layer}"]),
            helper.make_node("Where", [f"nan{layer}", nan_zero, f"p{layer}"], [f"out{layer}"]),
        ]
        previous = f"out{layer}"
    nodes.append(helper.make_node("Identity", [previous], ["y"]))
    previous = "y"
    graph = helper.make_graph(
        nodes,
        "attention_like",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("keep", TensorProto.BOOL, [2, 4]),
        ],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [2, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


def run(path, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def test_the_guard_and_the_repeated_mask_go_and_the_outputs_stay_the_same(tmp_path):
    onnx = pytest.importorskip("onnx")
    path = tmp_path / "model.onnx"
    attention_like(onnx, path)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.normal(size=(2, 4)).astype(np.float32), "keep": np.array([[1, 1, 0, 1], [1, 0, 0, 0]], bool)}
    before = run(path, feeds)
    dropped = simplify(path)
    assert dropped["Where(IsNaN)"] == 2 and dropped["IsNaN"] == 2
    assert dropped["Where"] == 1  # the second layer's mask is the first one's
    kinds = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert "IsNaN" not in kinds and kinds.count("Where") == 1
    assert np.array_equal(run(path, feeds), before)


def test_a_guard_that_is_not_a_no_op_stays(tmp_path):
    """Where(IsNaN(p), 1, p) puts 1 where p is NaN: not the export's guard (it puts 0), so it is kept."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    one = helper.make_node("Constant", [], ["one"], value=onnx.numpy_helper.from_array(np.array(1.0, np.float32)))
    graph = helper.make_graph(
        [one, helper.make_node("IsNaN", ["x"], ["nan"]), helper.make_node("Where", ["nan", "one", "x"], ["y"])],
        "not_a_guard",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    assert simplify(path) == {}
    assert run(path, {"x": np.array([1.0, np.nan, 2.0], np.float32)}).tolist() == [1.0, 1.0, 2.0]


def test_what_the_graph_returns_keeps_its_node(tmp_path):
    """A guard whose output is the graph's own keeps its name: the node stays."""
    onnx = pytest.importorskip("onnx")
    path = tmp_path / "model.onnx"
    attention_like(onnx, path)
    model = onnx.load(str(path))
    model.graph.node.pop()  # the Identity: the second guard's output becomes the graph's
    model.graph.output[0].name = "out1"
    onnx.save(model, str(path))
    feeds = {"x": np.ones((2, 4), np.float32), "keep": np.ones((2, 4), bool)}
    before = run(path, feeds)
    assert simplify(path)["Where(IsNaN)"] == 1
    assert np.array_equal(run(path, feeds), before)


def test_a_checked_rewrite_is_kept_only_when_the_outputs_stay_the_same(tmp_path):
    """How the shipped models are rewritten: the file before's sha256 comes back with what went; outputs that move
    leave the file as it was."""
    onnx = pytest.importorskip("onnx")
    import hashlib

    from citewise.index.export import simplify_checked

    path = tmp_path / "model.onnx"
    attention_like(onnx, path)
    original = path.read_bytes()
    feeds = {"x": np.arange(8, dtype=np.float32).reshape(2, 4), "keep": np.ones((2, 4), bool)}
    before, dropped = simplify_checked(path, lambda model: [run(model, feeds)])
    assert before == hashlib.sha256(original).hexdigest() and dropped["Where(IsNaN)"] == 2
    assert path.read_bytes() != original and not (tmp_path / "model.onnx.unsimplified").exists()

    attention_like(onnx, path)
    moved = simplify_checked(path, lambda model: [np.array([model.name == "model.onnx"])])  # differs by file
    assert moved is None and path.read_bytes() == original
    assert not (tmp_path / "model.onnx.unsimplified").exists()
