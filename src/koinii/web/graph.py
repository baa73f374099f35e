"""The context hierarchy as a drawing: `genlCx` edges laid out in layers for an SVG.

`(genlCx A B)` says A sees B. The drawing puts what is seen above what sees it: the
vocabularies on top, the agents' own contexts below them, the channels that see the
agents below those. Each context is a box with its name and how many sentexes it holds.

Invariant: a pure function of the contexts and edges it is given (no KB access; the
caller's `spend`, once per context and edge, counts the work toward a budget), and
deterministic — the same hierarchy always draws the same picture: a context's layer is
one below its lowest parent, and a layer is ordered by where its parents stand, then
by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

BOX_H = 46
LAYER_GAP = 70
BOX_GAP = 22
MARGIN = 16
CHAR_W = 7.4  # px per character of a label at the view's font size


def _free() -> None:
    """No budget to count toward (the default `spend`)."""


@dataclass
class Box:
    name: str
    kind: str  # channel | agent | vocabulary | other
    count: int
    layer: int = 0
    x: float = 0.0
    y: float = 0.0
    width: float = 0.0
    parents: list[str] = field(default_factory=list)

    @property
    def middle(self) -> float:
        return self.x + self.width / 2


@dataclass
class Drawing:
    boxes: list[Box]
    edges: list[tuple[Box, Box]]  # (sees, seen)
    width: float
    height: float


def layout(
    counts: dict[str, int],
    edges: list[tuple[str, str]],
    kinds: dict[str, str],
    spend: Callable[[], None] = _free,
) -> Drawing:
    """Lay out every context of `counts` and the edges between them."""
    boxes = {name: Box(name, kinds.get(name, "other"), count) for name, count in counts.items()}
    for child, parent in edges:
        spend()
        if child in boxes and parent in boxes and parent not in boxes[child].parents:
            boxes[child].parents.append(parent)
    for box in boxes.values():
        spend()
        box.parents.sort()
        box.width = max(120.0, CHAR_W * max(len(box.name), len(f"{box.count} sentexes")) + 24)
    _layers(boxes, spend)
    layers: dict[int, list[Box]] = {}
    for box in boxes.values():
        layers.setdefault(box.layer, []).append(box)
    widths = {}
    for level in sorted(layers):
        row = layers[level]
        if level == 0:
            row.sort(key=lambda b: b.name)
        else:
            row.sort(key=lambda b: (_barycentre(b, boxes), b.name))
        x = MARGIN
        for box in row:
            spend()
            box.x, box.y = x, MARGIN + level * (BOX_H + LAYER_GAP)
            x += box.width + BOX_GAP
        widths[level] = x - BOX_GAP + MARGIN
    width = max(widths.values(), default=2 * MARGIN)
    for level, row in layers.items():  # centre each layer
        shift = (width - widths[level]) / 2
        for box in row:
            box.x += shift
    height = MARGIN * 2 + (max(layers, default=0) + 1) * (BOX_H + LAYER_GAP) - LAYER_GAP
    ordered = sorted(boxes.values(), key=lambda b: (b.layer, b.x))
    drawn = [(boxes[c], boxes[p]) for c, p in sorted(set(edges)) if c in boxes and p in boxes]
    return Drawing(ordered, drawn, width, height)


def _layers(boxes: dict[str, Box], spend: Callable[[], None]) -> None:
    """Each box one layer below its lowest parent (the hierarchy has no cycles: the
    engine refuses an edge that would close one)."""
    done: set[str] = set()
    for start in sorted(boxes):
        stack = [(start, False)]
        while stack:
            spend()
            name, expanded = stack.pop()
            if name in done:
                continue
            box = boxes[name]
            if expanded or not box.parents:
                box.layer = 1 + max((boxes[p].layer for p in box.parents), default=-1)
                done.add(name)
            else:
                stack.append((name, True))
                stack.extend((p, False) for p in box.parents if p not in done)


def _barycentre(box: Box, boxes: dict[str, Box]) -> float:
    if not box.parents:
        return 0.0
    return sum(boxes[p].middle for p in box.parents) / len(box.parents)
