"""Each record assertion is defined once (``@record_assertion``) and reached through three forms:
the record function, the ``Engine`` method and the module-level function on the current test's engine."""

from __future__ import annotations

import ast
import inspect
import pydoc
from pathlib import Path
from typing import Any

import pytest

import pytest_trt
import pytest_trt.engines.assertions as module_forms
from pytest_trt import buildlog
from pytest_trt.buildlog import registry
from pytest_trt.buildlog.record import BuildRecord, Layer
from pytest_trt.engines.current import begin_test, current_engine, end_test
from pytest_trt.engines.engine import Engine

#: the public assertions, spelled out independently of the registry
PUBLIC = ("assert_fused", "assert_no_fusion", "assert_precision", "assert_layer_count", "assert_warning",
          "assert_no_warning", "assert_calibration", "assert_dynamic_range", "assert_int8",
          "assert_calibration_coverage")
RECORD_FORM_MODULES = {"pytest_trt.buildlog.assertions", "pytest_trt.buildlog.calibration_assertions"}


def _engine(record: BuildRecord, label: str) -> Engine:
    """A real Engine whose record and label are already computed (its cached properties' values)."""
    engine = Engine.__new__(Engine)
    engine.__dict__.update(record=record, label=label)
    return engine


@pytest.fixture(scope="module")
def rtx(corpus: Path) -> BuildRecord:
    return buildlog.read_log(corpus / "log_rtx1.7.1_mobilenet_v2_detailed.txt")


def test_every_public_assertion_is_registered_with_all_three_forms() -> None:
    assert tuple(registry.REGISTRY) == PUBLIC  # definition order: the six of assertions.py, then calibration
    for name in PUBLIC:
        definition = registry.REGISTRY[name]
        assert definition.__module__ in RECORD_FORM_MODULES
        assert getattr(buildlog.assertions, name) is definition
        method, function = getattr(Engine, name), getattr(pytest_trt, name)
        assert registry.definition_of(method) is definition and registry.definition_of(function) is definition
        assert function is getattr(module_forms, name)
        assert name in pytest_trt.__all__
    for name in PUBLIC:
        assert name in buildlog.__all__ and getattr(buildlog, name) is registry.REGISTRY[name]
        assert name in dir(pytest_trt) and name in dir(buildlog)


def _declared(tree: ast.Module) -> tuple[list[str], list[str]]:
    """(EngineAssertions methods, module-level functions) the TYPE_CHECKING block of a module declares."""
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    cls = next(n for n in block.body if isinstance(n, ast.ClassDef) and n.name == "EngineAssertions")

    def names(body: list[ast.stmt]) -> list[str]:
        return [t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]

    return names(cls.body), names(block.body)


def test_the_typed_declarations_are_the_registry() -> None:
    """mypy's view of the forms (the TYPE_CHECKING block of pytest_trt.engines.assertions) names every assertion."""
    methods, functions = _declared(ast.parse(Path(module_forms.__file__).read_text(encoding="utf-8")))
    assert methods == functions == list(registry.REGISTRY)


def test_a_failing_engine_property_keeps_its_own_error() -> None:
    """Engine's lookup of missing names (which loads the assertion methods) hides no property's AttributeError."""

    class Broken(Engine):
        @property
        def label(self) -> str:
            raise AttributeError("the config has no name")

    with pytest.raises(AttributeError, match="the config has no name"):
        Broken.__new__(Broken).label  # noqa: B018
    with pytest.raises(AttributeError, match="'Engine' object has no attribute 'nope'"):
        Engine.__new__(Engine).nope  # noqa: B018


@pytest.mark.parametrize("name", PUBLIC)
def test_each_form_shows_the_definitions_docstring_and_its_own_signature(name: str) -> None:
    definition = registry.REGISTRY[name]
    first_line = definition.__doc__.strip().splitlines()[0]
    own = [p for p in inspect.signature(definition).parameters if p not in ("record", "label")]
    forms = {"record": (definition, ["record", *own, "label"]), "method": (getattr(Engine, name), ["self", *own]),
             "module": (getattr(pytest_trt, name), [*own, "engine"])}
    for form, want in forms.values():
        assert form.__name__ == name
        assert first_line in pydoc.render_doc(form)
        assert list(inspect.signature(form).parameters) == want, form


