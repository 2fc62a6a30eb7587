"""Per-version TensorRT log shapes, as data.

Every table row names who printed the line and from which TensorRT version the
shape is seen (versions as in the shared corpus notes: "8.4" means the 8.2.3
corpus log lacks it and the 8.4.1 one has it).  The lexer and the readers only
iterate these tables; adding a dialect is adding a row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# 8.0.3 sometimes prints the timestamp twice when two threads interleave:
# "[01/29/2022-15:09:28] [01/29/2022-15:09:28] [V] [TRT] Importing initializer: b4/read:0"
_DATE = r"(?:\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] )+"


@dataclass(frozen=True)
class Dialect:
    """One line-prefix shape: ``pattern`` ends where the message text starts.

    ``{sev}`` in the pattern stands for the severity: a letter (``V I W E F``) or, with
    ``words=True``, a word (``VERBOSE`` ... ``INTERNAL_ERROR``).  Without it messages count as INFO.
    The shapes must exclude each other (hence the ``(?!\\[TRT\\] )`` guards), so that at most one
    matches a line and the fast scanner in :mod:`.parser` may skip lines on a prefix match alone.
    """

    name: str
    pattern: str
    example: str
    words: bool = False


#: Who printed the line.
DIALECTS: tuple[Dialect, ...] = (
    # trtexec 7.1.3 .. 10.16, a message of the TensorRT library
    Dialect("trtexec-trt", _DATE + r"\[{sev}\] \[TRT\] ",
            "[09/10/2023-12:56:26] [V] [TRT] ConvReluFusion: Fusing Conv_1342 with Relu_1343"),
    # Python trt.Logger from 8.6.1 (and 10.x): note [TRT] before the severity
    Dialect("python-8.6", _DATE + r"\[TRT\] \[{sev}\] ",
            "[04/20/2024-08:48:21] [TRT] [I] Calibration completed in 39.4586 seconds."),
    # trtexec's own messages (8.0 ..)
    Dialect("trtexec", _DATE + r"\[{sev}\] (?!\[TRT\] )",
            "[09/10/2023-12:59:44] [I] Engine built in 207.112 sec."),
    # Python trt.Logger, TensorRT 7.x
    Dialect("python-7", r"\[TensorRT\] {sev}: ", "[TensorRT] VERBOSE: Original: 246 layers", words=True),
    # C++ samples logger of TensorRT 5.x .. 7.0 (no timestamp)
    Dialect("samples", r"\[{sev}\] \[TRT\] ", "[I] [TRT] Starting Calibration with batch size 50."),
    # pytest-trt build.log (one message per ``[SEVERITY] text``, see pytest_trt.artifact)
    Dialect("build.log", r"\[{sev}\] ", "[VERBOSE] ConvReluFusion: Fusing conv1 with relu1", words=True),
    # polygraphy --verbose 0.47 (TensorRT 8.6.1): severity only
    Dialect("polygraphy", r"\[{sev}\] (?!\[TRT\] )",
            "[V] [MemUsageStats] Peak memory usage of TRT CPU/GPU memory allocators: CPU 24 MiB, GPU 16 MiB"),
    # DeepStream wrapper (seen in public text)
    Dialect("deepstream", r"{sev}: \[TRT\]: ",
            "INFO: [TRT]: Reading Calibration Cache for calibrator: EntropyCalibration2", words=True),
    # jetson-inference wrapper (dusty-nv/jetson-inference#1630): no severity at all
    Dialect("jetson", r"\[TRT\] {4}",
            "[TRT]    ConvReluFusion: Fusing inception_4c/3x3 with inception_4c/relu_3x3"),
)

SEVERITY_NAMES: dict[str, str] = {
    "V": "VERBOSE", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "INTERNAL_ERROR",
    "VERBOSE": "VERBOSE", "INFO": "INFO", "WARNING": "WARNING", "ERROR": "ERROR", "INTERNAL_ERROR": "INTERNAL_ERROR",
}
_ALL = {False: "([VIWEF])", True: "(VERBOSE|INFO|WARNING|ERROR|INTERNAL_ERROR)"}
_QUIET = {False: "[VI]", True: "(?:VERBOSE|INFO)"}


#: One timestamp, ASCII digits only: what the scanner skips must be a subset of what :data:`PREFIX_RE` reads
#: as a quiet prefix; a line it does not skip (a doubled or non-ASCII timestamp) goes to the parser as before.
_DATE_SCAN = r"\[[0-9][0-9]/[0-9][0-9]/[0-9]{4}-[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\] "


def prefix_alternatives(*, quiet: bool = False) -> str:
    """All dialects as one alternation; ``quiet`` keeps only VERBOSE and INFO lines (for the scanner).

    Each alternative of the full form holds exactly one group (the severity, or an empty one),
    so ``m.group(m.lastindex)`` is the severity code.  The quiet form matches a subset of the full
    form's VERBOSE/INFO prefixes (one ASCII timestamp), which is all the scanner may skip.
    """
    parts, dated = [], []
    for d in DIALECTS:
        sev = (_QUIET if quiet else _ALL)[d.words]
        body = d.pattern.replace("{sev}", sev)
        if quiet and body.startswith(_DATE):  # the scanner matches the timestamp once, not once per dialect
            dated.append(body[len(_DATE):])
            continue
        parts.append(f"(?:{body})" if "{sev}" in d.pattern or quiet else f"(?:{body}())")
    if dated:
        parts.insert(0, f"(?:{_DATE_SCAN}(?:{'|'.join(dated)}))")
    return "|".join(parts)


def top_level_alternatives(pattern: str) -> list[str]:
    """``pattern`` split at its top-level ``|`` (not inside a group, a class or after a backslash)."""
    out: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a class: skip to its closing bracket ("]" first in the class is literal)
            i += 2 if pattern.startswith("[^", i) else 1
            i += 1 if pattern.startswith("]", i) else 0
            while pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    out.append(pattern[start:])
    return out


def _closing(pattern: str, start: int) -> int:
    """Index of the ``)`` closing the group opened at ``pattern[start]``."""
    depth, i = 0, start
    while True:
        c = pattern[i]
        if c == "\\":
            i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1


def literal_first(alternative: str) -> list[str]:
    """``alternative`` as branches that each start with a literal or a class, matching the same lines.

    The regex engine rejects such a branch on its first character without entering it; a leading
    group or optional part (``(?:A|B)C``, ``(?:X)?Y``, ``[..]*Y``) would be entered on every line.
    """
    for optional, required in (("(?:[A-Za-z0-9]+: )?", "[A-Za-z0-9]+: "), ("[ \\t]*", "[ \\t]+")):
        if alternative.startswith(optional):
            tails = literal_first(alternative[len(optional):])
            return [*tails, f"{required}(?:{by_first_character(tails)})"]
    if alternative.startswith("(?:"):
        end = _closing(alternative, 0)
        rest = alternative[end + 1:]
        if not rest[:1] or rest[:1] not in "?*+{":
            return [b for sub in top_level_alternatives(alternative[3:end]) for b in literal_first(sub + rest)]
    return [alternative]


def by_first_character(branches: list[str]) -> str:
    """One alternation of ``branches`` with those that start with the same literal character merged
    (``F(?:using |oreignNode)``): a line is then rejected after one test per distinct first character."""
    groups: dict[str, list[str]] = {}
    rest: list[str] = []
    for branch in branches:
        n = 2 if branch.startswith("\\") and branch[1:2] in "[](){}.|*+?^$\\" else 1
        if branch[:1] in "[(.^$\\" and n == 1:
            rest.append(branch)  # a class, a group, an escape like \d: kept whole
            continue
        groups.setdefault(branch[:n], []).append(branch[n:])
    merged = [first + (tails[0] if len(tails) == 1 else f"(?:{'|'.join(tails)})") for first, tails in groups.items()]
    return "|".join(merged + rest)


PREFIX_RE = re.compile(prefix_alternatives())


def prefix_first_characters() -> frozenset[str]:
    """Every character a line with a known prefix can start with (a line starting otherwise has none)."""
    out: set[str] = set()
    for d in DIALECTS:
        if d.pattern.startswith("{sev}"):
            out |= {name[0] for name in SEVERITY_NAMES if (len(name) > 1) == d.words}
        elif d.pattern.startswith((_DATE, "\\[")):
            out.add("[")
        else:
            raise ValueError(f"dialect {d.name}: add the characters its prefix can start with")
    return frozenset(out)


PREFIX_FIRST = prefix_first_characters()

# -- message shapes (applied to the text after the prefix) --------------------------------------

#: Fusion lines.  7.x bare ``Fusing A with B`` and ``Fusing convolution weights from A with scale B``;
#: 8.0 onwards ``<Pass>: Fusing A with B`` (``ConstCastFold: Fusing`` in 8.5.2).
FUSION_RE = re.compile(
    r"(?:(?P<pass>[A-Za-z0-9]+): )?Fusing (?:convolution weights from (?P<cw>.+) with scale (?P<cs>.+)"
    r"|(?P<a>.+?) with (?P<b>.+))$"
)
#: 7.1.3 horizontal merge: ``Merging layers: Conv_3 + Relu_4 || Conv_0 + Relu_1``.
MERGE_RE = re.compile(r"Merging layers: (?P<a>.+?) \|\| (?P<b>.+)$")
#: ``Running: ConvReluFusion on X`` (8.4 ..) or ``Running: ConstShuffleFusion`` (8.2.3): understood, not stored.
RUNNING_RE = re.compile(r"Running: \S+(?: on .*)?$")
REMOVING_RE = re.compile(r"Removing (?P<name>.+)$")
#: Layer-count checkpoints, every version: ``Original: 246 layers``, ``After vertical fusions: 120 layers``.
LAYER_COUNT_RE = re.compile(r"(?P<stage>Original|After [^:]+): (?P<n>\d+) layers$")

#: ``ForeignNode {ForeignNode[a...b]} metadata: [ONNX Layer: a]<sep>[ONNX Layer: b]`` (10.14 ..., TensorRT-RTX)
FOREIGN_META_RE = re.compile(r"ForeignNode (?P<name>\{ForeignNode\[.*\]\}) metadata:(?P<meta>.*)$")
#: The separator between ``[ONNX Layer: x]`` entries:
#: U+001E in TensorRT 10, U+001F in TensorRT-RTX 1.7 (and one 10.16.1 JSON), none in RTX 1.4.
ONNX_LAYER_RE = re.compile(r"\[ONNX Layer: (?P<node>[^\x1e\x1f]*?)\](?=\[ONNX Layer: |[\x1e\x1f]|\s*$)")

#: (field of Memory, regex): the last occurrence wins (8.2/8.4 print a [V] value then the final [I] one).
MEMORY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("activation", re.compile(r"Total Activation Memory: (\d+)(?: bytes)?$")),
    ("weights", re.compile(r"Total Weights Memory: (\d+)(?: bytes)?$")),  # 10.x
    ("host_persistent", re.compile(r"Total Host Persistent Memory: (\d+)(?: bytes)?$")),
    ("device_persistent", re.compile(r"Total Device Persistent Memory: (\d+)(?: bytes)?$")),
    ("scratch", re.compile(r"(?:Total|Max) Scratch Memory: (\d+)(?: bytes)?$")),  # "Max" in TensorRT-RTX
)
#: ``[MemUsageStats] Peak memory usage of TRT CPU/GPU memory allocators: CPU 14 MiB, GPU 4096 MiB`` (8.0 .. 10.x)
PEAK_MEMORY_RE = re.compile(
    r"\[MemUsageStats\] Peak memory usage of TRT CPU/GPU memory allocators: CPU (\d+) MiB, GPU (\d+) MiB"
)

#: (timings key, regex with one float group)
TIMING_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("engine_generation_s", re.compile(r"Engine generation completed in ([\d.eE+-]+) seconds")),
    ("engine_built_s", re.compile(r"Engine built in ([\d.eE+-]+) sec")),  # trtexec's own line
    ("engine_build_s", re.compile(r"Finished engine building in ([\d.eE+-]+) seconds")),  # polygraphy
    ("graph_optimization_s", re.compile(r"Graph optimization time: ([\d.eE+-]+) seconds")),  # 8.6 ..
    # .. 8.5
    ("graph_optimization_s", re.compile(r"Graph construction and optimization completed in ([\d.eE+-]+) seconds")),
    ("graph_construction_s", re.compile(r"Graph construction completed in ([\d.eE+-]+) seconds")),  # 10.x
    ("tactic_selection_s", re.compile(r"Formats and tactics selection completed in ([\d.eE+-]+) seconds")),
    ("subgraph_compilation_s", re.compile(r"Subgraph compilation completed in ([\d.eE+-]+) seconds")),  # RTX
    ("calibration_s", re.compile(r"Calibration completed in ([\d.eE+-]+) seconds")),
)

#: Lines about INT8 calibration, kept verbatim (7.0 samples, 8.6 python, DeepStream).
CALIBRATION_RE = re.compile(
    r"\s*(?:Starting Calibration|Calibrated batch|Post Processing Calibration|Calibration completed"
    r"|(?:Writing|Reading) Calibration Cache|Calibration Profile is not defined|Generated calibration scales"
    r"|Missing scale and zero-point)"
)

#: (rank, regex with group ``v``): where a log states the TensorRT version; the highest rank wins.
VERSION_PATTERNS: tuple[tuple[int, re.Pattern[str]], ...] = (
    (4, re.compile(r"TensorRT version: (?P<v>\d+\.\d+\.\d+)")),  # trtexec 8.2 ..
    (3, re.compile(r"TensorRT version: (?P<tag>\d{4,6})$")),  # trtexec 8.0: "TensorRT version: 8003"
    (3, re.compile(r"Loaded Module: tensorrt \| Version: (?P<v>\d+\.\d+\.\d+)")),  # polygraphy
    (2, re.compile(r"libnvinfer_builder_resource\.so\.(?P<v>\d+\.\d+\.\d+)")),  # 10.x library load
    (1, re.compile(r"Calibration Cache for calibrator: TRT-(?P<tag>\d{4,6})-")),
)
#: ``&&&& RUNNING TensorRT.trtexec [TensorRT v8601] # ...``; 10.x adds ``[b48]``.
BANNER_RE = re.compile(
    r"&&&& (?P<result>RUNNING|PASSED|FAILED|WAIVED) TensorRT\.(?P<tool>\w+)(?: \[TensorRT v(?P<tag>\d+)\])?"
)
#: polygraphy 0.47: "[I] PASSED | Runtime: 20.754s | Command: ..."
POLYGRAPHY_RESULT_RE = re.compile(r"(?P<result>PASSED|FAILED) \| Runtime: ")
TOOL_VERSION_RE = re.compile(r"Loaded Module: polygraphy \| Version: (?P<v>[\w.]+)")
PRECISION_FLAGS_RE = re.compile(r"Precision: (?P<p>[A-Z0-9+]+)$")  # trtexec build options
ENGINE_SIZE_RE = re.compile(r"Created engine with size: (?P<mib>[\d.]+) MiB")  # trtexec 10.x

#: (handler in parser.LogParser, regex of the message start): the messages worth a closer look;
#: all others are skipped.  ``Running: <pass> on <layer>`` (a third of a VERBOSE log's prefixed
#: lines that reach the parser) is understood but stores nothing, so the scanner skips it too.
INTERESTING: tuple[tuple[str, str], ...] = (
    ("fusion", r"(?:[A-Za-z0-9]+: )?Fusing "),
    ("merge", r"Merging layers: "),
    ("removing", r"Removing "),
    ("count", r"Original: |After [^:\n]*: \d+ layers$"),
    ("foreign", r"ForeignNode \{"),
    ("memory", r"Total |Max Scratch Memory"),
    ("peak", r"\[MemUsageStats\] Peak"),
    ("calib", r"[ \t]*(?:Starting Calibration|Calibrated batch|Post Processing Calibration|Calibration "
              r"|(?:Writing|Reading) Calibration Cache|Generated calibration scales|Missing scale and zero)"),
    ("timing", r"Engine generation|Engine built|Finished engine|Graph optimization time|Graph construction"
               r"|Formats and tactics|Subgraph compilation"),
    ("version", r"TensorRT version: |Loaded |Precision: |Created engine with size"),
    ("header", r"(?:Engine Layer Information|Layers|I/O Tensors|Engine Metadata"
               r"|Building engine with configuration):[ \t]*$"),
    ("eli", r"Layer\("),
    ("result", r"(?:PASSED|FAILED) \| "),
    ("detailed", r"Name: "),
)
INTEREST_RE = re.compile("|".join(f"(?:{pattern})(?P<{tag}>)" for tag, pattern in INTERESTING), re.M)
#: The same language as INTEREST_RE as one alternation whose branches each start with a distinct literal
#: (or a class): the scanner tests it on every VERBOSE/INFO line
_ANY_INTERESTING = by_first_character([branch for _, pattern in INTERESTING
                                       for alternative in top_level_alternatives(pattern)
                                       for branch in literal_first(alternative)])
#: For the chunk scanner: every line except those it may skip, a VERBOSE/INFO prefix followed by nothing
#: interesting.  The dialects exclude each other, so a quiet prefix match means the line's real prefix:
#: group 1 is that prefix when a kept line has one (its message is interesting), else empty; group 2 the rest.
SCAN_RE = re.compile(
    f"\n(?!(?:{prefix_alternatives(quiet=True)})(?!{_ANY_INTERESTING}))((?:{prefix_alternatives(quiet=True)})?)"
    "([^\n]*)", re.M
)

#: SCAN_RE for UTF-8 bytes (``LogParser.feed_binary``): the same quiet prefixes (ASCII), and interest tests
#: widened so that they still hold every line SCAN_RE keeps: in a bytes pattern ``\d`` would only match ASCII
#: digits, so each becomes "any character but a newline".
SCAN_BYTES_RE = re.compile(SCAN_RE.pattern.replace("\\d", "[^\\n]").encode("ascii"), re.M)

#: Headers whose unprefixed continuation lines we read; value: the block name.
BLOCK_HEADERS: dict[str, str] = {
    "Engine Layer Information:": "eli",  # 8.0 .. 10.x, non-detailed listing
    "Layers:": "detailed",  # 10.x DETAILED listing, TensorRT-RTX
    "I/O Tensors:": "io",  # TensorRT-RTX 1.7, inside the Layers: message
    "Engine Metadata:": "meta",  # TensorRT-RTX 1.7, inside the Layers: message
    "Bindings:": "bindings",  # TensorRT-RTX 1.4, inside the Layers: message, one bare name per line
    "Building engine with configuration:": "config",  # polygraphy 0.47: "    Flags | [FP16]" lines
}


def version_from_tag(tag: str) -> str:
    """``8601`` -> ``8.6.1`` (major*1000+minor*100+patch up to 8.x); ``101401`` -> ``10.14.1`` (10.x)."""
    n = int(tag)
    if len(tag) >= 6:
        return f"{n // 10000}.{n // 100 % 100}.{n % 100}"
    return f"{n // 1000}.{n // 100 % 10}.{n % 100}"
