"""Layer 0, the foundations every other layer may use: nothing here imports pytest_trt beyond ``errors``.

* :mod:`.units`       byte sizes (``"1GiB"``)
* :mod:`.fileio`      atomic writes, directory replace, the one file lock, file sha256
* :mod:`.background`  work on another core, on threads started without waiting for them
* :mod:`.calibration` the INT8 calibration pin, ``Calibration`` (a value: nothing computed)
* :mod:`.hostprobe`   GPUs, CPU and CUDA versions of this machine, probed once per process
"""
