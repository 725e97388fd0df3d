"""What a surgery run did: the SwishBias nodes it created (and what they replaced), what it refused and why."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Replacement:
    """One SwishBias node that replaced `replaced` (node names) — `kind` says which pattern matched."""

    kind: str
    replaced: list[str]
    node: str
    output: str
    bias: str
    note: str = ""


@dataclasses.dataclass
class Refusal:
    """A candidate that was left alone, and why."""

    kind: str
    node: str
    reason: str


@dataclasses.dataclass
class SurgeryReport:
    """What a surgery run replaced and refused, with op-type counts before and after, and the functions it inlined."""

    replaced: list[Replacement] = dataclasses.field(default_factory=list)
    refused: list[Refusal] = dataclasses.field(default_factory=list)
    counts_before: dict[str, int] = dataclasses.field(default_factory=dict)
    counts_after: dict[str, int] = dataclasses.field(default_factory=dict)
    inlined: list[str] = dataclasses.field(default_factory=list)  # model-local functions whose calls were inlined

    @property
    def nodes_before(self) -> int:
        """Total node count before surgery."""
        return sum(self.counts_before.values())

    @property
    def nodes_after(self) -> int:
        """Total node count after surgery."""
        return sum(self.counts_after.values())

    def kinds(self) -> dict[str, int]:
        """Number of replacements per pattern kind."""
        out: dict[str, int] = {}
        for r in self.replaced:
            out[r.kind] = out.get(r.kind, 0) + 1
        return out

    def to_dict(self) -> dict:
        """JSON-serializable form."""
        return {
            "replaced": [dataclasses.asdict(r) for r in self.replaced],
            "refused": [dataclasses.asdict(r) for r in self.refused],
            "replaced_by_kind": self.kinds(),
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "counts_before": dict(self.counts_before),
            "counts_after": dict(self.counts_after),
            "inlined_functions": list(self.inlined),
        }

    def to_text(self, max_lines: int = 20) -> str:
        """Human-readable summary: counts, replacements by kind, refusals with reasons."""
        lines = [
            f"nodes: {self.nodes_before} -> {self.nodes_after}; "
            f"{len(self.replaced)} SwishBias node(s) created"
            + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(self.kinds().items()))})" if self.replaced else "")
        ]
        if self.inlined:
            lines.append(f"  inlined the calls of model-local function(s) {', '.join(self.inlined)}")
        changed = sorted(set(self.counts_before) | set(self.counts_after))
        for op in changed:
            b, a = self.counts_before.get(op, 0), self.counts_after.get(op, 0)
            if a != b:
                lines.append(f"  {op}: {b} -> {a}")
        for r in self.replaced[:max_lines]:
            note = f" [{r.note}]" if r.note else ""
            lines.append(f"  replaced {r.kind}: {', '.join(r.replaced)} -> {r.node} (bias {r.bias}){note}")
        if len(self.replaced) > max_lines:
            lines.append(f"  ... and {len(self.replaced) - max_lines} more")
        for r in self.refused:
            lines.append(f"  refused {r.kind} at {r.node}: {r.reason}")
        return "\n".join(lines)
