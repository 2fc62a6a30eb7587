"""Output comparison metrics, pure numpy with float64 accumulation.

Two kinds of metric:

* elementwise (:class:`ElementAccumulator` -> :class:`ElementStats`): max abs
  and rel error, relative L2 norm delta, cosine similarity.  They stream over
  blocks so a 1 GiB output is never held twice in memory; every sum is a
  float64 dot product, because float32 accumulation over 10^8 elements loses
  the very deltas (1e-3) a regression test must see.
* per sample (:func:`top1`, :func:`agreement`, :func:`accuracy`,
  :func:`per_tag`): classifier decisions, small (one value per sample).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: elements per inner block: 2 MiB of float64, sized to stay in L2/L3 cache
BLOCK = 1 << 18


#: float64 dot products run in slices this long: OpenBLAS threads ddot above 10000
#: elements, and on a 2-core machine its threads made a dot 30x slower (0.12 vs
#: 3.5 G/s); below the threshold it stays on the calling thread, whatever the
#: user's thread settings (einsum, the BLAS-free option, is 1.6x slower)
_DOT_SLICE = 8192


#: numpy >= 2 computes the slices' dot products in one call (one BLAS ddot per row of a
#: (k, _DOT_SLICE) view): the Python loop's 96 calls per block cost a quarter of a check
_VECDOT = getattr(np, "vecdot", None)


def _dot64(a: np.ndarray, b: np.ndarray) -> float:
    """``a . b`` of two float64 vectors, in slices of :data:`_DOT_SLICE`, summed in float64."""
    whole = a.size - a.size % _DOT_SLICE
    total = 0.0
    if _VECDOT is not None and whole:
        total = float(_VECDOT(a[:whole].reshape(-1, _DOT_SLICE), b[:whole].reshape(-1, _DOT_SLICE)).sum())
    else:
        whole = 0
    for start in range(whole, a.size, _DOT_SLICE):
        total += float(np.dot(a[start : start + _DOT_SLICE], b[start : start + _DOT_SLICE]))
    return total


@dataclass(frozen=True)
class ElementStats:
    """Elementwise comparison of one output with its golden.

    ``l2_delta`` is ``||obtained - golden|| / ||golden||`` (0 when both are
    zero, inf when only the golden is).  ``max_rel`` is ``max |o - g| / |g|``
    where a zero golden element gives inf unless the obtained one is zero too.
    Non-finite elements are counted and left out of the other figures.
    """

    count: int
    max_abs: float
    max_rel: float
    l2_delta: float
    cosine: float
    golden_norm: float
    nonfinite_obtained: int
    nonfinite_golden: int

    def to_dict(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class ElementAccumulator:
    """Streams (obtained, golden) blocks into :class:`ElementStats`.

    Keeps ``||d||^2``, ``||g||^2`` and ``g.d`` (``d = o - g``) in float64; the
    cosine is derived from them (``o.g = g.g + g.d``, ``o.o = g.g + 2 g.d + d.d``)
    so each element is read once and multiplied three times, not five.
    """

    def __init__(self, block: int = BLOCK) -> None:
        self._block = block
        self._d32 = np.empty(block, np.float32)
        self._r32 = np.empty(block, np.float32)
        self._d64 = np.empty(block, np.float64)
        self._g64 = np.empty(block, np.float64)
        self._dd = self._gg = self._gd = 0.0
        self._max_abs = self._max_rel = 0.0
        self._count = self._bad_o = self._bad_g = 0

    def update(self, obtained: np.ndarray, golden: np.ndarray) -> None:
        """Add one block; shapes must match (the caller names the output on mismatch)."""
        if obtained.shape != golden.shape:
            raise ValueError(f"shape {obtained.shape} does not match the golden's {golden.shape}")
        o = np.ascontiguousarray(obtained).reshape(-1)
        g = np.ascontiguousarray(golden).reshape(-1)
        for start in range(0, o.size, self._block):
            self._update_block(o[start : start + self._block], g[start : start + self._block])

    def _update_block(self, o: np.ndarray, g: np.ndarray) -> None:
        m = o.size
        self._count += m
        d64, g64 = self._d64[:m], self._g64[:m]
        with np.errstate(all="ignore"):
            d: np.ndarray
            r: np.ndarray
            if o.dtype == np.float32 and g.dtype == np.float32:
                # The float32 difference is exact when o and g are within a factor 2
                # (Sterbenz) and off by one rounding otherwise: far below any threshold.
                d = self._d32[:m]
                np.subtract(o, g, out=d)
                np.copyto(d64, d)
                np.copyto(g64, g)
                r = self._r32[:m]
            else:
                np.copyto(d64, o, casting="unsafe")
                np.copyto(g64, g, casting="unsafe")
                np.subtract(d64, g64, out=d64)
                d = d64
                r = np.empty(m, np.float64)
            dd, gg, gd = _dot64(d64, d64), _dot64(g64, g64), _dot64(g64, d64)
            if not np.isfinite(dd + gg + gd):
                self._nonfinite_block(o, g)
                return
            self._dd += dd
            self._gg += gg
            self._gd += gd
            self._max_abs = max(self._max_abs, float(d.max()), -float(d.min()))
            np.divide(d, g, out=r)
            # fmax/fmin skip the NaN of 0/0 (equal zeros), keep the inf of x/0
            self._max_rel = max(self._max_rel, float(np.fmax.reduce(r)), -float(np.fmin.reduce(r)))

    def _nonfinite_block(self, o: np.ndarray, g: np.ndarray) -> None:
        # Rare path: count the bad elements, then account for the finite pairs only.
        ok_o, ok_g = np.isfinite(o), np.isfinite(g)
        self._bad_o += int(o.size - np.count_nonzero(ok_o))
        self._bad_g += int(g.size - np.count_nonzero(ok_g))
        keep = ok_o & ok_g
        self._count -= o.size
        if np.any(keep):
            sub = ElementAccumulator(self._block)
            sub._update_block(o[keep], g[keep])
            self._merge(sub)

    def _merge(self, other: ElementAccumulator) -> None:
        self._dd += other._dd
        self._gg += other._gg
        self._gd += other._gd
        self._count += other._count
        self._max_abs = max(self._max_abs, other._max_abs)
        self._max_rel = max(self._max_rel, other._max_rel)

    def result(self) -> ElementStats:
        """The figures so far (the accumulator stays usable)."""
        dd, gg, gd = self._dd, self._gg, self._gd
        oo, og = gg + 2.0 * gd + dd, gg + gd
        if gg > 0:
            l2 = float(np.sqrt(dd) / np.sqrt(gg))
        else:
            l2 = 0.0 if dd == 0 else float("inf")
        if gg > 0 and oo > 0:
            cosine = float(np.clip(og / (np.sqrt(oo) * np.sqrt(gg)), -1.0, 1.0))
        else:
            cosine = 1.0 if oo == gg == 0 else 0.0
        return ElementStats(
            count=self._count,
            max_abs=self._max_abs,
            max_rel=self._max_rel,
            l2_delta=l2,
            cosine=cosine,
            golden_norm=float(np.sqrt(gg)),
            nonfinite_obtained=self._bad_o,
            nonfinite_golden=self._bad_g,
        )


def element_stats(obtained: np.ndarray, golden: np.ndarray) -> ElementStats:
    """:class:`ElementStats` of two whole arrays."""
    acc = ElementAccumulator()
    acc.update(np.asarray(obtained), np.asarray(golden))
    return acc.result()


def is_classifier(sample_shape: Sequence[int], dtype: np.dtype) -> bool:
    """Whether an output *can* hold per-class scores: float ``(N, C)`` with C >= 2,
    or an integer ``(N,)`` of predicted class indices (an ArgMax output)."""
    if np.issubdtype(dtype, np.floating):
        return len(sample_shape) == 1 and sample_shape[0] >= 2
    return bool(np.issubdtype(dtype, np.integer)) and len(sample_shape) == 0


#: output names that say "class scores" by themselves, matched case-insensitively against the name's last part
#: (after ``/``, ``:`` or ``.``): ``logits``, ``probs``, ``probabilities`` (optionally ``cls_``/``class_`` before,
#: a number after), ``cls_scores``, ``class_scores``; a bare ``scores`` is not one (detectors' box scores)
CLASS_SCORE_NAME = re.compile(r"(?:(?:cls|class)_?)?(?:logits|probs|probabilities)(?:_?\d+)?"
                              r"|(?:cls|class)_?scores(?:_?\d+)?", re.IGNORECASE)


def named_like_class_scores(name: str | None) -> bool:
    """Whether an output's name says it holds class scores (:data:`CLASS_SCORE_NAME`)."""
    return bool(name) and CLASS_SCORE_NAME.fullmatch(re.split(r"[/:.]", str(name))[-1]) is not None


