"""Import Polygraphy ``--save-inputs`` / ``--save-outputs`` JSON (no Polygraphy needed).

Both files hold arrays as base64 ``.npy`` bytes inside JSON objects tagged
``"polygraphy_class": "ndarray"``.  ``--save-inputs`` is a list of feed dicts,
one per iteration; ``--save-outputs`` is a ``RunResults``:
``{"lst": [[runner, [IterationResult{"outputs": {name: LazyArray|LazyNumpyArray{"values": ndarray}}}]]]}``
(``LazyNumpyArray`` up to Polygraphy 0.4x, ``LazyArray`` since).  Iterations
are concatenated on axis 0, so each iteration is a batch of samples.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.errors import GoldenError
from pytest_trt.golden.dataset import GoldenDataset


def _array(obj: Any, where: str) -> np.ndarray:
    if isinstance(obj, dict) and obj.get("polygraphy_class") in ("LazyArray", "LazyNumpyArray"):
        if "values" not in obj:
            raise GoldenError(f"{where}: the array was saved to a separate file by Polygraphy; "
                              "re-save it inline (smaller --save-outputs) to import it")
        obj = obj["values"]
    if not (isinstance(obj, dict) and obj.get("polygraphy_class") == "ndarray" and "array" in obj):
        raise GoldenError(f"{where}: expected a Polygraphy ndarray object, got {str(obj)[:80]!r}")
    try:
        return np.asarray(np.load(io.BytesIO(base64.b64decode(obj["array"])), allow_pickle=False))
    except (ValueError, OSError, EOFError, TypeError) as exc:  # bad base64, empty or truncated .npy, pickles
        raise GoldenError(f"{where}: cannot decode the base64 .npy array ({type(exc).__name__}: {exc}); "
                          "re-save the file with polygraphy run") from None


def _read(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: not UTF-8, not JSON
        raise GoldenError(f"cannot read Polygraphy JSON {str(path)!r}: {type(exc).__name__}: {exc}; give the file "
                          "written by polygraphy run --save-inputs / --save-outputs") from None


def _concat(iterations: Sequence[dict[str, np.ndarray]], what: str) -> dict[str, np.ndarray]:
    names = set(iterations[0])
    for i, it in enumerate(iterations):
        if set(it) != names:
            raise GoldenError(f"{what}: iteration {i} has tensors {sorted(it)}, iteration 0 has {sorted(names)}")
    if not names:
        raise GoldenError(f"{what}: iteration 0 holds no tensors")
    out = {}
    for n in sorted(names):
        parts = [np.atleast_1d(it[n]) for it in iterations]
        shapes = {p.shape[1:] for p in parts}
        if len(shapes) > 1:
            raise GoldenError(f"{what}: tensor {n!r} changes its per-sample shape across iterations "
                              f"({sorted(map(str, shapes))}); iterations must be batches of one shape")
        out[n] = np.concatenate(parts, axis=0)
    return out


def load_polygraphy_inputs(
    path: str | Path, *, labels: Sequence[int] | np.ndarray | None = None, tags: Sequence[str] | None = None
) -> GoldenDataset:
    """A golden dataset from ``polygraphy run --save-inputs FILE``."""
    doc = _read(path)
    if not isinstance(doc, list) or not doc or not all(isinstance(it, dict) for it in doc):
        raise GoldenError(f"{path}: expected a non-empty list of feed dicts (polygraphy run --save-inputs)")
    iterations = [{k: _array(v, f"{path}: iteration {i} input {k!r}") for k, v in it.items()}
                  for i, it in enumerate(doc)]
    arrays = _concat(iterations, str(path))
    try:
        return GoldenDataset.from_arrays(arrays, labels, tags)
    except GoldenError as exc:
        raise GoldenError(f"{path}: {exc.message}") from None


def polygraphy_runners(path: str | Path) -> list[str]:
    """Runner names in a ``--save-outputs`` file."""
    return [name for name, _ in _results(_read(path), path)]


def _results(doc: Any, path: str | Path) -> list[tuple[str, list[Any]]]:
    """``[(runner name, iterations)]``; every entry checked, so later indexing cannot fail."""
    if not isinstance(doc, dict) or doc.get("polygraphy_class") != "RunResults" or not isinstance(doc.get("lst"), list):
        raise GoldenError(f"{path}: not a Polygraphy RunResults file (polygraphy run --save-outputs)")
    out = []
    for i, entry in enumerate(doc["lst"]):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], list)):
            raise GoldenError(f"{path}: RunResults entry {i} is not [runner name, [iterations]]: "
                              f"{json.dumps(entry)[:80]}; re-save the file with polygraphy run --save-outputs")
        out.append((entry[0], entry[1]))
    return out


def load_polygraphy_outputs(path: str | Path, runner: str | None = None) -> dict[str, np.ndarray]:
    """Outputs ``{name: (N, ...)}`` of one runner (the only one, or ``runner``) from ``--save-outputs``."""
    results = _results(_read(path), path)
    names = [name for name, _ in results]
    if runner is None and len(results) != 1:
        raise GoldenError(f"{path}: holds runners {names}; pass runner= to choose one")
    chosen = [entry for entry in results if runner is None or entry[0] == runner]
    if not chosen:
        raise GoldenError(f"{path}: no runner {runner!r}; it holds {names}")
    iterations = []
    for i, it in enumerate(chosen[0][1]):
        outs = it.get("outputs") if isinstance(it, dict) else None
        if not isinstance(outs, dict):
            raise GoldenError(f"{path}: runner {chosen[0][0]!r} iteration {i} has no 'outputs' object; "
                              "re-save the file with polygraphy run --save-outputs")
        iterations.append({k: _array(v, f"{path}: iteration {i} output {k!r}") for k, v in outs.items()})
    if not iterations:
        raise GoldenError(f"{path}: runner {chosen[0][0]!r} has no iterations")
    return _concat(iterations, str(path))
