"""An outputs-only check knows the config and the dataset, not the backend or the device: those fields of the
golden's provenance are unknown on its side and must neither taint it nor be reported as differences.
Fields it does know (config hash, ONNX hash, dataset) are still compared."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from golden_engines import OrtEngine

from pytest_trt.config import BuildConfig
from pytest_trt.errors import GoldenTainted
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.provenance import ProvenancePolicy
from pytest_trt.golden.store import GoldenFile
from pytest_trt.golden.workflow import CheckResult, GoldenCheck, UpdateResult

MakeGolden = Callable[..., GoldenCheck]


@pytest.fixture
def approved(golden: MakeGolden, make_config: Callable[..., BuildConfig], dataset: GoldenDataset,
             golden_dir: Path) -> tuple[BuildConfig, dict[str, np.ndarray]]:
    """A golden approved from a real engine (backend, version and device known), and that engine's outputs."""
    engine = OrtEngine(make_config(), device="approval-cpu")
    assert isinstance(golden(update=True, approve="from the engine").check(engine, dataset=dataset), UpdateResult)
    with GoldenFile(golden_dir / "tiny.h5") as g:
        prov = g["tiny"].provenance
        assert (prov.backend, prov.device) == ("onnxruntime", '{"kind":"cpu","name":"approval-cpu"}')
    return engine.config, engine.run({"x": dataset.inputs["x"]})


@pytest.mark.parametrize("mode", ["compare", "fail"])
def test_outputs_only_check_is_not_tainted_by_fields_it_cannot_know(
        golden: MakeGolden, approved: tuple[BuildConfig, dict[str, np.ndarray]], mode: str) -> None:
    config, outputs = approved
    result = golden(provenance=ProvenancePolicy(mode), config_provider=lambda: config).check(outputs)
    assert isinstance(result, CheckResult)
    assert result.verdict.provenance == () and result.note is None


def test_outputs_only_check_still_compares_the_fields_it_knows(
        golden: MakeGolden, approved: tuple[BuildConfig, dict[str, np.ndarray]],
        make_config: Callable[..., BuildConfig]) -> None:
    _, outputs = approved
    other = make_config(seed=1)  # same name, another ONNX file: config and ONNX hashes differ
    with pytest.raises(GoldenTainted) as info:
        golden(provenance=ProvenancePolicy("fail"), config_provider=lambda: other).check(outputs)
    assert set(info.value.context["fields"]) == {"config_hash", "onnx_sha256"}
