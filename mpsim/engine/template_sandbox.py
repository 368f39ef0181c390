"""Jinja's immutable sandbox with limits: a chat template (code from a checkpoint) renders at most
limits.TEMPLATE_CHARS characters within limits.TEMPLATE_SECONDS seconds.

The sandbox already blocks attribute escapes and ranges past 100,000; it does not bound memory or
time. So: `*` and `**` are intercepted (`'a' * 10**10` would allocate 10 GB before any output), the
output is streamed and counted, and on the main thread an interval timer interrupts a render that
runs too long (nested loops that print nothing). `{% include %}`, `{% import %}` and `{% extends %}`
name other templates, which a chat template does not have: they are errors.
"""

from __future__ import annotations

import resource
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from jinja2 import BaseLoader, Environment, TemplateNotFound
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from mpsim import limits
from mpsim.errors import MpsimInputError


class _NoOtherTemplates(BaseLoader):
    def get_source(self, environment: Environment,
                   template: str) -> tuple[str, str | None, Callable[[], bool]]:
        raise TemplateNotFound(f"{template} (a chat template cannot include, import or extend another)")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with sequence repetition and powers checked before they are computed."""

    intercepted_binops = frozenset(("*", "**"))

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                    limits.TEMPLATE_CHARS.check(len(seq) * times, "chat template: a repeated sequence")
        if operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 \
                and right > 64:
            raise MpsimInputError(f"chat template: {left} ** {right}: the power is too large (at most 64)")
        return super().call_binop(context, operator, left, right)


TEMPLATE_MEMORY = 1 << 30  # bytes of address space a render may add (a 1 MiB prompt needs far less)


class _TooSlowError(Exception):
    pass


@contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Interrupt the body after `seconds` (main thread only: elsewhere signals cannot be delivered)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _TooSlowError

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextmanager
def _memory_cap(extra: int) -> Iterator[None]:
    """At most `extra` more bytes of address space for the body (where the platform can say)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, AttributeError):
        yield
        return
    cap = used + extra
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def bounded_render(template: str, globals_: dict[str, Any], **context: Any) -> str:
    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, loader=_NoOtherTemplates())
    env.globals.update(globals_)
    most, seconds = limits.TEMPLATE_CHARS.value(), limits.TEMPLATE_SECONDS.value()
    parts, size = [], 0
    try:
        with _deadline(seconds), _memory_cap(TEMPLATE_MEMORY):
            for chunk in env.from_string(template).generate(**context):
                size += len(chunk)
                if size > most:
                    limits.TEMPLATE_CHARS.check(size, "chat template: the rendered prompt")
                parts.append(chunk)
    except MemoryError:
        raise MpsimInputError(f"chat template: rendering needs more than {TEMPLATE_MEMORY >> 20} MiB "
                              "of memory") from None
    except _TooSlowError:
        raise MpsimInputError(f"chat template: rendering took more than {seconds} s (set "
                              f"{limits.TEMPLATE_SECONDS.env} to allow longer)") from None
    return "".join(parts)
