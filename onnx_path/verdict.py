"""The verdict rules of a parity run: error statistics that see non-finite values, the baseline rule, the report.

The rules and the statistics of a row: docs/cli.md#check-verdicts and docs/cli.md#check-non-finite-values.
"""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from torchtrt_swish.dtypes import BASELINE_FACTOR, unmatched_positions

from .feeds import show_shape
from .model_file import write_text_atomic

BASELINE_SUFFIX = " [baseline]"
# Polygraphy's relative error adds this to zero reference values; the same here keeps the two consistent.
_EPSILON = 2.220446049250313e-16


def check_tolerance(name: str, value: float) -> float:
    """`value` as a float when it is a finite number >= 0; ValueError naming it otherwise (NaN would pass anything)."""
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def _worst(values: Iterable[float]) -> float:
    """The maximum, NaN when any value is NaN (Python's max() drops a NaN that is not first)."""
    out = 0.0
    for v in values:
        if math.isnan(v):
            return math.nan
        out = max(out, v)
    return out


def _unmeasured() -> dict:
    """The statistics of an output of which nothing was compared: no error measured, no element counted."""
    return {"max_abs": None, "max_rel": None, "mean_abs": None, "max_abs_finite": None,
            "nonfinite": {"candidate": 0, "reference": 0, "mismatched": 0}, "elements": 0}


