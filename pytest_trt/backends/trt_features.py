"""What a TensorRT-family module can do, probed from its API rather than its version.

TensorRT 8.6, 10.x, 11.x and TensorRT-RTX 1.x share the Python API family but
not its members: TensorRT-RTX and TensorRT 11 have no FP16/INT8 builder flags
(strongly typed networks take precision from the ONNX model), TensorRT 10
deprecated EXPLICIT_BATCH (networks are always explicit-batch), only
TensorRT-RTX sets compute-capability targets for ahead-of-time builds.
Probing members (``hasattr(trt.BuilderFlag, "FP16")``) keeps one code path.
The calibration path follows from the same facts (:func:`check_calibration`):
implicit INT8 with calibrators where they are usable, explicit Q/DQ otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

from pytest_trt.common.calibration import EXPLICIT_METHODS, IMPLICIT_CALIBRATORS

if TYPE_CHECKING:
    from pytest_trt.common.calibration import Calibration
    from pytest_trt.config import BuildConfig
    from pytest_trt.errors import UnsupportedOption

#: precision -> builder flags it needs, where the API has precision flags at all.
#: "best" mirrors trtexec --best: every reduced precision the builder may pick.
PRECISION_FLAGS: dict[str, tuple[str, ...]] = {
    "fp32": (),
    "typed": (),
    "tf32": ("TF32",),
    "fp16": ("FP16",),
    "bf16": ("BF16",),
    "int8": ("INT8",),
    "fp8": ("FP8",),
    "best": ("FP16", "BF16", "INT8"),
}


#: Builder flags a strongly typed build refuses.  TensorRT-RTX 1.4 still lists them in
#: BuilderFlag but fails the build ("Parameter check failed, condition:
#: !config.getFlag(BuilderFlag::kFP16)"); 1.7 dropped them.  TensorRT 10 refuses them
#: together with a STRONGLY_TYPED network.  Presence in the enum is therefore not enough.
STRONGLY_TYPED_REFUSES = frozenset(
    {"FP16", "BF16", "FP8", "FP4", "INT8", "INT4", "OBEY_PRECISION_CONSTRAINTS", "PREFER_PRECISION_CONSTRAINTS"}
)


#: (module, highest major.minor) that cannot build INT8 Q/DQ models, with what was measured.
EXPLICIT_INT8_BROKEN: tuple[tuple[str, tuple[int, int], str], ...] = (
    ("tensorrt_rtx", (1, 4),
     "measured with 1.4.0.76 on a Q/DQ MobileNetV2: buildSerializedNetwork fails with a Myelin "
     "'CHECK(dtype == myelinTypeFloat || ...)' internal error; 1.7.1 builds it with Int8 layers"),
)


def _members(enum: object) -> tuple[str, ...]:
    members = getattr(enum, "__members__", None)
    if isinstance(members, dict):
        return tuple(members)
    return tuple(n for n in dir(enum) if n.isupper())


@dataclass(frozen=True)
class Features:
    module: str
    version: str
    builder_flags: tuple[str, ...]
    memory_pools: tuple[str, ...]
    network_flags: tuple[str, ...]
    compute_capabilities: tuple[str, ...]
    hardware_compatibility_levels: tuple[str, ...]
    has_optimization_level: bool
    has_timing_cache: bool
    has_calibrators: bool
    #: precision -> its builder flags, keeping only those this API has (for "best"); made by :func:`probe`
    precision_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)

    @property
    def is_rtx(self) -> bool:
        return self.module == "tensorrt_rtx"

    @property
    def backend_name(self) -> str:
        from pytest_trt.backends.registry import name_of_module

        return name_of_module(self.module)

    @property
    def strongly_typed_only(self) -> bool:
        """Every network is strongly typed (TensorRT-RTX, and TensorRT 11 which has no FP16 flag)."""
        return self.is_rtx or "FP16" not in self.builder_flags

    @property
    def timing_cache_effective(self) -> bool:
        # TensorRT-RTX 1.2 turned every timing-cache call into a deprecated no-op.
        return self.has_timing_cache and not self.is_rtx

    @property
    def use_explicit_batch(self) -> bool:
        # Needed before TensorRT 10; deprecated and ignored from 10.0 on.  TensorRT-RTX
        # numbers its releases 1.x, and its networks are always explicit-batch.
        if self.is_rtx or "EXPLICIT_BATCH" not in self.network_flags:
            return False
        return int(self.version.split(".")[0]) < 10

    @property
    def has_hardware_compatibility(self) -> bool:
        """Whether the builder config's hardware-compatibility level may be set or read.

        TensorRT-RTX (1.4 to 1.7) still lists HardwareCompatibilityLevel, but every get or set
        of ``IBuilderConfig.hardware_compatibility_level`` writes "get/setHardwareCompatibilityLevel()
        is unsupported in TensorRT-RTX" (WARNING) and "Thread context has not been set!"
        (INTERNAL_ERROR) into the build log: probing it would pollute the audit evidence.
        """
        return bool(self.hardware_compatibility_levels) and not self.is_rtx

    @property
    def calibrators_usable(self) -> bool:
        # TensorRT-RTX 1.4 still exports IInt8EntropyCalibrator2, but refuses the INT8 flag.
        return self.has_calibrators and not self.strongly_typed_only

    def usable_flag(self, name: str, *, strongly_typed: bool) -> bool:
        """Whether builder flag ``name`` exists and a build of this kind accepts it."""
        if name not in self.builder_flags:
            return False
        return not (strongly_typed and name in STRONGLY_TYPED_REFUSES)


def probe(trt: ModuleType) -> Features:
    config_type = getattr(trt, "IBuilderConfig", object)
    builder_flags = _members(trt.BuilderFlag)
    return Features(
        module=trt.__name__,
        version=str(getattr(trt, "__version__", "0")),
        builder_flags=builder_flags,
        memory_pools=_members(getattr(trt, "MemoryPoolType", object)),
        network_flags=_members(trt.NetworkDefinitionCreationFlag),
        compute_capabilities=_members(getattr(trt, "ComputeCapability", object)),
        hardware_compatibility_levels=_members(getattr(trt, "HardwareCompatibilityLevel", object)),
        has_optimization_level=hasattr(config_type, "builder_optimization_level"),
        has_timing_cache=hasattr(config_type, "create_timing_cache"),
        has_calibrators=hasattr(trt, "IInt8EntropyCalibrator2"),
        precision_flags={precision: tuple(f for f in wanted if precision != "best" or f in builder_flags)
                         for precision, wanted in PRECISION_FLAGS.items()},
    )


def _major_minor(version: str) -> tuple[int, int]:
    parts = (version.split(".") + ["0"])[:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return (0, 0)


def explicit_int8_broken(f: Features) -> str | None:
    """Why this module cannot build INT8 Q/DQ models, or None."""
    for module, upto, why in EXPLICIT_INT8_BROKEN:
        if f.module == module and _major_minor(f.version) <= upto:
            return why
    return None


def check_calibration(
    calib: Calibration, precision: str, f: Features, product: str, refuse: Callable[[str, str], UnsupportedOption]
) -> str:
    """Refuse a calibration this module cannot honour; return the precision the builder then sees.

    TensorRT <= 10 (INT8 flag, ``IInt8*Calibrator`` classes) calibrates implicit INT8 with a calibrator per
    algorithm: the config's ``precision``.  TensorRT-RTX and TensorRT 11 (strongly typed, no calibrators) build
    the explicit Q/DQ model: ``typed``.
    """
    if f.calibrators_usable:
        if calib.algorithm not in IMPLICIT_CALIBRATORS:
            raise refuse("calibration.algorithm",
                         f"{product} calibrates implicit INT8 with its calibrators: choose one of "
                         f"{', '.join(IMPLICIT_CALIBRATORS)} (not {calib.algorithm!r})")
        if calib.exclude_nodes:
            raise refuse("calibration.exclude_nodes",
                         f"{product} calibrates implicit INT8, where no node can be left out of quantization by "
                         "name; exclude_nodes is honoured by the explicit Q/DQ path (TensorRT-RTX, TensorRT 11, "
                         "ONNX Runtime): build there, or remove exclude_nodes")
        return precision
    if calib.algorithm not in EXPLICIT_METHODS:
        raise refuse("calibration.algorithm",
                     f"{product} has no INT8 calibrators (strongly typed: implicit quantization was removed), so "
                     f"{calib.algorithm!r} cannot run; pytest-trt quantizes the ONNX with explicit Q/DQ nodes "
                     f"instead: choose one of {', '.join(EXPLICIT_METHODS)}")
    broken = explicit_int8_broken(f)
    if broken is not None:
        raise refuse("calibration",
                     f"{product} cannot build INT8 Q/DQ models ({broken}); upgrade to TensorRT-RTX 1.7 "
                     "(pip install 'tensorrt-rtx>=1.7') or build this config with --trt-backend onnxruntime")
    return "typed"


def check_precision(
    f: Features, config: BuildConfig, product: str, refuse: Callable[[str, str], UnsupportedOption]
) -> None:
    """Refuse a precision, calibration or builder flag of ``config`` this module cannot honour, in one pass.

    The precision checked is the one the builder sees: a calibrated config on a strongly typed module is built
    as its Q/DQ model, ``typed``.
    """
    precision = config.precision
    if config.calibration is not None:
        precision = check_calibration(config.calibration, precision, f, product, refuse)
    typed = f.strongly_typed_only or precision == "typed"
    wanted = f.precision_flags[precision]
    missing = [flag for flag in wanted if not f.usable_flag(flag, strongly_typed=typed)]
    if missing or (precision == "best" and not wanted):
        raise refuse(
            f"precision={precision!r}",
            f"{product} has no usable {'/'.join(missing) or 'reduced-precision'} builder flag: it builds strongly "
            "typed networks whose precision comes from the ONNX model's types. Convert the model (e.g. to FP16 "
            "with onnxconverter-common) or quantize it with explicit Q/DQ nodes, then use precision='typed'.",
        )
    if precision == "typed" and not f.strongly_typed_only and "STRONGLY_TYPED" not in f.network_flags:
        raise refuse("precision='typed'", f"{product} has no STRONGLY_TYPED network flag (added in TensorRT 9/10)")
    for flag in config.flags:
        if flag not in f.builder_flags:
            available = sorted(n for n in f.builder_flags if f.usable_flag(n, strongly_typed=typed))
            raise refuse(f"flags[{flag!r}]", f"{product} has no builder flag {flag}; it has: {', '.join(available)}")
        if not f.usable_flag(flag, strongly_typed=typed):
            raise refuse(
                f"flags[{flag!r}]",
                f"{product} refuses {flag} in a strongly typed build: precision comes from the ONNX model's types",
            )