def looks_like_class_scores(batch: np.ndarray, max_label: int | None, name: str | None = None) -> bool:
    """Detection of an undeclared classifier output, from its first batch.

    Integer ``(N,)`` outputs are class indices (ArgMax).  A float ``(N, C)``
    output is taken as class scores only with evidence beyond its shape:
    rows that are probabilities (a Softmax output), a labelled golden
    dataset whose labels index into C, or its name (``logits``, ``probs``,
    ``probabilities``, ``class_scores``, ``cls_scores``: see
    :func:`named_like_class_scores`).  Boxes, embeddings and regression
    heads have the same shape; declare real classifiers with ``classifier=``.
    """
    arr = np.asarray(batch)
    if not is_classifier(arr.shape[1:], arr.dtype):
        return False
    if np.issubdtype(arr.dtype, np.integer):
        return True
    from pytest_trt.compare.distribution import looks_like_probabilities

    return (named_like_class_scores(name) or looks_like_probabilities(arr)
            or (max_label is not None and 0 <= max_label < arr.shape[1]))


def top1(batch: np.ndarray) -> np.ndarray:
    """Predicted class per sample (argmax of the scores, or a copy of the indices themselves).

    Always a new array: a batch may be a reused buffer (a workspace, an engine's output binding).
    """
    arr = np.asarray(batch)
    if arr.ndim == 1:
        return np.array(arr, dtype=np.int64, copy=True)
    return np.asarray(np.argmax(arr, axis=-1), dtype=np.int64)


