"""What README.md and docs/*.md name exists: every repository path (a file, a folder, a glob such as
`hw_models/npu-*.yaml` or `roofline-{a,b}.png`, a relative Markdown link), every `mpsim` command and
option shown in code, every `python -m` module and every `make` target. A renamed or removed file or
option fails here instead of in a reader's shell."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

from mpsim.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("mpsim", "analysis", "docs", "tests", "scripts", "traces", "hw_models", "kernels", "reference")
MAPPED = ("analysis", "traces", "hw_models", "kernels", "reference")  # mpsim/X/... is X/... here
# Paths the docs name that are not (yet) in a checkout, each with the reason.
ELSEWHERE = {
    "docs/en/quantization/kv_quant.md": "a file of LMDeploy's repository (docs/sources.md)",
    "traces/data/h200/": "where a GPU run's captures are to be committed (docs/validation.md)",
}
PATH = re.compile(r"(?<![\w./@:-])((?:" + "|".join(TOP) + r")/[\w./<>{},*@-]*)")
BARE_PY = re.compile(r"(?<![\w./-])([\w-]+\.py)\b")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def _mentions(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return [(f"{doc.name}:{n}", m.group(1)) for doc in DOCS
            for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
            for m in pattern.finditer(line)]


def _expand(path: str) -> list[str]:
    """`a/{b,c}.png` -> a/b.png, a/c.png; `<kind>` placeholders become globs."""
    m = re.search(r"\{([^{}]*)\}", path)
    if m is None:
        return [re.sub(r"<[^>]*>?", "*", path)]
    return [x for alt in m.group(1).split(",") for x in _expand(path[:m.start()] + alt + path[m.end():])]


def _exists(path: str, base: Path = ROOT) -> bool:
    path = path.rstrip(".,:;)").removesuffix("**").rstrip(".,:;")
    path = re.sub(r"\{[^}]*$", "", path)  # a brace list that goes on past the line: its folder
    if path in ELSEWHERE or "__pycache__" in path:
        return True
    parts = path.split("/")
    if parts[0] == "mpsim" and len(parts) > 1 and parts[1] in MAPPED:
        path = "/".join(parts[1:])
    for one in _expand(path):
        if "*" in one:
            if not any(base.glob(one)):
                return False
        elif not (base / one).exists():
            module = re.sub(r"\.[A-Za-z_]\w*$", ".py", one)  # kernels/launch_checks.launch_recorded
            if module == one or not (base / module).exists():
                return False
    return True


def test_every_repository_path_named_in_the_docs_exists() -> None:
    missing = [f"{where}: {path}" for where, path in _mentions(PATH) if not _exists(path)]
    assert not missing, "paths named in the docs that are not in the repository:\n" + "\n".join(missing)


def test_every_python_file_named_alone_exists() -> None:
    """`spec.py`, named without its folder, is a file of the repository somewhere."""
    ours = {p.name for top in TOP for p in (ROOT / top).rglob("*.py")}
    missing = [f"{where}: {name}" for where, name in _mentions(BARE_PY) if name not in ours]
    assert not missing, "Python files named in the docs, not in the repository:\n" + "\n".join(missing)


def test_every_relative_link_resolves() -> None:
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            target = target.split("#", 1)[0]
            if target and not re.match(r"[a-z]+:", target) and not _exists(target, doc.parent):
                broken.append(f"{doc.name}: {target}")
    assert not broken, "relative links that resolve to nothing:\n" + "\n".join(broken)


def _code(doc: Path) -> list[str]:
    """The lines of fenced blocks (continuations joined) and the inline code spans of `doc`."""
    lines, fenced = [], False
    text = re.sub(r"\\\n\s*", " ", doc.read_text(encoding="utf-8"))
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif fenced:
            lines.append(line.strip().removeprefix("$ "))
        lines += re.findall(r"`([^`]+)`", line) if not fenced else []
    return lines


def _commands(prefix: str) -> list[tuple[str, str]]:
    return [(doc.name, line.split(" #")[0]) for doc in DOCS for line in _code(doc)
            if line.startswith(prefix)]


def _options(parser: argparse.ArgumentParser) -> tuple[set[str], dict[str, argparse.ArgumentParser]]:
    flags = {s for a in parser._actions for s in a.option_strings}
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return flags, (dict(subs[0].choices) if subs else {})


def _wrong_in(line: str) -> list[str]:
    """What `line` (an `mpsim ...` command) names that the CLI lacks: the command or an option."""
    words = line.split()
    parser = build_parser()
    flags, commands = _options(parser)
    if not words[1].startswith("-"):  # `mpsim --help` asks the front door itself
        if words[1] not in commands:
            return [f"no command {words[1]!r}"]
        flags, nested = _options(commands[words[1]])
        if len(words) > 2 and words[2] in nested:
            flags |= _options(nested[words[2]])[0]
    return [f"no option {flag}" for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", " ".join(words[1:]))
            if flag not in flags]


def test_every_mpsim_command_and_option_shown_exists() -> None:
    wrong = [f"{doc}: `{line}`: {what}" for doc, line in _commands("mpsim ") for what in _wrong_in(line)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("line", "wrong"), [
    ("mpsim --help", []), ("mpsim hw show h200-sxm", []),
    ("mpsim plot r.parquet --kind pareto --quality q --out p.png", []),
    ("mpsim plot r.parquet --kind pareto --colour red", ["no option --colour"]),
    ("mpsim sweeps s.yaml", ["no command 'sweeps'"]),
])
def test_the_command_reader_itself(line: str, wrong: list[str]) -> None:
    assert _wrong_in(line) == wrong


def test_every_python_module_and_make_target_shown_exists() -> None:
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    wrong = [f"{doc}: `{line}`" for doc, line in _commands("python -m ")
             if importlib.util.find_spec(line.split()[2]) is None]
    wrong += [f"{doc}: `{line}`" for doc, line in _commands("make ")
              if not set(line.split()[1:2]) <= targets]
    assert not wrong, "modules or make targets named in the docs that do not exist:\n" + "\n".join(wrong)


@pytest.mark.parametrize(("path", "exists"), [
    ("hw_models/npu-*.yaml", True), ("docs/figures/validation-{h200,h100}.png", True),
    ("analysis/plots/<kind>.py", True), ("kernels/launch_checks.launch_recorded", True),
    ("mpsim/analysis/demo_report.py", True), ("traces/atomic.py**", True),
    ("analysis/roofline_table.py", False), ("analysis/plot_<kind>.py", False),
    ("docs/figures/validation-{h200,h999}.png", False), ("analysis/sweep_*.py", False),
    ("mpsim/data/tiny/{config.json,", True),
])
def test_the_path_reader_itself(path: str, exists: bool) -> None:
    assert _exists(path) is exists
