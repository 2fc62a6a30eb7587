"""Generate the reference parts of the docs from the code: the options table and the CLI reference.

    python scripts/gen_docs.py           # rewrite the generated regions of docs/options.md and docs/cli.md
    python scripts/gen_docs.py --check   # exit 1 when a committed page differs from what the code says

A generated region sits between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``;
the text around it is written by hand.  ``options`` comes from :data:`pytest_trt.options.OPTIONS`
and the golden threshold family; ``cli`` from :func:`pytest_trt.cli.build_parser`, walking every
subcommand and its arguments.  tests/docs/test_generated_docs.py fails when a page is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DOCS = ROOT / "docs"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`" if text else ""


# -- options ------------------------------------------------------------------------------------


def _default(option: object) -> str:
    kind, default = option.kind, option.default  # type: ignore[attr-defined]
    if kind == "bool":
        return "true" if default else "off"
    if default in (None, (), ""):
        return ""
    if isinstance(default, tuple):
        return _code(" ".join(default))
    return _code(str(default))


def options_table() -> str:
    from pytest_trt import options as opt
    from pytest_trt.compare.thresholds import Thresholds

    rows = ["| option | ini key | default | meaning |", "|---|---|---|---|"]
    for o in opt.OPTIONS:
        metavar = o.metavar or ("MODE" if o.choices else "")  # the choices are in the meaning
        flag = f"{o.flag} {metavar}" if o.flag and metavar and o.kind != "bool" else (o.flag or "")
        rows.append(f"| {_code(flag)} | {_code(o.ini or '')} | {_default(o)} | {_cell(o.help)} |")
    defaults = Thresholds()
    for f in fields(Thresholds):
        value = getattr(defaults, f.name)
        shown = "off" if value is False else ("" if value is None else _code(str(value)))
        rows.append(f"| | {_code(opt.THRESHOLD_INI_PREFIX + f.name)} | {shown} | default golden threshold "
                    f"`{f.name}` of `check()` (`none` switches it off) |")
    return "\n".join(rows) + "\n"


# -- CLI ----------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name, parser, help) of each subcommand, in declaration order."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, sub, helps.get(name, "")))
    return out


def _arg_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or action.dest.upper()
                name += f" {' '.join(metavar) if isinstance(metavar, tuple) else metavar}"
        else:
            metavar = action.metavar or action.dest
            name = str(metavar) + (" ..." if action.nargs in ("+", "*") else "")
        text = action.help or ("" if action.option_strings else "positional")
        if action.choices and action.option_strings and "one of" not in text:
            text += f" (one of {', '.join(map(str, action.choices))})"
        if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings and "default" not in text:
            text += f" (default: {action.default})"
        rows.append(f"| {_code(name)} | {_cell(text)} |")
    return rows


def _usage(parser: argparse.ArgumentParser) -> str:
    usage = parser.format_usage().strip()
    usage = re.sub(r"^usage:\s*", "", usage)
    return " ".join(usage.split())


Leaf = tuple[tuple[str, ...], argparse.ArgumentParser, str]


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Leaf]:
    out = []
    for name, sub, help_text in _subparsers(parser):
        if _subparsers(sub):
            out.extend(_leaves(sub, (*path, name)))
        else:
            out.append(((*path, name), sub, help_text))
    return out


def cli_reference() -> str:
    from pytest_trt.cli import build_parser

    parser = build_parser()
    lines = [f"`{parser.prog}`: {parser.description}", "", f"Exit {parser.epilog.removeprefix('exit ')}.", ""]
    lines += ["| command | what it does |", "|---|---|"]
    leaves = _leaves(parser)
    for path, _, help_text in leaves:
        command = " ".join(path)
        anchor = "-".join(path)
        lines.append(f"| [`pytest-trt {command}`](#{anchor}) | {_cell(help_text)} |")
    for path, sub, help_text in leaves:
        anchor = "-".join(path)
        lines += ["", f"## pytest-trt {' '.join(path)} {{#{anchor}}}", "", _cell(help_text) + ".", "",
                  "<!-- snippet: output -->", "```text", _usage(sub), "```", ""]
        rows = _arg_rows(sub)
        if rows:
            lines += ["| argument | meaning |", "|---|---|", *rows]
    return "\n".join(lines).rstrip("\n") + "\n"


# -- pages --------------------------------------------------------------------------------------

#: page -> {region: generator}
PAGES = {"options.md": {"options": options_table}, "cli.md": {"cli": cli_reference}}


def render(text: str, regions: dict[str, object]) -> str:
    for name, make in regions.items():
        start, end = f"<!-- generated: {name} -->\n", f"<!-- end generated: {name} -->"
        i, j = text.index(start) + len(start), text.index(end)
        text = text[:i] + make() + text[j:]  # type: ignore[operator]
    return text


def stale_pages(docs: Path = DOCS) -> dict[str, tuple[str, str]]:
    """page -> (committed, generated) for every page whose generated regions are out of date."""
    out = {}
    for page, regions in PAGES.items():
        committed = (docs / page).read_text(encoding="utf-8")
        generated = render(committed, regions)
        if generated != committed:
            out[page] = (committed, generated)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report stale pages (exit 1 when any is)")
    args = parser.parse_args(argv)
    stale = stale_pages()
    for page, (_, generated) in stale.items():
        if args.check:
            print(f"docs/{page} is stale: run python scripts/gen_docs.py")
        else:
            (DOCS / page).write_text(generated, encoding="utf-8")
            print(f"docs/{page} regenerated")
    return 1 if (stale and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
