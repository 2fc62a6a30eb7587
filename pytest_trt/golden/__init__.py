"""Golden snapshots: HDF5 store, check/update workflow, approvals and history.

Submodules are imported on use; importing this package imports nothing heavy
(the pytest layer, ``pytest_trt.pytest_plugin.golden``, must load without h5py).

Layout: ``workflow`` (``GoldenCheck.check``: check or approved update) runs ``verifying``
(check mode) or ``updating`` (update mode) and ``timing``; all three share ``running`` (the
dataset through the engine, batch by batch, into :mod:`pytest_trt.compare.accumulate`) and
``results`` (settings, the test's scope, results, the regression failure), and none imports ``workflow``.
``layout``/``store``/``writers``/``atomic`` hold the HDF5 file; ``integrity`` checks its bytes before h5py
reads them (with ``digest_file``, ``blocks`` and ``probe``) and ``array_digests`` its arrays within a check's read;
``dataset``/``feeds`` hold the inputs, ``provenance``, ``structure``, ``approvals`` and ``show`` the rest.
The approval log is a hash chain (``chain``) of lines signed with SSH keys (``signing``); ``signoff`` counts a
generation's distinct allowed signers for a check, ``approve`` co-signs and verifies the log for the CLI.
Comparing (metrics, the rule table of the verdict, the failure text) is :mod:`pytest_trt.compare`.

Public entry points:

* :class:`pytest_trt.golden.workflow.GoldenCheck` (the ``trt_golden`` fixture)
* :class:`pytest_trt.golden.dataset.GoldenDataset` (``from_arrays``, ``from_directory``; ``pytest_trt.GoldenDataset``)
* :func:`pytest_trt.golden.polygraphy_import.load_polygraphy_inputs` / ``load_polygraphy_outputs``
* :func:`pytest_trt.golden.updating.create_golden`
* :class:`pytest_trt.golden.store.GoldenFile` (read-only view)
* :func:`pytest_trt.golden.show.golden_show` / ``golden_show_json``
"""
