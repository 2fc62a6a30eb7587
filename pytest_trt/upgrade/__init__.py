"""The upgrade review: pair the audit bundles of two runs of one suite and report what changed.

``pytest-trt upgrade-report OLD NEW`` (:mod:`pytest_trt.upgrade.cli`) and
``pytest-trt log diff OLD.log NEW.log``.  Nothing here is imported by the
plugin at load; the pictures are hand-written SVG (no plotting library).
"""
