"""Chat templates: a folder's `chat_template` (Jinja, rendered in a sandbox as transformers does) or
a built-in one by name.

Built-ins: `vicuna` (Vicuna v1.1/v1.5, FastChat's `vicuna_v1.1`: the system line, then
`USER: ... ASSISTANT:`), `zephyr` (StableLM-Zephyr / Zephyr: `<|user|>\\n...<|endoftext|>` turns) and
`plain` (the prompt as it is). A rendered prompt already holds its special tokens, so it is encoded
without adding BOS/EOS again (what `apply_chat_template(tokenize=True)` does).
"""

from __future__ import annotations

from typing import Any

from mpsim.errors import MpsimInputError

VICUNA_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. The assistant "
                 "gives helpful, detailed, and polite answers to the user's questions.")

BUILTIN_TEMPLATES: dict[str, str] = {
    "vicuna": (
        "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}"
        "{% set rest = messages[1:] %}{% else %}" + VICUNA_SYSTEM + "{% set rest = messages %}{% endif %}"
        "{% for m in rest %}{% if m['role'] == 'user' %} USER: {{ m['content'] }}"
        "{% else %} ASSISTANT: {{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %} ASSISTANT:{% endif %}"
    ),
    "zephyr": (
        "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
    "plain": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
}

AUTO = "auto"  # `--chat` with no name: the folder's chat_template


def _raise(message: str) -> None:
    raise MpsimInputError(f"chat template: {message}")


def pick_template(name: str, folder_template: str | None, where: str) -> str:
    """`auto` -> the folder's template (an error if it has none); otherwise a built-in by name."""
    if name == AUTO:
        if folder_template is None:
            raise MpsimInputError(f"{where}: tokenizer_config.json has no chat_template; name a built-in "
                                  f"one with --chat NAME ({', '.join(BUILTIN_TEMPLATES)})")
        return folder_template
    if name not in BUILTIN_TEMPLATES:
        raise MpsimInputError(f"--chat {name!r}: expected one of {', '.join(BUILTIN_TEMPLATES)} "
                              "(or --chat alone for the folder's own template)")
    return BUILTIN_TEMPLATES[name]


def render_chat(template: str, messages: list[dict[str, str]], *, bos_token: str = "", eos_token: str = "",
                add_generation_prompt: bool = True, **extra: Any) -> str:
    """Render a chat template in Jinja's immutable sandbox (templates come from checkpoints), within
    the stated limits on output size and render time (mpsim/limits.py); whatever else the template
    raises is its own error, reported as one."""
    from mpsim.engine.template_sandbox import bounded_render

    try:
        return bounded_render(template, {"raise_exception": _raise}, messages=messages, bos_token=bos_token,
                              eos_token=eos_token, add_generation_prompt=add_generation_prompt, **extra)
    except MpsimInputError:
        raise
    except Exception as exc:  # template code from a checkpoint: anything it raises is its own fault
        raise MpsimInputError(f"chat template: cannot render ({type(exc).__name__}: {exc})") from None


def chat_prompt(user_text: str, template: str, bos_token: str, eos_token: str) -> str:
    """One user turn, ready for the assistant's answer."""
    return render_chat(template, [{"role": "user", "content": user_text}], bos_token=bos_token,
                       eos_token=eos_token)
