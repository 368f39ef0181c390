"""Chat templates (code from a checkpoint) render within stated limits: size, time, memory; a template
that names another template, or fails in any other way, is one clear error."""

from __future__ import annotations

import pytest

from mpsim.engine.chat import BUILTIN_TEMPLATES, render_chat
from mpsim.errors import MpsimInputError

USER = [{"role": "user", "content": "hi"}]

TEMPLATES = {
    "'a' * 10^10": ("{{ 'a' * 10000000000 }}", "a repeated sequence: 10,000,000,000 characters exceeds"),
    "10^10 * 'a'": ("{{ 10000000000 * 'a' }}", "a repeated sequence"),
    "include": ("{% include 'other.jinja' %}", "cannot include, import or extend"),
    "import": ("{% import 'macros' as m %}", "cannot include, import or extend"),
    "extends": ("{% extends 'base' %}", "cannot include, import or extend"),
    "output past the limit": ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
                              "the rendered prompt: "),
    "a filter's width": ("{{ 'a' | center(10000000000) }}", "more than 1024 MiB of memory"),
    "doubling in a loop": ("{% set ns = namespace(x='ab') %}{% for i in range(60) %}"
                           "{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x | length }}", "memory"),
    "range past the sandbox's": ("{{ range(10 ** 9) | list }}", "OverflowError"),
    "a big power": ("{{ 7 ** 100000000 }}", "the power is too large"),
    "syntax": ("{% for m in messages %}", "TemplateSyntaxError"),
    "division by zero": ("{{ 1 / 0 }}", "ZeroDivisionError"),
}


@pytest.mark.parametrize("case", TEMPLATES)
def test_a_template_past_the_limits_is_one_error(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MPSIM_MAX_TEMPLATE_CHARS", raising=False)
    # the limit each case is about trips first, however loaded the machine (the time limit has its
    # own test below): a memory-bound case took over the default 5 s on two busy cores
    monkeypatch.setenv("MPSIM_MAX_TEMPLATE_SECONDS", "120")
    template, needle = TEMPLATES[case]
    with pytest.raises(MpsimInputError, match="chat template") as info:
        render_chat(template, USER)
    assert needle in str(info.value)


def test_nested_loops_are_stopped_at_the_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPSIM_MAX_TEMPLATE_SECONDS", "1")
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(MpsimInputError, match="rendering took more than 1 s"):
        render_chat(loops, USER)


def test_ordinary_templates_render_and_the_limits_are_lifted_after(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource
    import signal

    before = resource.getrlimit(resource.RLIMIT_AS), signal.getsignal(signal.SIGALRM)
    assert render_chat(BUILTIN_TEMPLATES["zephyr"], USER, eos_token="</s>") == \
        "<|user|>\nhi</s>\n<|assistant|>\n"
    assert render_chat("{{ 'ab' * 3 }}{{ messages[0].content.upper() }}", USER) == "abababHI"
    with pytest.raises(MpsimInputError):
        render_chat("{{ 'a' | center(10000000000) }}", USER)
    assert (resource.getrlimit(resource.RLIMIT_AS), signal.getsignal(signal.SIGALRM)) == before
    monkeypatch.setenv("MPSIM_MAX_TEMPLATE_CHARS", "4")
    with pytest.raises(MpsimInputError, match="5 characters exceeds the limit of 4"):
        render_chat("{{ 'abcde' }}", USER)
