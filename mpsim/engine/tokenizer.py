"""Tokenizers behind one interface: HF `tokenizer.json` (the `tokenizers` package), `tokenizer.model`
(`sentencepiece`), or the tiny model's bytes (token id = byte value).

BOS/EOS follow the folder's configs the way Hugging Face does:
- ids: `tokenizer_config.json`'s `bos_token` / `eos_token` (a string or `{"content": ...}`), else
  `special_tokens_map.json`'s, looked up in the vocabulary; else `generation_config.json`'s and then
  `config.json`'s `bos_token_id` / `eos_token_id`. `generation_config.json` may list several EOS ids.
- adding them: an explicit `add_bos_token` / `add_eos_token` in `tokenizer_config.json` wins (mpsim
  encodes without the tokenizer's own post-processor and adds the tokens itself, as transformers'
  Llama tokenizers rebuild their post-processor from these flags); otherwise a `tokenizer.json`'s
  post-processor decides (what `PreTrainedTokenizerFast` does) and a sentencepiece model adds BOS
  and not EOS (the slow `LlamaTokenizer`'s defaults).
Decoding drops special tokens. `words(ids)` is what Rouge-L over words splits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mpsim.errors import MpsimInputError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
                   "generation_config.json", "added_tokens.json")


class Tokenizer(Protocol):
    name: str
    bos_id: int | None
    eos_ids: tuple[int, ...]
    chat_template: str | None
    bos_token: str
    eos_token: str

    def encode(self, text: str, *, special: bool = True) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...
    def words(self, ids: list[int]) -> list[Any]: ...


@dataclass
class ByteTokenizer:
    """The tiny model's: UTF-8 bytes are the ids; no BOS, no EOS, no chat template."""

    name: str = "bytes"
    bos_id: int | None = None
    eos_ids: tuple[int, ...] = ()
    chat_template: str | None = None
    bos_token: str = ""
    eos_token: str = ""

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    def words(self, ids: list[int]) -> list[Any]:
        return bytes(ids).split()  # byte-exact, as the tiny model's tables were made


@dataclass
class _Specials:
    """What the folder's configs say about BOS/EOS."""

    bos_id: int | None = None
    eos_ids: tuple[int, ...] = ()
    bos_token: str = ""
    eos_token: str = ""
    add_bos: bool | None = None  # None: the tokenizer's own convention
    add_eos: bool | None = None
    chat_template: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class HFTokenizer:
    """A `tokenizer.json` through the `tokenizers` package."""

    path: Path
    specials: _Specials
    name: str = "tokenizers"

    def __post_init__(self) -> None:
        from tokenizers import Tokenizer as Fast

        try:
            self.tok = Fast.from_file(str(self.path))
        except Exception as exc:  # the Rust side raises plain Exceptions
            raise MpsimInputError(f"{self.path}: not a readable tokenizer.json ({exc})") from None
        _resolve_ids(self.specials, self.tok.token_to_id, self.path.parent)
        self.bos_id, self.eos_ids = self.specials.bos_id, self.specials.eos_ids
        self.bos_token, self.eos_token = self.specials.bos_token, self.specials.eos_token
        self.chat_template = self.specials.chat_template

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        s = self.specials
        if not special:
            return list(self.tok.encode(text, add_special_tokens=False).ids)
        if s.add_bos is None and s.add_eos is None:
            return list(self.tok.encode(text, add_special_tokens=True).ids)
        return _wrap(list(self.tok.encode(text, add_special_tokens=False).ids), s, False)

    def decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(list(ids), skip_special_tokens=True))

    def words(self, ids: list[int]) -> list[Any]:
        return self.decode(ids).split()


@dataclass
class SentencePieceTokenizer:
    """A `tokenizer.model` through `sentencepiece` (folders without a tokenizer.json)."""

    path: Path
    specials: _Specials
    name: str = "sentencepiece"

    def __post_init__(self) -> None:
        import sentencepiece as spm

        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(self.path))
        except Exception as exc:  # OSError or RuntimeError, depending on what is wrong
            raise MpsimInputError(f"{self.path}: not a readable sentencepiece model ({exc})") from None

        def lookup(token: str) -> int | None:
            i = int(self.sp.piece_to_id(token))
            return None if i == self.sp.unk_id() and token != self.sp.id_to_piece(i) else i

        if not self.specials.bos_token and self.sp.bos_id() >= 0:
            self.specials.bos_token = str(self.sp.id_to_piece(self.sp.bos_id()))
        if not self.specials.eos_token and self.sp.eos_id() >= 0:
            self.specials.eos_token = str(self.sp.id_to_piece(self.sp.eos_id()))
        _resolve_ids(self.specials, lookup, self.path.parent)
        self.bos_id, self.eos_ids = self.specials.bos_id, self.specials.eos_ids
        self.bos_token, self.eos_token = self.specials.bos_token, self.specials.eos_token
        self.chat_template = self.specials.chat_template

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        ids = [int(i) for i in self.sp.encode(text)]
        return _wrap(ids, self.specials, True) if special else ids

    def decode(self, ids: list[int]) -> str:
        specials = {self.bos_id, *self.eos_ids}
        return str(self.sp.decode([int(i) for i in ids if int(i) not in specials]))

    def words(self, ids: list[int]) -> list[Any]:
        return self.decode(ids).split()


