"""INT8 sensitivity: per-tensor quantization error of a calibrated config, and the search for nodes to leave in float.

* :mod:`.tensor_errors`: the float model and the config's Q/DQ model run side by side on a golden dataset, every
  quantized activation exposed, streamed batch by batch; weights dequantized; tensors ranked by SQNR;
* :mod:`.search`: the smallest prefix of that ranking whose exclusion (``Calibration.exclude_nodes``) passes the
  golden's thresholds again, each candidate built and run for real;
* :mod:`.pin`: the resulting config written as a TOML pin that ``BuildConfig.from_toml`` loads;
* :mod:`.cli`: ``pytest-trt calib errors`` and ``pytest-trt calib search``.

Importing this package imports neither numpy nor onnxruntime.
"""
