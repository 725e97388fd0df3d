"""torchtrt_swish.shapes: the one definition of shape text and (min, opt, max) ranges, and that every route uses it."""
from __future__ import annotations

import pytest

from torchtrt_swish import shapes


def test_parse_shape():
    assert shapes.parse_shape("1x3x224x224") == (1, 3, 224, 224)
    assert shapes.parse_shape("2X5") == (2, 5) and shapes.parse_shape("7") == (7,)
    assert shapes.parse_shape("1x0x4", min_dim=0) == (1, 0, 4)
    for bad in ("", "x", "1x", "1xx2", "a", "1x-2", "1.5x2"):
        with pytest.raises(ValueError, match=f"bad shape '{bad}': expected e.g."):
            shapes.parse_shape(bad)
    with pytest.raises(ValueError, match="bad shape '1x0': dimensions must be positive"):
        shapes.parse_shape("1x0")


def test_parse_shape_spec():
    assert shapes.parse_shape_spec("x:1x3x224x224, y:2") == {"x": (1, 3, 224, 224), "y": (2,)}
    assert shapes.parse_shape_spec("x:0x4") == {"x": (0, 4)}  # TensorRT profiles admit empty axes
    assert shapes.parse_shape_spec("a:b:1x2") == {"a:b": (1, 2)}  # the last colon splits name and dims
    assert shapes.parse_shape_spec(None) == {} and shapes.parse_shape_spec("") == {}
    for bad in ("x", "x:1x", "x:a", ":1x2", "x=1", "x:1,y"):
        with pytest.raises(ValueError, match="bad shape spec"):
            shapes.parse_shape_spec(bad)


def test_ordered():
    assert shapes.ordered((1, 3), (2, 3), (4, 3))
    assert not shapes.ordered((2,), (1,), (4,)) and not shapes.ordered((1,), (5,), (4,))
    assert not shapes.ordered((1, 3), (2,), (4, 3))  # ranks differ


def test_shape_ranges():
    assert shapes.shape_ranges([(4, 3, 8, 8), (5,)], [{0: (1, 16)}]) == [
        ((1, 3, 8, 8), (4, 3, 8, 8), (16, 3, 8, 8)), ((5,), (5,), (5,))]
    assert shapes.shape_ranges([(4, 3)], [{0: (1, 2, 8)}]) == [((1, 3), (2, 3), (8, 3))]
    assert shapes.shape_ranges([(4, 3)]) == [((4, 3), (4, 3), (4, 3))]
    with pytest.raises(ValueError, match="example size 4 inside"):
        shapes.shape_ranges([(4, 3)], [{0: (8, 16)}])
    with pytest.raises(ValueError, match="dim 2 out of range"):
        shapes.shape_ranges([(4, 3)], [{2: (1, 8)}])
    with pytest.raises(ValueError, match="2 entries for 1 inputs"):
        shapes.shape_ranges([(4, 3)], [None, None])
    with pytest.raises(ValueError, match=r"expected \(min, max\)"):
        shapes.shape_ranges([(4, 3)], [{0: (1,)}])


def test_input_range():
    dims = ("batch", 1, 5, 5)
    assert shapes.input_range("x", dims, {}) == ((1, 1, 5, 5), (8, 1, 5, 5), (32, 1, 5, 5))
    assert shapes.input_range("x", dims, {}, batch_range=(2, 3, 4)) == ((2, 1, 5, 5), (3, 1, 5, 5), (4, 1, 5, 5))
    given = {"min": (2, 1, 5, 5), "opt": (4, 1, 5, 5), "max": (6, 1, 5, 5)}
    assert shapes.input_range("x", dims, given) == ((2, 1, 5, 5), (4, 1, 5, 5), (6, 1, 5, 5))
    assert shapes.input_range("x", dims, {"max": (64, 1, 5, 5)}) == ((1, 1, 5, 5), (8, 1, 5, 5), (64, 1, 5, 5))
    with pytest.raises(ValueError, match="min <= opt <= max"):
        shapes.input_range("x", dims, {"min": (9, 1, 5, 5)})
    with pytest.raises(ValueError, match="axis 1 is fixed at 1"):
        shapes.input_range("x", dims, {"opt": (1, 3, 5, 5)})
    with pytest.raises(ValueError, match="rank 3, the input has rank 4"):
        shapes.input_range("x", dims, {"max": (1, 1, 5)})
    with pytest.raises(ValueError, match=r"'x' axis 2 \(height\) is dynamic.*e.g. x:1x1x1x5"):
        shapes.input_range("x", (None, 1, "height", 5), {})
    with pytest.raises(ValueError, match=r"axis 1 \(unnamed\) is dynamic"):
        shapes.input_range("x", (1, None), {})


def test_the_routes_use_this_definition():
    """The Torch-TensorRT entry points and the CLI parse and range shapes through this module, not a copy."""
    from torchtrt_swish import compile as ttc

    assert ttc.shape_ranges is shapes.shape_ranges
    pytest.importorskip("onnx", reason="the ONNX route needs the [onnx] extra (onnx)")
    pytest.importorskip("polygraphy", reason="the ONNX route needs the [onnx] extra (polygraphy)")
    from onnx_path import engine
    from onnx_path.tools import args

    assert engine.parse_shape_spec is shapes.parse_shape_spec and args.parse_shape_spec is shapes.parse_shape_spec
    assert args.parse_shape is shapes.parse_shape and engine.input_range is shapes.input_range
