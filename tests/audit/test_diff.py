"""Bundle diff on two real TensorRT-RTX builds that differ in one input profile (max batch 32 vs 64)."""

from __future__ import annotations

from pytest_trt.audit.bundle import write_bundle
from pytest_trt.audit.bundle_diff import changes, diff_bundles
from pytest_trt.audit.verify import verify_bundle


def test_diff_of_two_real_builds_shows_the_real_differences(tmp_path, mnv2, mnv2_batch64, record_of, environment):
    old = verify_bundle(write_bundle(mnv2, tmp_path / "a", record=record_of(mnv2), environment=environment).path)
    new = verify_bundle(write_bundle(mnv2_batch64, tmp_path / "b", record=record_of(mnv2_batch64),
                                     environment=environment).path)
    diff = diff_bundles(old, new)
    assert not diff.is_empty
    paths = {c.path: (c.old, c.new) for c in diff.config}
    assert paths["pinned.profiles.0.input.max.0"] == (32, 64)
    assert paths["effective.profiles.0.input.max.0"] == (32, 64)
    assert {c.path for c in diff.build} >= {"config_hash", "engine_sha256", "engine_bytes"}
    assert diff.environment == () and diff.packages == ()
    text = diff.render()
    # what the builder did differently, from the real logs (counts differ between TensorRT-RTX 1.4 and 1.7)
    rec_old, rec_new = record_of(mnv2), record_of(mnv2_batch64)
    expected = ["activation:", "tactic changes"]
    if len(rec_old.layers) != len(rec_new.layers):  # 19 -> 20 with TensorRT-RTX 1.7; 1.4 has 20 in both
        expected.append(f"engine layers: {len(rec_old.layers)} -> {len(rec_new.layers)}")
    if {tuple(sorted(x.origins)) for x in rec_old.fusions} != {tuple(sorted(x.origins)) for x in rec_new.fusions}:
        expected += ["fusions gained", "fusions lost"]
    for line in expected:
        assert line in text, text
    assert "build seconds (information only)" in text
    assert diff.to_dict()["record"] is not None


def test_identical_bundles_have_no_differences(tmp_path, mnv2, record_of, environment):
    a = verify_bundle(write_bundle(mnv2, tmp_path / "a", record=record_of(mnv2), environment=environment).path)
    diff = diff_bundles(a, a)
    assert diff.is_empty and diff.render().endswith("no differences")


def test_environment_and_package_changes_are_reported(tmp_path, mnv2, record_of, environment):
    other = {**environment, "pip_freeze": [*environment["pip_freeze"], "newpkg==1.0"],
             "cuda": {**environment["cuda"], "driver": "570.86"}}
    a = verify_bundle(write_bundle(mnv2, tmp_path / "a", record=record_of(mnv2), environment=environment).path)
    b = verify_bundle(write_bundle(mnv2, tmp_path / "b", record=record_of(mnv2), environment=other).path)
    diff = diff_bundles(a, b)
    assert [c.render() for c in diff.environment] == ["cuda.driver: absent -> 570.86"]
    assert [c.render() for c in diff.packages] == ["newpkg: absent -> 1.0"]
    assert diff.build == () and diff.config == ()


def test_changes_flattens_nested_values():
    got = changes({"a": {"b": [1, 2]}, "onnx": "x"}, {"a": {"b": [1, 3]}, "onnx": "y"}, ignore=frozenset({"onnx"}))
    assert [(c.path, c.old, c.new) for c in got] == [("a.b.1", 2, 3)]