def test_the_three_forms_fail_with_one_message(rtx: BuildRecord) -> None:
    engine = _engine(rtx, "mnv2 v1 [0123456789ab]")
    want = ("mnv2 v1 [0123456789ab]: expected 'block1/conv_dw', 'block1/relu6' NOT to be fused, "
            "but 1 layer(s) hold all of them:")
    texts = []
    token = begin_test([engine])
    try:
        for call in (lambda: buildlog.assert_no_fusion(rtx, "block1/conv_dw", "block1/relu6", label=engine.label),
                     lambda: engine.assert_no_fusion("block1/conv_dw", "block1/relu6"),
                     lambda: pytest_trt.assert_no_fusion("block1/conv_dw", "block1/relu6"),
                     lambda: pytest_trt.assert_no_fusion("block1/conv_dw", "block1/relu6", engine=engine)):
            with pytest.raises(AssertionError) as info:
                call()
            texts.append(str(info.value))
    finally:
        end_test(token)
    assert texts[0].startswith(want) and "__myl_CorrMulAddMaxMin_myl0_3" in texts[0]
    assert texts == [texts[0]] * 4


def test_forms_pass_their_arguments_through(rtx: BuildRecord) -> None:
    """Positional and keyword parameters of the definition reach it unchanged in every form."""
    engine = _engine(rtx, "mnv2")
    n = len(rtx.layers)
    engine.assert_layer_count(min=n, max=n)
    engine.assert_precision("block1/conv_dw", "fp32")
    pytest_trt.assert_layer_count(n, n, engine=engine)
    with pytest.raises(AssertionError, match=rf"^mnv2: expected <= {n - 1} engine layers, got {n} "):
        engine.assert_layer_count(max=n - 1)
    with pytest.raises(AssertionError, match=rf"^other: expected >= {n + 1} engine layers, got {n} "):
        pytest_trt.assert_layer_count(min=n + 1, engine=engine, label="other")
    with pytest.raises(AssertionError, match="^mnv2: expected 'block1/conv_dw' in Half, but 1 of 1 layer"):
        engine.assert_precision("block1/conv_dw", "fp16")


def test_the_module_form_checks_the_current_tests_engine(rtx: BuildRecord) -> None:
    fused = BuildRecord(source="test", layers=(Layer("cr", "Convolution", origins=("c", "r")),))
    apart = BuildRecord(source="test", layers=(Layer("c", "Convolution", origins=("c",)),
                                               Layer("r", "Activation", origins=("r",))))
    token = begin_test([_engine(apart, "apart")])
    try:
        pytest_trt.assert_no_fusion("c", "r")
        with pytest.raises(AssertionError, match="^fused: expected 'c', 'r' NOT to be fused"):
            pytest_trt.assert_no_fusion("c", "r", engine=_engine(fused, "fused"))
        with pytest.raises(AssertionError, match="^apart: expected 'c', 'r' fused into one layer"):
            pytest_trt.assert_fused("c", "r")
    finally:
        end_test(token)


@pytest.mark.parametrize("call", [
    lambda r, e: buildlog.assert_fused(r, "c", "r", engine=e),
    lambda r, e: e.assert_fused("c", "r", engine=e),
])
def test_engine_keyword_is_refused_outside_the_module_form(call: Any) -> None:
    record = BuildRecord(source="test", layers=(Layer("cr", "Convolution", origins=("c", "r")),))
    with pytest.raises(TypeError, match="engine= selects the engine of the module-level form"):
        call(record, _engine(record, "x"))


def test_a_new_assertion_needs_one_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    """What adding an assertion takes: the decorated record function; the forms are derived from it."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))

    @registry.record_assertion
    def assert_layers_named(record: BuildRecord, prefix: str, **on: Any) -> None:
        """Every layer's name starts with ``prefix``."""
        label = registry.subject_label(on)
        bad = [layer.name for layer in record.layers if not layer.name.startswith(prefix)]
        assert not bad, f"{label}: layers not named {prefix}*: {bad}"

    record = BuildRecord(source="test", layers=(Layer("a1", "X"), Layer("b2", "X")))
    method, function = registry.engine_method(assert_layers_named), registry.module_function(
        assert_layers_named, current_engine)
    assert registry.REGISTRY["assert_layers_named"] is assert_layers_named
    with pytest.raises(AssertionError, match=r"^e7: layers not named a\*: \['b2'\]"):
        method(_engine(record, "e7"), "a")
    with pytest.raises(AssertionError, match=r"^e8: layers not named b\*: \['a1'\]"):
        function("b", engine=_engine(record, "e8"))
    assert inspect.signature(function).parameters.keys() == {"prefix", "engine"}
    with pytest.raises(ValueError, match="defined twice"):
        registry.record_assertion(assert_layers_named)
