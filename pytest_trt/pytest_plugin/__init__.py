"""The pytest layer of pytest-trt: one :class:`~pytest_trt.pytest_plugin.session.TrtSession` per run.

``pytest_trt.plugin`` (the ``trt`` entry point) declares the options and fixtures
and registers the session in ``pytest_configure``; the session's hook methods
delegate to one module per concern:

* :mod:`.record`   the typed per-test record (engines used, golden verdicts, build failure)
* :mod:`.session`  TrtSession: provider, golden settings, bundle recorder, hooks
* :mod:`.engines`  the engine provider and what the engine fixtures do with its answers
* :mod:`.golden`   golden settings from the options, the ``trt_golden`` check, refresh/provenance summaries
* :mod:`.audit`    bundles per test, report sections, junit properties, pytest-html links, pins
* :mod:`.devices`  one GPU per pytest-xdist worker
* :mod:`.archive`  the catalog and MLflow push at the end of the session
* :mod:`.channel`  what an xdist worker sends its controller (one channel)
* :mod:`.summary`  the one terminal summary

Nothing here imports tensorrt, onnxruntime, h5py or numpy at load.
"""
