"""Golden snapshots: HDF5 store, check/update workflow, approvals and history.

Submodules are imported on use; importing this package imports nothing heavy
(the pytest layer, ``pytest_trt.pytest_plugin.golden``, must load without h5py).

Public entry points:

* :class:`pytest_trt.golden.workflow.GoldenCheck` (the ``trt_golden`` fixture)
* :class:`pytest_trt.golden.dataset.GoldenDataset` (``from_arrays``, ``from_directory``; ``pytest_trt.GoldenDataset``)
* :func:`pytest_trt.golden.polygraphy_import.load_polygraphy_inputs` / ``load_polygraphy_outputs``
* :func:`pytest_trt.golden.updating.create_golden`
* :class:`pytest_trt.golden.store.GoldenFile` (read-only view)
* :func:`pytest_trt.golden.show.golden_show` / ``golden_show_json``
"""