def _wrap(ids: list[int], s: _Specials, sp_defaults: bool) -> list[int]:
    add_bos = s.add_bos if s.add_bos is not None else sp_defaults
    add_eos = bool(s.add_eos)
    if add_bos and s.bos_id is not None:
        ids = [s.bos_id, *ids]
    if add_eos and s.eos_ids:
        ids = [*ids, s.eos_ids[0]]
    return ids


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MpsimInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MpsimInputError(f"{path}: expected a JSON object")
    return data


def _token_text(value: object) -> str:
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return value if isinstance(value, str) else ""


def _read_specials(folder: Path) -> _Specials:
    cfg = _read_json(folder / "tokenizer_config.json")
    smap = _read_json(folder / "special_tokens_map.json")
    s = _Specials()
    s.bos_token = _token_text(cfg.get("bos_token")) or _token_text(smap.get("bos_token"))
    s.eos_token = _token_text(cfg.get("eos_token")) or _token_text(smap.get("eos_token"))
    for key in ("add_bos_token", "add_eos_token"):
        if key in cfg and not isinstance(cfg[key], bool):
            raise MpsimInputError(f"{folder / 'tokenizer_config.json'}: '{key}' must be true or false, "
                                  f"got {cfg[key]!r}")
    s.add_bos, s.add_eos = cfg.get("add_bos_token"), cfg.get("add_eos_token")
    template = cfg.get("chat_template")
    if isinstance(template, list):  # several named templates: take "default"
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    s.chat_template = template if isinstance(template, str) else None
    return s


def _ids(value: object) -> tuple[int, ...]:
    if isinstance(value, bool):
        return ()
    if isinstance(value, int):
        return (value,)
    if isinstance(value, list):
        return tuple(int(v) for v in value if isinstance(v, int) and not isinstance(v, bool))
    return ()


def _resolve_ids(s: _Specials, lookup: Any, folder: Path) -> None:
    """Token strings -> ids via the vocabulary; generation_config.json / config.json fill the gaps."""
    gen, cfg = _read_json(folder / "generation_config.json"), _read_json(folder / "config.json")
    bos = lookup(s.bos_token) if s.bos_token else None
    eos = lookup(s.eos_token) if s.eos_token else None
    fallback_bos = _ids(gen.get("bos_token_id")) or _ids(cfg.get("bos_token_id"))
    fallback_eos = _ids(gen.get("eos_token_id")) or _ids(cfg.get("eos_token_id"))
    s.bos_id = bos if bos is not None else (fallback_bos[0] if fallback_bos else None)
    s.eos_ids = tuple(dict.fromkeys(((eos,) if eos is not None else ()) + fallback_eos))


def has_tokenizer(folder: str | Path) -> bool:
    f = Path(folder)
    return (f / "tokenizer.json").exists() or (f / "tokenizer.model").exists()


BYTE_TOKENIZER_KEY = "mpsim_tokenizer"  # config.json key of a byte-level model (`mpsim train-tiny`)


def is_byte_level_folder(folder: str | Path) -> bool:
    """A folder written by `mpsim train-tiny`: its config.json says the tokens are bytes."""
    value = _read_json(Path(folder) / "config.json").get(BYTE_TOKENIZER_KEY)
    return isinstance(value, str) and value.startswith("bytes")


def load_tokenizer(folder: str | Path) -> HFTokenizer | SentencePieceTokenizer | ByteTokenizer:
    """The folder's tokenizer: tokenizer.json (preferred) or tokenizer.model, with its BOS/EOS; bytes
    for a byte-level model's folder (one written by `mpsim train-tiny`)."""
    folder = Path(folder)
    specials = _read_specials(folder)
    if (folder / "tokenizer.json").exists():
        return HFTokenizer(folder / "tokenizer.json", specials)
    if (folder / "tokenizer.model").exists():
        return SentencePieceTokenizer(folder / "tokenizer.model", specials)
    if is_byte_level_folder(folder):
        return ByteTokenizer()
    raise MpsimInputError(f"{folder}: no tokenizer (expected tokenizer.json or tokenizer.model); text "
                          "generation needs one (the byte-level model is --model tiny)")
