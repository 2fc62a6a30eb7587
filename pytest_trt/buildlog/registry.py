"""The one definition of each build-record assertion, and the forms made from it.

An assertion is written once, as a function of a :class:`BuildRecord` decorated with
:func:`record_assertion`::

    @record_assertion
    def assert_no_fusion(record: BuildRecord, *nodes: str, **on: Unpack[Subject]) -> None:
        \"\"\"No engine layer implements all of ``nodes`` together.\"\"\"
        label = subject_label(on)
        ...

That function is the record form (``pytest_trt.buildlog.assert_no_fusion(record, ...)``).
:func:`engine_method` makes the ``Engine`` method and :func:`module_function` the module-level
function acting on the current test's engine (:mod:`pytest_trt.engines.assertions` makes both for
every registered definition).  Their signatures are derived from the definition (``ParamSpec``), so
mypy checks every call of every form against it, and each form carries the definition's docstring
and a runtime signature of its own for ``help()``.

The forms need only a :class:`HasRecord` (a ``record`` and a ``label``), so this module sits below
``Engine`` and names no engine type.

``**on: Unpack[Subject]`` is part of every definition because a ``ParamSpec`` can only carry
keywords, never add them: ``label`` (the name failure messages give the engine) is meaningful
on the record and Engine forms, ``engine`` (which engine) on the module-level form.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypedDict

if TYPE_CHECKING:
    from .record import BuildRecord

P = ParamSpec("P")

#: name -> definition, in definition order; filled as the defining modules load
#: (``pytest_trt.buildlog.assertions``, ``pytest_trt.buildlog.calibration_assertions``)
REGISTRY: dict[str, Callable[..., None]] = {}

DEFAULT_LABEL = "engine"


class HasRecord(Protocol):
    """What every form needs of the engine it checks: a record and a label (``Engine`` has both)."""

    @property
    def record(self) -> BuildRecord: ...

    @property
    def label(self) -> str: ...


class Subject(TypedDict, total=False):
    """The keywords every form accepts besides the assertion's own parameters."""

    #: the name failure messages give the engine (default: the Engine's label, or "engine" for a bare record)
    label: str
    #: module-level form only: the engine to check instead of the current test's one
    engine: HasRecord | None


def record_assertion(fn: Callable[Concatenate[BuildRecord, P], None]) -> Callable[Concatenate[BuildRecord, P], None]:
    """Register ``fn`` (the record form, returned unchanged) as the one definition of an assertion."""
    if not fn.__name__.startswith("assert_"):
        raise ValueError(f"record assertion {fn.__qualname__} must be named assert_<what>")
    if fn.__name__ in REGISTRY:
        raise ValueError(f"record assertion {fn.__name__} is defined twice "
                         f"({REGISTRY[fn.__name__].__module__} and {fn.__module__})")
    REGISTRY[fn.__name__] = fn
    fn.__signature__ = form_signature(fn, first="record", keywords=("label",))  # type: ignore[attr-defined]
    return fn


def subject_label(on: Subject) -> str:
    """The label a definition puts in its messages; refuses ``engine=`` (which only the module form takes)."""
    if "engine" in on:
        raise TypeError("engine= selects the engine of the module-level form (pytest_trt.assert_...); "
                        "a record or Engine method checks its own record: pass label= to name it")
    return on.get("label", DEFAULT_LABEL)


def engine_method(fn: Callable[Concatenate[BuildRecord, P], None]) -> Callable[Concatenate[HasRecord, P], None]:
    """The method form of ``fn``: ``engine.assert_x(...)`` checks ``engine.record`` under ``engine.label``."""

    def method(self: HasRecord, /, *args: P.args, **kwargs: P.kwargs) -> None:
        __tracebackhide__ = True
        kwargs.setdefault("label", self.label)
        fn(self.record, *args, **kwargs)

    return present(method, fn, first="self", keywords=())


def module_function(fn: Callable[Concatenate[BuildRecord, P], None],
                    find: Callable[[HasRecord | None], HasRecord]) -> Callable[P, None]:
    """The module-level form of ``fn``: checks the engine ``find`` returns (the current test's, or ``engine=``)."""

    def function(*args: P.args, **kwargs: P.kwargs) -> None:
        __tracebackhide__ = True
        engine = find(kwargs.pop("engine", None))  # type: ignore[arg-type]
        kwargs.setdefault("label", engine.label)
        fn(engine.record, *args, **kwargs)

    return present(function, fn, first=None, keywords=("engine",))


def present(form: Callable[P, None], fn: Callable[..., None], *, first: str | None,
            keywords: tuple[str, ...]) -> Callable[P, None]:
    """Give a generated ``form`` the name and docstring of the definition ``fn``, and a signature for ``help()``.

    The signature is ``fn``'s with its record parameter renamed ``first`` (dropped when None) and its
    ``**on`` replaced by the ``keywords`` of :class:`Subject` this form documents.
    """
    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(form, attribute, getattr(fn, attribute))
    form.__signature__ = form_signature(fn, first=first, keywords=keywords)  # type: ignore[attr-defined]
    form.__definition__ = fn  # type: ignore[attr-defined]
    return form


_SUBJECT_PARAMETERS = {
    "label": inspect.Parameter("label", inspect.Parameter.KEYWORD_ONLY, annotation="str", default=DEFAULT_LABEL),
    "engine": inspect.Parameter("engine", inspect.Parameter.KEYWORD_ONLY, annotation="Engine | None", default=None),
}


def form_signature(fn: Callable[..., None], *, first: str | None, keywords: tuple[str, ...]) -> inspect.Signature:
    """``fn``'s signature as one form shows it (see :func:`present`)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    own = [p for p in params[1:] if p.kind is not inspect.Parameter.VAR_KEYWORD and p.name not in _SUBJECT_PARAMETERS]
    record = params[0]
    head = [] if first is None else [
        record if first == record.name else record.replace(name=first, annotation=inspect.Parameter.empty)]
    return sig.replace(parameters=[*head, *own, *(_SUBJECT_PARAMETERS[k] for k in keywords)])


def definition_of(form: Callable[..., Any]) -> Callable[..., None]:
    """The registered definition a generated form (or the record form itself) was made from."""
    definition: Callable[..., None] = getattr(form, "__definition__", form)
    return definition