def error_stats(candidate, reference) -> dict:
    """One output's statistics for one set of inputs (docs/cli.md#check-non-finite-values), or its shape_mismatch."""
    a = np.asarray(candidate, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.size != b.size:
        return {"shape_mismatch": f"shape {list(a.shape)} against the reference's {list(b.shape)}"}
    if a.size == 0:
        return _unmeasured()
    a, b = a.reshape(-1), b.reshape(-1)
    fa, fb = np.isfinite(a), np.isfinite(b)
    both = fa & fb
    unmatched = int(np.count_nonzero(unmatched_positions(a, b)))  # the rule of every comparison, doctor's too
    nan = bool(np.isnan(a).any() or np.isnan(b).any())
    diff = np.abs(a[both] - b[both])
    rel = diff / np.where(b[both] == 0, _EPSILON, np.abs(b[both]))
    finite_max = float(diff.max()) if diff.size else 0.0
    spoiled = math.nan if nan else (math.inf if unmatched else None)

    def stat(value: float) -> float:
        return value if spoiled is None else spoiled

    return {
        "max_abs": stat(finite_max),
        "max_rel": stat(float(rel.max()) if rel.size else 0.0),
        "mean_abs": stat(float(diff.sum() / a.size)),
        "max_abs_finite": finite_max if diff.size else None,
        "nonfinite": {"candidate": int(np.count_nonzero(~fa)), "reference": int(np.count_nonzero(~fb)),
                      "mismatched": unmatched},
        "elements": int(a.size),
    }


def merge_stats(per_iteration: list[dict]) -> dict:
    """The statistics of one output over all iterations: worst errors, summed counts (an iteration in which the
    output has no elements adds nothing)."""
    shape_problem = next((s["shape_mismatch"] for s in per_iteration if "shape_mismatch" in s), None)
    if shape_problem is not None or not per_iteration:
        return {"max_abs": math.inf, "max_rel": math.inf, "mean_abs": math.inf, "max_abs_finite": None,
                "nonfinite": {"candidate": 0, "reference": 0, "mismatched": 0}, "elements": 0,
                "failure": shape_problem or "not compared"}
    per_iteration = [s for s in per_iteration if s["elements"]]
    if not per_iteration:
        return _unmeasured()
    finite = [s["max_abs_finite"] for s in per_iteration if s["max_abs_finite"] is not None]
    elements = sum(s["elements"] for s in per_iteration)
    means = [s["mean_abs"] * s["elements"] for s in per_iteration]
    return {
        "max_abs": _worst(s["max_abs"] for s in per_iteration),
        "max_rel": _worst(s["max_rel"] for s in per_iteration),
        "mean_abs": _worst(means) if any(not math.isfinite(m) for m in means) else sum(means) / elements,
        "max_abs_finite": max(finite) if finite else None,
        "nonfinite": {k: sum(s["nonfinite"][k] for s in per_iteration) for k in ("candidate", "reference",
                                                                                  "mismatched")},
        "elements": elements,
    }


def _clean(row: dict) -> bool:
    # No NaN, no unmatched infinity, shapes that matched: the statistics are finite numbers (or none was measured).
    return row["nonfinite"]["mismatched"] == 0 and (row["max_abs"] is None or math.isfinite(row["max_abs"]))


def is_empty(row: dict) -> bool:
    """True for the row of an output that had no elements to compare (in the reference's shape)."""
    return row["max_abs"] is None


def make_row(name: str, stats: dict, within_tolerance: bool) -> dict:
    """A report row: the merged statistics, and Polygraphy's element-wise verdict held to the non-finite rule."""
    row = {"name": name, **stats}
    row["within_tolerance"] = (bool(within_tolerance) or is_empty(row)) and _clean(row)
    return row


def _nonfinite_failure(row: dict, who: str) -> str:
    n = row["nonfinite"]
    if math.isnan(row["max_abs"]):
        return (f"NaN in the {who} or the reference (non-finite elements: {who} {n['candidate']}, reference "
                f"{n['reference']}); NaN never passes")
    return f"non-finite values at {n['mismatched']} position(s) where the reference has other values"


def judge(row: dict, base: dict | None, atol: float, rtol: float) -> dict:
    """Set `within_baseline`, `passed` and `failure` on a candidate row (`base`: its baseline's row, or None)."""
    row["baseline_max_abs"] = None if base is None else base["max_abs"]
    row["within_baseline"] = None if base is None or is_empty(row) else bool(
        _clean(row) and _clean(base) and not is_empty(base) and row["max_abs"] <= BASELINE_FACTOR * base["max_abs"])
    row["passed"] = row["within_tolerance"] or bool(row["within_baseline"])
    if row["passed"]:
        row["failure"] = ""
    elif row.get("failure"):
        pass  # a shape mismatch, said when the statistics were merged
    elif not _clean(row):
        row["failure"] = _nonfinite_failure(row, "candidate")
    elif base is None:
        row["failure"] = f"max |err| {row['max_abs']:.3g} is outside atol {atol:g} / rtol {rtol:g}"
    elif not _clean(base):
        row["failure"] = (f"outside atol {atol:g} / rtol {rtol:g}, and the baseline cannot excuse it: "
                          + _nonfinite_failure(base, "baseline"))
    else:
        row["failure"] = (f"max |err| {row['max_abs']:.3g} is outside atol {atol:g} / rtol {rtol:g} and above "
                          f"{BASELINE_FACTOR:g}x the baseline's {base['max_abs']:.3g}")
    return row


def magnitudes(iterations) -> dict[str, float]:
    """Largest finite |value| per output over all iterations of one runner (NaN when none is finite; an output with
    no elements in any iteration is left out)."""
    out: dict[str, float] = {}
    for it in iterations:
        for name, value in it.items():
            a = np.abs(np.asarray(value, dtype=np.float64))
            if a.size == 0:
                continue
            finite = a[np.isfinite(a)]
            big = float(finite.max()) if finite.size else float("nan")
            out[name] = big if name not in out or np.isnan(out[name]) else max(out[name], big)
    return out


def empty_outputs(iterations) -> dict[str, tuple[int, ...]]:
    """The shape of each output that has no elements in any iteration of one runner."""
    return {name: np.shape(value) for name, value in iterations[0].items()
            if all(np.size(it[name]) == 0 for it in iterations)} if iterations else {}


def output_notes(runner: str, magnitude: dict[str, float], empty: dict[str, tuple[int, ...]], atol: float,
                 outputs: Iterable[str] | None = None) -> list[str]:
    """The report's notes on the outputs of the reference `runner` (of `outputs`, default all) whose verdict says
    nothing: at most atol in magnitude (magnitudes), or no elements at all (empty_outputs)."""
    chosen = None if outputs is None else set(outputs)
    notes = [f"output {name!r} of {runner} is at most {big:.3g} in magnitude, not above atol {atol:g}: 'within "
             "tolerance' says nothing about it (use a smaller --atol, other inputs, or a calibrated model)"
             for name, big in magnitude.items() if (chosen is None or name in chosen) and big <= atol]
    notes += [f"output {name!r} of {runner} has no elements (shape {show_shape(shape)}): nothing was compared, so "
              "its PASS says nothing" for name, shape in empty.items() if chosen is None or name in chosen]
    return notes


def far_beyond_baseline(report: ParityReport, factor: float = 100.0, share: float = 0.1) -> list[str]:
    """Failing outputs whose baseline passes its tolerance while they are off by a wide margin: by over `factor`
    times what the tolerance and the baseline allow, and by over `share` of the reference's magnitude.

    That is what other weights look like (the same network with other parameters), not a rounding difference.
    """
    passing = {(c["runner"], r["name"]) for c in report.baselines for r in c["outputs"] if r["within_tolerance"]}
    far = set()
    for comp in report.comparisons:
        for row in comp["outputs"]:
            base, size = row.get("baseline_max_abs"), row.get("reference_max_abs")
            if row["passed"] or base is None or (comp["runner"] + BASELINE_SUFFIX, row["name"]) not in passing:
                continue
            allowed = max(report.atol, BASELINE_FACTOR * base)
            if _clean(row) and row["max_abs"] > factor * allowed and (size is None or row["max_abs"] > share * size):
                far.add(row["name"])
    return sorted(far)


def _json_safe(value):
    # Strict JSON has no NaN or Infinity (Python would write both): non-finite numbers become "nan", "inf", "-inf".
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _number(value: float | None) -> str:
    # A table cell: '-' for a number that was not measured (no baseline, no elements).
    return f"{'-' if value is None else f'{value:.3g}':>10}"


def _baseline_state(row: dict) -> str:
    if is_empty(row):
        return "no elements"
    return f"{'within' if row['within_tolerance'] else 'outside'} tolerance"


def _nonfinite_cell(row: dict) -> str:
    n = row["nonfinite"]
    return "-" if not (n["candidate"] or n["reference"]) else f"{n['candidate']}/{n['reference']}"


@dataclasses.dataclass
class ParityReport:
    """Result of a parity run: per-comparison, per-output errors and verdicts, the baselines and warnings."""

    dtype: str
    atol: float
    rtol: float
    reference: str
    comparisons: list[dict]
    skipped: list[dict] = dataclasses.field(default_factory=list)
    per_layer: bool = False
    model: str = ""
    baselines: list[dict] = dataclasses.field(default_factory=list)
    baseline_model: str = ""
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when every compared output of every comparison passed (and something was compared)."""
        return bool(self.comparisons) and all(c["passed"] for c in self.comparisons)

    def to_dict(self) -> dict:
        """JSON-serializable form (non-finite numbers as the strings 'nan', 'inf', '-inf')."""
        return _json_safe({
            "model": self.model,
            "dtype": self.dtype,
            "reference": self.reference,
            "tolerances": {"atol": self.atol, "rtol": self.rtol},
            "baseline_factor": BASELINE_FACTOR,
            "baseline_model": self.baseline_model,
            "per_layer": self.per_layer,
            "passed": self.passed,
            "comparisons": self.comparisons,
            "baselines": self.baselines,
            "skipped": self.skipped,
            "warnings": self.warnings,
        })

    def to_json(self, path: str | Path | None = None) -> str:
        """Strict JSON text; also written (atomically) to `path` when given."""
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, text + "\n")
        return text

    def to_table(self, max_rows_per_comparison: int = 12) -> str:
        """Fixed-width table: each candidate's errors, its baseline's, the verdict; baseline rows; warnings."""
        head = (f"{'runner':<34} {'vs':<24} {'output':<24} {'max_abs':>10} {'max_rel':>10} {'baseline':>10} "
                f"{'nonfinite':>9}  result")
        lines = [
            f"parity ({self.dtype}; an output passes if every |err| <= {self.atol:g} or rel <= {self.rtol:g}"
            + (f", or if its max |err| <= {BASELINE_FACTOR:g}x its baseline's" if self.baselines else "")
            + f"; NaN never passes; reference {self.reference}"
            + (f"; baseline {self.baseline_model}" if self.baselines else "; no baseline")
            + (")" + (" [per-layer]" if self.per_layer else "")),
            head,
            "-" * len(head),
        ]

        def verdict(row) -> str:
            if not row["passed"]:
                return f"FAIL: {row['failure']}" if row.get("failure") else "FAIL"
            if is_empty(row):
                return "PASS (no elements: nothing compared)"
            return "PASS" if row["within_tolerance"] else f"PASS (<= {BASELINE_FACTOR:g}x baseline)"

        def worst_first(row):
            if is_empty(row):
                return row["passed"], math.inf
            return (row["passed"], -row["max_abs"] if not math.isnan(row["max_abs"]) else -math.inf)

        for comp in self.comparisons:
            rows = comp["outputs"]
            # Long (per-layer) lists: failures first, then the largest errors.
            shown = rows if len(rows) <= max_rows_per_comparison else sorted(
                rows, key=worst_first)[:max_rows_per_comparison]
            for row in shown:
                base = row.get("baseline_max_abs")
                lines.append(
                    f"{comp['runner'][:34]:<34} {comp['reference'][:24]:<24} {row['name'][-24:]:<24} "
                    f"{_number(row['max_abs'])} {_number(row['max_rel'])} {_number(base)} "
                    f"{_nonfinite_cell(row):>9}  {verdict(row)}"
                )
            if len(shown) < len(rows):
                lines.append(f"  ... {len(rows) - len(shown)} more tensor(s) of this comparison, "
                             f"{sum(r['passed'] for r in rows)}/{len(rows)} passed")
        for comp in self.baselines:
            for row in comp["outputs"]:
                lines.append(
                    f"{comp['runner'][:34]:<34} {comp['reference'][:24]:<24} {row['name'][-24:]:<24} "
                    f"{_number(row['max_abs'])} {_number(row['max_rel'])} {'':>10} {_nonfinite_cell(row):>9}  "
                    f"baseline, {_baseline_state(row)}"
                )
        for s in self.skipped:
            lines.append(f"{s['runner']:<34} skipped: {s['reason']}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        lines.append(f"overall: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)
