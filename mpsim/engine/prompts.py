"""Prompt sets: token prompts for a generation run, from a JSONL file or made by the caller.

A prompt file has one JSON object per line: `prompt` (a string, required), optional `reference` (the
task's expected output, for Rouge-L against references) and, for the translation template,
optional `source_lang` / `target_lang`. Blank lines are skipped. A task template wraps each prompt
the way its task is posed (PMPD evaluates summarization on CNN/DailyMail and DialogSum, translation
on IWSLT and open chat on MT-Bench; the wording here is mpsim's, in the usual instruction style):

  plain      the prompt as it is
  cnn-dm     "Summarize the following news article in a few sentences." + Article / Summary:
  dialogsum  "Summarize the following dialogue." + the dialogue / Summary:
  iwslt      "Translate the following German text into English." + German: ... / English:
  mt-bench   the prompt as the user's turn of the model's chat template

`--chat` wraps any task in the chat template too (mt-bench implies it). A rendered chat prompt holds
its own special tokens; other prompts get BOS/EOS by the tokenizer's convention. Every error names
the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsim.engine.chat import AUTO, chat_prompt, pick_template
from mpsim.engine.checkpoint import TextModel, check_context
from mpsim.engine.tasks import CHAT_TASKS, TASKS, TRANSLATION_DEFAULTS
from mpsim.errors import MpsimInputError


def _byte_words(ids: list[int]) -> list[Any]:
    return bytes(ids).split()


@dataclass(frozen=True)
class PromptSet:
    """Prompts as token ids; `targets` are true continuations for teacher forcing (None: force fp16's
    own continuation), `references` reference outputs for Rouge-L against references (None: none)."""

    name: str
    prompts: list[list[int]]
    targets: list[list[int]] | None
    references: list[list[int] | None] | None = None
    eos: tuple[int, ...] = ()
    words: Callable[[list[int]], list[Any]] = field(default=_byte_words, repr=False)
    where: list[str] = field(default_factory=list)  # FILE:LINE of each prompt, when from a file

    def __len__(self) -> int:
        return len(self.prompts)

    def subset(self, lo: int, hi: int, name: str | None = None) -> PromptSet:
        def cut(x: list[Any] | None) -> list[Any] | None:
            return None if x is None else x[lo:hi]

        return PromptSet(name or self.name, self.prompts[lo:hi], cut(self.targets), cut(self.references),
                         self.eos, self.words, self.where[lo:hi])


@dataclass(frozen=True)
class PromptRecord:
    prompt: str
    reference: str | None
    fields: dict[str, Any]
    where: str  # FILE:LINE


def read_prompts(path: str | Path) -> list[PromptRecord]:
    """Parse a JSONL prompt file; a line that is not JSON, not an object, or lacks a string `prompt`
    is an error naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise MpsimInputError(f"{path}: not UTF-8 text ({exc})") from None
    records = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise MpsimInputError(f"{where}: not JSON ({exc})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
            raise MpsimInputError(f"{where}: expected a JSON object with a string 'prompt'")
        ref = obj.get("reference")
        if ref is not None and not isinstance(ref, str):
            raise MpsimInputError(f"{where}: 'reference' must be a string, got {type(ref).__name__}")
        records.append(PromptRecord(obj["prompt"], ref, obj, where))
    if not records:
        raise MpsimInputError(f"{path}: no prompts (expected one JSON object per line)")
    return records


def render_prompt(record: PromptRecord, task: str, chat: str | None, model: TextModel) -> tuple[str, bool]:
    """The text the model sees and whether it already holds its special tokens (a chat prompt)."""
    if task not in TASKS:
        raise MpsimInputError(f"--task {task!r}: expected one of {', '.join(TASKS)}")
    values = TRANSLATION_DEFAULTS | {k: v for k, v in record.fields.items() if isinstance(v, str)}
    text = TASKS[task].format_map(values | {"prompt": record.prompt})
    if chat is None and task in CHAT_TASKS:
        chat = AUTO
    if chat is None:
        return text, False
    tok = model.tokenizer
    template = pick_template(chat, tok.chat_template, str(model.folder))
    return chat_prompt(text, template, tok.bos_token, tok.eos_token), True


def encode_prompt(model: TextModel, text: str, rendered_chat: bool) -> list[int]:
    """Token ids; a rendered chat prompt that starts with the BOS text is encoded as it is (the
    template placed its special tokens), anything else gets the tokenizer's BOS/EOS convention."""
    tok = model.tokenizer
    holds_bos = rendered_chat and bool(tok.bos_token) and text.startswith(tok.bos_token)
    return tok.encode(text, special=not holds_bos)


def file_prompt_set(path: str | Path, model: TextModel, gen_len: int, *, task: str = "plain",
                    chat: str | None = None) -> PromptSet:
    """A prompt file as a PromptSet for `model`; every prompt must fit its context with gen_len."""
    records = read_prompts(path)
    prompts: list[list[int]] = []
    refs: list[list[int] | None] = []
    for r in records:
        text, rendered = render_prompt(r, task, chat, model)
        ids = encode_prompt(model, text, rendered)
        if not ids:
            raise MpsimInputError(f"{r.where}: the prompt encodes to no tokens")
        check_context(model, len(ids), gen_len, r.where)
        prompts.append(ids)
        refs.append(None if r.reference is None else model.tokenizer.encode(r.reference, special=False))
    references = refs if any(x is not None for x in refs) else None
    return PromptSet(Path(path).name, prompts, None, references, tuple(model.tokenizer.eos_ids),
                     model.tokenizer.words, [r.where for r in records])
