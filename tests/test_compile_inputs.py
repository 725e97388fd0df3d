"""torchtrt_swish.compile gives each torch_tensorrt.Input the dtype of its (prepared) example tensor: float inputs
are cast to the model's dtype, an integer input keeps its own, so the specs match the exported program.

Torch-TensorRT does not import here, so the specs are built against a stand-in of the part it provides:
``torch_tensorrt.Input(shape=..., dtype=...)`` / ``Input(min_shape=..., opt_shape=..., max_shape=..., dtype=...)``
taking torch dtypes, integer ones included (pytorch/TensorRT py/torch_tensorrt/_Input.py, whose docstring example
builds ``Input(..., dtype=torch.int64)``, and _enums.py ``dtype._from``: uint8, int8, int32, int64, bool and the
float types, 2.11 to main); ``torch_tensorrt.compile(ep, ir="dynamo", arg_inputs=...)`` and the
``CompilationSettings`` dataclass are stand-ins only so that compile() can be called.
"""
from __future__ import annotations

import dataclasses
import types

import pytest
import torch

from torchtrt_swish import compile as trt_compile
from torchtrt_swish.modules import EfficientSwish
from torchtrt_swish.shapes import shape_ranges


class Gathered(torch.nn.Module):
    """swish, then rows picked by an integer index input: the int64 input must stay int64."""

    def __init__(self):
        super().__init__()
        self.act = EfficientSwish(bias_shape=(4,))

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return self.act(x).index_select(0, index)


def _stand_in():
    made = []

    class Input:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            made.append(self)

    @dataclasses.dataclass
    class CompilationSettings:
        min_block_size: int = 5
        require_full_compilation: bool = False

    recorded = {}

    def compile_(program, ir=None, arg_inputs=None, **settings):
        recorded.update(program=program, ir=ir, arg_inputs=arg_inputs, settings=settings)
        return torch.nn.Identity()

    ns = types.SimpleNamespace(Input=Input, compile=compile_,
                               dynamo=types.SimpleNamespace(CompilationSettings=CompilationSettings))
    return ns, recorded


def _placeholder_dtypes(program: torch.export.ExportedProgram) -> list[torch.dtype]:
    user = {s.arg.name for s in program.graph_signature.input_specs
            if s.kind == torch.export.graph_signature.InputKind.USER_INPUT}
    return [n.meta["val"].dtype for n in program.graph.nodes if n.op == "placeholder" and n.name in user]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_each_input_keeps_its_prepared_dtype(dtype):
    model, inputs = trt_compile._prepare(Gathered(), [torch.randn(6, 4), torch.tensor([0, 5, 2])], dtype, "cpu")
    assert [t.dtype for t in inputs] == [dtype, torch.int64]
    ns, _ = _stand_in()
    static = trt_compile.trt_inputs(ns, shape_ranges([tuple(t.shape) for t in inputs]), inputs)
    assert [s.kwargs for s in static] == [{"shape": (6, 4), "dtype": dtype}, {"shape": (3,), "dtype": torch.int64}]
    dynamic = trt_compile.trt_inputs(ns, shape_ranges([tuple(t.shape) for t in inputs], [{0: (2, 8)}, {0: (1, 4)}]),
                                     inputs)
    assert [s.kwargs for s in dynamic] == [
        {"min_shape": (2, 4), "opt_shape": (6, 4), "max_shape": (8, 4), "dtype": dtype},
        {"min_shape": (1,), "opt_shape": (3,), "max_shape": (4,), "dtype": torch.int64}]


def test_compile_passes_specs_that_match_the_exported_program(monkeypatch):
    ns, recorded = _stand_in()
    monkeypatch.setattr(trt_compile, "_require", lambda: ns)
    trt_compile.compile(Gathered(), [torch.randn(6, 4), torch.tensor([0, 5, 2], dtype=torch.int32)],
                        dtype=torch.float16, device="cpu")
    specs = [s.kwargs["dtype"] for s in recorded["arg_inputs"]]
    assert specs == [torch.float16, torch.int32]
    assert specs == _placeholder_dtypes(recorded["program"])
    assert recorded["ir"] == "dynamo" and recorded["settings"] == {"min_block_size": 1}


def test_one_spec_per_input():
    ns, _ = _stand_in()
    with pytest.raises(ValueError):
        trt_compile.trt_inputs(ns, shape_ranges([(2,), (3,)]), [torch.zeros(2)])
