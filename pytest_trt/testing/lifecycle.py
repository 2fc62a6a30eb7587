"""The golden lifecycle, step by step, in a ``pytester`` project: each step asserts its own outcome.

    life = GoldenLifecycle(pytester, "--trt-backend", "onnxruntime", "--trt-engine-build")
    life.first_run()            # fails: "no golden for ..."; returns the printed update command
    life.approve("CR-1")        # runs that command with the reason: the golden is written, the test passes
    life.check()                # passes against the golden
    ...change the model...
    life.regression("*[[]REGRESSION[]] logits: Output L2 norm delta*")   # fails with those lines

A step whose outcome is not the expected one fails the calling test with a message naming the step,
the command, the outcomes obtained vs expected and the tail of pytest's output.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

#: where a printed update command puts the approval reason
REASON_PLACEHOLDER = "REASON"
#: how much of pytest's output a failure message shows
TAIL_CHARS = 3000


class GoldenLifecycle:
    """Runs ``pytester`` through the golden lifecycle of one project.

    ``args`` are the arguments of a plain run (``--trt-backend ...``); ``always`` go on every run,
    printed update commands included (``-p`` plugins, ``-p no:cacheprovider``), since pytest-trt prints
    only its own options.  ``golden`` (a path relative to the project) is checked not to exist before
    the approval and to exist after it.  ``subprocess=True`` runs pytest in a subprocess.
    """

    def __init__(self, pytester: pytest.Pytester, *args: str, always: Sequence[str] = (),
                 golden: str | Path | None = None, subprocess: bool = False) -> None:
        self.pytester = pytester
        self.args = tuple(args)
        self.always = tuple(always)
        self.golden = None if golden is None else pytester.path / golden
        self.subprocess = subprocess
        #: the update commands the last :meth:`first_run` printed, each as its arguments after ``pytest``
        self.commands: list[list[str]] = []
        #: the result of the last run (to match more of its output)
        self.last: pytest.RunResult | None = None

    def run(self, *args: str) -> pytest.RunResult:
        """One pytest run in the project with ``args`` and :attr:`always`."""
        full = (*args, *self.always)
        run = self.pytester.runpytest_subprocess if self.subprocess else self.pytester.runpytest
        self.last = run(*full)
        return self.last

    def first_run(self, *extra: str) -> list[str]:
        """A run without the golden: must fail with "no golden for" and print one update command; returns
        that command's arguments (after ``pytest``), with the ``"REASON"`` placeholder still in."""
        __tracebackhide__ = True
        result = self.run(*self.args, *extra)
        self._expect("first run (no golden yet)", result, failed=True, text="no golden for")
        self.commands = _printed_commands(result)
        if len(self.commands) != 1:
            self._fail("first run (no golden yet)", result,
                       f"expected one printed update command ('pytest ... {REASON_PLACEHOLDER}'), found "
                       f"{len(self.commands)}: {[' '.join(c) for c in self.commands]}",
                       "check that the golden failure message prints the command")
        if REASON_PLACEHOLDER not in self.commands[0]:
            self._fail("first run (no golden yet)", result,
                       f"the printed command {shlex.join(self.commands[0])!r} has no {REASON_PLACEHOLDER!r} "
                       "placeholder for the approval reason", "check the update command the golden failure prints")
        if self.golden is not None and self.golden.exists():
            self._fail("first run (no golden yet)", result, f"{self.golden} exists after a failed check",
                       "a golden must never be written without --trt-approve")
        return list(self.commands[0])

    def approve(self, reason: str, command: Sequence[str] | None = None) -> pytest.RunResult:
        """Run the printed update command (or ``command``) with ``reason``: must pass and say the goldens
        were refreshed."""
        __tracebackhide__ = True
        if command is None:
            if not self.commands:
                raise ValueError("GoldenLifecycle.approve: no printed command yet; call first_run() first "
                                 "or pass command=")
            command = self.commands[0]
        if REASON_PLACEHOLDER not in command:
            raise ValueError(f"GoldenLifecycle.approve: {shlex.join(command)!r} has no {REASON_PLACEHOLDER!r} "
                             "placeholder to put the reason in")
        words = [reason if w == REASON_PLACEHOLDER else w for w in command]
        result = self.run(*words)
        self._expect("approve", result, failed=False, text="trt goldens refreshed")
        if self.golden is not None and not self.golden.is_file():
            self._fail("approve", result, f"{self.golden} was not written",
                       "check --trt-golden-dir and the golden's name")
        return result

    def check(self, *extra: str) -> pytest.RunResult:
        """A plain run against the golden: must pass."""
        __tracebackhide__ = True
        result = self.run(*self.args, *extra)
        self._expect("check", result, failed=False)
        return result

    def regression(self, *lines: str, extra: Sequence[str] = ()) -> pytest.RunResult:
        """A plain run after a change: must fail with a ``[REGRESSION]`` line, and show ``lines``
        (``fnmatch`` patterns, in order)."""
        __tracebackhide__ = True
        result = self.run(*self.args, *extra)
        self._expect("regression", result, failed=True, text="[REGRESSION]")
        if lines:
            try:
                result.stdout.fnmatch_lines(list(lines))
            except Exception:  # noqa: BLE001 - pytest's own failure type is private
                self._fail("regression", result, f"the output does not show the lines {list(lines)}",
                           "compare the patterns with the output above")
        return result

    def _expect(self, step: str, result: pytest.RunResult, *, failed: bool, text: str | None = None) -> None:
        __tracebackhide__ = True
        outcomes = _outcomes(result)
        bad = outcomes.get("failed", 0) + outcomes.get("errors", 0)
        if failed and bad == 0:
            self._fail(step, result, f"expected a failing test, got {_show(outcomes)}",
                       "the golden check did not fail: is a golden already there, or is the check not run?")
        if not failed and (bad or not outcomes.get("passed", 0)):
            self._fail(step, result, f"expected passing tests only, got {_show(outcomes)}",
                       "read the failure above")
        if text is not None and text not in result.stdout.str():
            self._fail(step, result, f"the output does not contain {text!r} ({_show(outcomes)})",
                       "the step ran but did not do what it should")

    def _fail(self, step: str, result: pytest.RunResult, what: str, next_step: str) -> None:
        __tracebackhide__ = True
        import pytest

        tail = (result.stdout.str() + "\n" + result.stderr.str()).strip()[-TAIL_CHARS:]
        pytest.fail(f"golden lifecycle, step {step!r} in {self.pytester.path}: {what}.\n"
                    f"--- last {TAIL_CHARS} characters of pytest's output ---\n{tail}\n---\n{next_step}",
                    pytrace=False)


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    try:
        return result.parseoutcomes()
    except ValueError:  # no summary line: a usage error or a crash
        return {"exit code": int(result.ret)}


def _show(outcomes: dict[str, int]) -> str:
    if "exit code" in outcomes:
        return f"no test summary, exit code {outcomes['exit code']} (a usage error or a crash)"
    return ", ".join(f"{n} {k}" for k, n in outcomes.items()) or "nothing run"


def _printed_commands(result: pytest.RunResult) -> list[list[str]]:
    """The distinct ``pytest ...`` command lines of the output, each as its words after ``pytest``."""
    lines = {line.strip() for line in result.stdout.lines if line.strip().startswith("pytest ")}
    return [shlex.split(line)[1:] for line in sorted(lines)]
