"""The generated forms of the build-record assertions: ``Engine`` methods and module-level functions.

Every assertion is defined once, on a :class:`~pytest_trt.buildlog.record.BuildRecord`, in
:mod:`pytest_trt.buildlog.assertions` or :mod:`pytest_trt.buildlog.calibration_assertions`
(``@record_assertion``, :mod:`pytest_trt.buildlog.registry`).  Importing this module makes its two
other forms for every registered definition:

* :class:`EngineAssertions` (``Engine`` takes its methods): ``trt_engine.assert_no_fusion(...)``;
* module-level functions: ``assert_no_fusion("block1/conv_dw", "block1/relu6")`` checks the one
  engine the running test uses; ``engine=`` picks another.

Static typing: mypy cannot see attributes made at run time, so the block under ``TYPE_CHECKING``
declares both forms of each assertion, their signatures derived from the definition (``ParamSpec``).
It is the one place besides the definition that names an assertion;
tests/buildlog/test_assertion_registry.py fails when it and the registry differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest_trt.buildlog.assertions as _checks
import pytest_trt.buildlog.calibration_assertions as _calibration
from pytest_trt.buildlog.registry import REGISTRY, engine_method, module_function
from pytest_trt.engines.current import current_engine

if TYPE_CHECKING:
    class EngineAssertions:
        """The record assertions as methods of an object with a ``record`` and a ``label`` (``Engine``)."""

        assert_fused = engine_method(_checks.assert_fused)
        assert_no_fusion = engine_method(_checks.assert_no_fusion)
        assert_precision = engine_method(_checks.assert_precision)
        assert_layer_count = engine_method(_checks.assert_layer_count)
        assert_warning = engine_method(_checks.assert_warning)
        assert_no_warning = engine_method(_checks.assert_no_warning)
        assert_calibration = engine_method(_calibration.assert_calibration)
        assert_dynamic_range = engine_method(_calibration.assert_dynamic_range)
        assert_int8 = engine_method(_calibration.assert_int8)
        assert_calibration_coverage = engine_method(_calibration.assert_calibration_coverage)

    assert_fused = module_function(_checks.assert_fused, current_engine)
    assert_no_fusion = module_function(_checks.assert_no_fusion, current_engine)
    assert_precision = module_function(_checks.assert_precision, current_engine)
    assert_layer_count = module_function(_checks.assert_layer_count, current_engine)
    assert_warning = module_function(_checks.assert_warning, current_engine)
    assert_no_warning = module_function(_checks.assert_no_warning, current_engine)
    assert_calibration = module_function(_calibration.assert_calibration, current_engine)
    assert_dynamic_range = module_function(_calibration.assert_dynamic_range, current_engine)
    assert_int8 = module_function(_calibration.assert_int8, current_engine)
    assert_calibration_coverage = module_function(_calibration.assert_calibration_coverage, current_engine)
else:
    EngineAssertions = type("EngineAssertions", (), {
        "__module__": __name__,
        "__doc__": "The record assertions as methods of an object with a ``record`` and a ``label`` (``Engine``).",
        **{name: engine_method(definition) for name, definition in REGISTRY.items()},
    })

    def _function(definition):
        function = module_function(definition, current_engine)
        function.__module__ = __name__
        return function

    globals().update({name: _function(definition) for name, definition in REGISTRY.items()})
    __all__ = list(REGISTRY)
