"""Shapes and shape ranges, defined once: the text forms (``1x3x224x224``; trtexec's ``x:1x3x224x224,y:1x10``) and
the (min, opt, max) range of each input that the Torch-TensorRT entry points and the ONNX engine builder give
TensorRT.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

Shape = tuple[int, ...]
ShapeRange = tuple[Shape, Shape, Shape]
#: {dim: (min, max)} or {dim: (min, opt, max)} per positional input; None (or a missing entry) = static input.
DynamicShapes = Sequence[Mapping[int, Sequence[int]] | None]
#: (min, opt, max) of a dynamic batch axis nobody gave a range for.
DEFAULT_BATCH_RANGE = (1, 8, 32)


def parse_shape(text: str, *, min_dim: int = 1) -> Shape:
    """Parse 'D0xD1x...' (e.g. 1x3x224x224) into a tuple; ValueError naming the text unless every D >= min_dim."""
    if not re.fullmatch(r"\d+(x\d+)*", text.strip().lower()):
        raise ValueError(f"bad shape {text!r}: expected e.g. 1x3x224x224")
    shape = tuple(int(d) for d in text.strip().lower().split("x"))
    if any(d < min_dim for d in shape):
        raise ValueError(f"bad shape {text!r}: dimensions must be {'positive' if min_dim == 1 else f'>= {min_dim}'}")
    return shape


def parse_shape_spec(text: str | None) -> dict[str, Shape]:
    """Parse trtexec-style 'x:1x3x224x224,y:1x10' into {'x': (1, 3, 224, 224), 'y': (1, 10)}."""
    shapes: dict[str, Shape] = {}
    if not text:
        return shapes
    for item in text.split(","):
        name, sep, dims = item.strip().rpartition(":")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = parse_shape(dims, min_dim=0)  # TensorRT profiles admit empty (0-sized) axes
        except ValueError:
            raise ValueError(f"bad shape spec {item!r}: expected NAME:D0xD1x... (e.g. x:1x3x224x224)") from None
    return shapes


def ordered(lo: Sequence[int], opt: Sequence[int], hi: Sequence[int]) -> bool:
    """Whether min <= opt <= max on every axis (what TensorRT requires of an optimization profile)."""
    return len(lo) == len(opt) == len(hi) and all(a <= b <= c for a, b, c in zip(lo, opt, hi))


def shape_ranges(shapes: Sequence[Sequence[int]], dynamic_shapes: DynamicShapes | None = None) -> list[ShapeRange]:
    """(min, opt, max) shape per input; a dynamic dim's opt defaults to the example input's size."""
    dynamic_shapes = list(dynamic_shapes or [])
    if len(dynamic_shapes) > len(shapes):
        raise ValueError(f"dynamic_shapes has {len(dynamic_shapes)} entries for {len(shapes)} inputs")
    out = []
    for i, shape in enumerate(shapes):
        lo, opt, hi = list(shape), list(shape), list(shape)
        for dim, rng in dict((dynamic_shapes[i] if i < len(dynamic_shapes) else None) or {}).items():
            if not 0 <= dim < len(shape):
                raise ValueError(f"input {i}: dynamic dim {dim} out of range for shape {tuple(shape)}")
            if not isinstance(rng, (tuple, list)) or len(rng) not in (2, 3):
                raise ValueError(f"input {i} dim {dim}: expected (min, max) or (min, opt, max), got {rng!r}")
            if len(rng) == 2:
                rng = (rng[0], shape[dim], rng[1])
            a, b, c = (int(v) for v in rng)
            if not ordered((a,), (b,), (c,)) or not a <= shape[dim] <= c:
                raise ValueError(f"input {i} dim {dim}: need min <= opt <= max with the example size "
                                 f"{shape[dim]} inside, got {(a, b, c)}")
            lo[dim], opt[dim], hi[dim] = a, b, c
        out.append((tuple(lo), tuple(opt), tuple(hi)))
    return out


def input_range(name: str, dims: Sequence[int | str | None], given: Mapping[str, Sequence[int]], *,
                batch_range: Sequence[int] = DEFAULT_BATCH_RANGE) -> ShapeRange:
    """(min, opt, max) of a named input with `dims` (int: fixed; str or None: dynamic, by name) from the shapes
    `given` under 'min'/'opt'/'max'; an absent one takes batch_range on a dynamic axis 0. ValueError naming why."""
    triple = []
    for idx, which in enumerate(("min", "opt", "max")):
        if which in given:
            shape = tuple(int(d) for d in given[which])
            if len(shape) != len(dims):
                raise ValueError(f"{which} shape {shape} of {name!r} has rank {len(shape)}, "
                                 f"the input has rank {len(dims)}")
            for axis, (want, got) in enumerate(zip(dims, shape)):
                if isinstance(want, int) and want != got:
                    raise ValueError(f"{which} shape {shape} of {name!r}: axis {axis} is fixed at {want}")
        else:
            shape = []
            for axis, d in enumerate(dims):
                if isinstance(d, int):
                    shape.append(d)
                elif axis == 0:
                    shape.append(int(batch_range[idx]))
                else:
                    example = "x".join(str(v if isinstance(v, int) else 1) for v in dims)
                    raise ValueError(f"input {name!r} axis {axis} ({d or 'unnamed'}) is dynamic: give its range "
                                     f"with --min-shapes/--opt-shapes/--max-shapes (e.g. {name}:{example})")
            shape = tuple(shape)
        triple.append(shape)
    mn, op, mx = triple
    if not ordered(mn, op, mx):
        raise ValueError(f"profile for {name!r} must satisfy min <= opt <= max per axis, got {mn}, {op}, {mx}")
    return mn, op, mx
