"""torchtrt_swish.compile.export_engine writes its engine by the project's one output rule (torchtrt_swish._output):
atomically, a regular file or a new path only, a symlink written through. Torch-TensorRT is replaced by a stand-in
that serializes to fixed bytes: the writing is under test, not the conversion."""
from __future__ import annotations

import dataclasses
import os
import stat

import pytest
import torch

from torchtrt_swish import compile as trt_compile
from torchtrt_swish._output import OutputPathError
from torchtrt_swish.modules import EfficientSwish

ENGINE = b"serialized engine"


class _StandIn:
    """The parts of torch_tensorrt that export_engine calls."""

    class dynamo:
        @dataclasses.dataclass
        class CompilationSettings:
            min_block_size: int = 5

        @staticmethod
        def convert_exported_program_to_serialized_trt_engine(program, arg_inputs, **settings):
            return ENGINE

    @staticmethod
    def Input(**spec):
        return spec


@pytest.fixture
def export_engine(monkeypatch):
    monkeypatch.setattr(trt_compile, "_require", lambda: _StandIn)
    model, x = EfficientSwish(bias_shape=(4, 1, 1)).eval(), torch.randn(2, 4, 3, 3)
    return lambda path: trt_compile.export_engine(model, [x], path, device="cpu")


def test_the_engine_is_written_and_a_symlink_stays_a_link(export_engine, tmp_path, capsys):
    real = tmp_path / "real.engine"
    real.write_bytes(b"old")
    link = tmp_path / "link.engine"
    link.symlink_to(real)
    export_engine(link)
    assert os.path.islink(link) and real.read_bytes() == ENGINE
    assert "trtexec --loadEngine=" in capsys.readouterr().out
    old = os.umask(0o027)
    try:
        export_engine(tmp_path / "new.engine")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.engine").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_fifo_or_a_dangling_link_is_refused_and_left_alone(export_engine, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a reader, so that a wrong write cannot hang the test
    try:
        with pytest.raises(OutputPathError, match="is a FIFO"):
            export_engine(fifo)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    finally:
        os.close(fd)
    dangling = tmp_path / "dangling.engine"
    dangling.symlink_to(tmp_path / "nowhere.engine")
    with pytest.raises(OutputPathError, match="dangling"):
        export_engine(dangling)
    assert not (tmp_path / "nowhere.engine").exists()
