"""Engines for tests: from a pinned config to an :class:`~pytest_trt.engines.engine.Engine` a test can use.

* :mod:`.provider`      EngineProvider: engines from this session, the cache or a build
* :mod:`.cache`         the content-addressed engine cache
* :mod:`.record_store`  the parsed build record kept beside a cache entry
* :mod:`.engine`        Engine: config, build result, record, runner, ``run``, ``benchmark``
* :mod:`.assertions`    the Engine methods and module-level functions made from each record assertion
* :mod:`.current`       which engines the running test uses
* :mod:`.skipping`      skips for engines this machine cannot run
* :mod:`.benchmark`     latency and throughput measurement

Nothing is imported here: the pytest hooks import only the modules they need.
"""