def agreement(obtained_top1: np.ndarray, golden_top1: np.ndarray) -> float:
    """Fraction of samples whose predicted class equals the golden's."""
    return float(np.mean(obtained_top1 == golden_top1)) if obtained_top1.size else 1.0


def accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples predicted as their label."""
    return float(np.mean(predicted == labels)) if labels.size else 1.0


@dataclass(frozen=True)
class TagMetrics:
    """Classifier figures restricted to the samples carrying ``tag``."""

    tag: str
    count: int
    agreement: float
    accuracy: float | None
    golden_accuracy: float | None

    @property
    def accuracy_drop(self) -> float | None:
        """obtained minus golden accuracy (negative: worse), as a fraction."""
        if self.accuracy is None or self.golden_accuracy is None:
            return None
        return self.accuracy - self.golden_accuracy


def split_tags(tags: Sequence[str]) -> dict[str, np.ndarray]:
    """Tag -> indices of its samples; a sample may carry several, comma separated."""
    groups: dict[str, list[int]] = {}
    for i, text in enumerate(tags):
        for tag in (t.strip() for t in text.split(",")):
            if tag:
                groups.setdefault(tag, []).append(i)
    return {tag: np.asarray(idx, dtype=np.int64) for tag, idx in sorted(groups.items())}


def per_tag(
    obtained_top1: np.ndarray,
    golden_top1: np.ndarray,
    labels: np.ndarray | None,
    tags: Sequence[str],
) -> tuple[TagMetrics, ...]:
    """Agreement and accuracy per tag (e.g. ``edge``, ``past-error``)."""
    out = []
    for tag, idx in split_tags(tags).items():
        o, g = obtained_top1[idx], golden_top1[idx]
        acc = accuracy(o, labels[idx]) if labels is not None else None
        gacc = accuracy(g, labels[idx]) if labels is not None else None
        out.append(TagMetrics(tag, int(idx.size), agreement(o, g), acc, gacc))
    return tuple(out)
