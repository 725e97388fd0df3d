"""What the docs state about the build (docs/building.md) and the export, checked against the real artefacts."""
from __future__ import annotations

import re
import warnings

import pytest
from tools_native import ROOT
from trt_plugin.harness import PLUGIN_PATH, needs_plugin
from trt_plugin.test_library_file import _elf_dynamic


def _documented_needed() -> list[str]:
    text = (ROOT / "docs" / "building.md").read_text()
    match = re.search(r"`NEEDED`[^:|]*: (.*?) only", text)
    assert match, "docs/building.md's table of targets states the plugin's NEEDED list"
    return re.findall(r"`([^`]+\.so[^`]*)`", match.group(1))


@needs_plugin
def test_the_build_page_states_the_plugins_needed_list():
    needed = _elf_dynamic(PLUGIN_PATH)[0]
    assert needed, PLUGIN_PATH
    assert sorted(_documented_needed()) == sorted(needed)


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_a_bfloat16_export_warns_of_no_unsupported_opset(exporter):
    pytest.importorskip("onnx", reason="needs onnx (the onnx extra)")
    import torch

    from onnx_path.export import BFLOAT16_MIN_OPSET, dynamo_supported, export_onnx
    from torchtrt_swish import Net

    if exporter == "dynamo" and not dynamo_supported():
        pytest.skip(f"needs torch's dynamo ONNX exporter with custom_translation_table (torch {torch.__version__})")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = export_onnx(Net(), torch.randn(1, 1, 8, 8), exporter=exporter, dtype="bfloat16")
    assert {o.domain: o.version for o in model.opset_import}[""] == BFLOAT16_MIN_OPSET
    unsupported = [str(w.message) for w in caught if "not supported" in str(w.message)]
    assert unsupported == []
