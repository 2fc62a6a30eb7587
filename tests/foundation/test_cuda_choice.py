"""Which CUDA binding the GPU runner uses, and how it picks an optimization profile (no GPU needed)."""

from __future__ import annotations

import importlib.util

import pytest

from pytest_trt.backends import cudaapi
from pytest_trt.backends.trt_runner import select_profile
from pytest_trt.errors import EngineNotRunnable, InputMismatch


def _installed(monkeypatch, *modules):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name in modules else (None if name in ("pycuda", "cuda")
                                                                           else real(name, *a)))


def test_pycuda_is_preferred_then_cuda_python(monkeypatch):
    monkeypatch.delenv(cudaapi.ENV, raising=False)
    _installed(monkeypatch, "pycuda", "cuda")
    assert cudaapi.available() == ("pycuda", "cuda-python")
    _installed(monkeypatch, "cuda")
    assert cudaapi.available() == ("cuda-python",)


def test_no_binding_or_a_wrong_name_says_what_to_install(monkeypatch):
    monkeypatch.delenv(cudaapi.ENV, raising=False)
    _installed(monkeypatch)
    with pytest.raises(EngineNotRunnable, match=r"neither pycuda nor cuda-python is installed: pip install"):
        cudaapi.load()
    with pytest.raises(EngineNotRunnable, match=r"'pycuda' was asked for but is not installed \(installed: none\)"):
        cudaapi.load("pycuda")
    monkeypatch.setenv(cudaapi.ENV, "cupy")
    with pytest.raises(EngineNotRunnable, match=r"PYTEST_TRT_CUDA='cupy' names no CUDA binding; choose one of pycuda, "
                                                r"cuda-python"):
        cudaapi.load()


PROFILES = [
    {"x": ((1, 3, 8, 8), (8, 3, 8, 8)), "mask": ((1, 8), (8, 8))},
    {"x": ((9, 3, 8, 8), (64, 3, 8, 8)), "mask": ((9, 8), (64, 8))},
    {"x": ((1, 3, 16, 16), (4, 3, 32, 32)), "mask": ((1, 8), (4, 8))},
    {"x": ((1, 3, 8, 8), (64, 3, 8, 8)), "mask": ((1, 8), (64, 8))},  # overlaps 0 and 1: never chosen first
]


@pytest.mark.parametrize(("shapes", "expected"), [
    ({"x": (1, 3, 8, 8), "mask": (1, 8)}, 0),
    ({"x": (8, 3, 8, 8), "mask": (8, 8)}, 0),
    ({"x": (9, 3, 8, 8), "mask": (9, 8)}, 1),
    ({"x": (64, 3, 8, 8), "mask": (64, 8)}, 1),
    ({"x": (2, 3, 20, 31), "mask": (2, 8)}, 2),
    ({"x": (33, 3, 8, 8), "mask": (33, 8)}, 1),
])
def test_the_first_profile_holding_every_shape_is_chosen(shapes, expected):
    assert select_profile(PROFILES, shapes) == expected


def test_shapes_fitting_no_profile_list_them():
    with pytest.raises(InputMismatch, match=r"fit none of the engine's optimization profiles \(profile 0: mask "
                                            r"\(1, 8\)\.\.\(8, 8\), x \(1, 3, 8, 8\)\.\.\(8, 3, 8, 8\); profile 1"):
        select_profile(PROFILES, {"x": (9, 3, 8, 8), "mask": (65, 8)})  # mask batch beyond every profile
    with pytest.raises(InputMismatch):
        select_profile(PROFILES, {"x": (4, 3, 8), "mask": (4, 8)})  # wrong rank
