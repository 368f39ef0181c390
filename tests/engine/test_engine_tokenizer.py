"""Tokenizers and chat templates: exact round trips, BOS/EOS as the folder's configs say (HF's
conventions), a clear error for a folder without a tokenizer, the built-in Vicuna template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hf_folder import TEXTS, write_bpe_tokenizer, write_sentencepiece

from mpsim.engine.chat import BUILTIN_TEMPLATES, chat_prompt, pick_template
from mpsim.engine.tokenizer import ByteTokenizer, load_tokenizer
from mpsim.errors import MpsimInputError


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bpe")
    write_bpe_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def sp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sp")
    write_sentencepiece(folder)
    return folder


def test_tokenizer_json_round_trip_is_exact(bpe_dir: Path) -> None:
    tok = load_tokenizer(bpe_dir)
    assert tok.name == "tokenizers"
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids[0] == 0 and tok.decode(ids) == text  # BOS from the post-processor, dropped on decode
        assert tok.decode(tok.encode(text, special=False)) == text


def test_sentencepiece_round_trip_and_llama_defaults(sp_dir: Path) -> None:
    tok = load_tokenizer(sp_dir)
    assert tok.name == "sentencepiece" and tok.bos_id == 1 and tok.eos_ids == (2,)
    for text in ("The quick brown fox jumps over the lazy dog.", "def parse(self, text):",
                 "naïve café ünïcödé"):
        ids = tok.encode(text)
        assert ids[0] == 1 and ids[-1] != 2  # LlamaTokenizer's defaults: BOS, no EOS
        assert tok.decode(ids) == text


def test_add_bos_token_in_tokenizer_config_wins(tmp_path: Path) -> None:
    """HF: an explicit add_bos_token/add_eos_token decides, whatever the post-processor does."""
    off = tmp_path / "off"
    write_bpe_tokenizer(off, config={"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": False})
    assert load_tokenizer(off).encode("hello")[0] != 0
    on = tmp_path / "on"
    write_bpe_tokenizer(on, template_bos=False, config={"bos_token": {"content": "<s>"}, "eos_token": "</s>",
                                                       "add_bos_token": True, "add_eos_token": True})
    ids = load_tokenizer(on).encode("hello")
    assert ids[0] == 0 and ids[-1] == 1
    plain = tmp_path / "plain"  # no flags, no post-processor: nothing added
    write_bpe_tokenizer(plain, template_bos=False)
    assert 0 not in load_tokenizer(plain).encode("hello")


def test_eos_ids_come_from_the_configs(tmp_path: Path) -> None:
    write_bpe_tokenizer(tmp_path, config={})  # no token strings: generation_config.json decides
    (tmp_path / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": [1, 5]}))
    tok = load_tokenizer(tmp_path)
    assert tok.bos_id == 0 and tok.eos_ids == (1, 5)


def test_a_folder_without_a_tokenizer_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MpsimInputError, match=r"no tokenizer \(expected tokenizer.json or tokenizer.model\)"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(MpsimInputError, match=r"tokenizer.json: not a readable tokenizer.json"):
        load_tokenizer(tmp_path)


def test_byte_tokenizer_is_the_identity_on_bytes() -> None:
    tok = ByteTokenizer()
    assert tok.encode("añ") == list("añ".encode()) and tok.decode(tok.encode("añ")) == "añ"
    assert tok.words(list(b"a  b\nc")) == [b"a", b"b", b"c"]


def test_chat_templates() -> None:
    vicuna = chat_prompt("Hi there", BUILTIN_TEMPLATES["vicuna"], "<s>", "</s>")
    assert vicuna.startswith("A chat between a curious user")
    assert vicuna.endswith(" USER: Hi there ASSISTANT:")
    folder = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{% endfor %}"
    assert chat_prompt("x", pick_template("auto", folder, "d"), "<s>", "</s>") == "<s>[user] x"
    with pytest.raises(MpsimInputError, match="has no chat_template"):
        pick_template("auto", None, "d")
    with pytest.raises(MpsimInputError, match="--chat 'nope'"):
        pick_template("nope", None, "d")
    with pytest.raises(MpsimInputError, match="cannot render"):  # the sandbox refuses attribute access
        chat_prompt("x", "{{ messages.__class__.__mro__ }}", "", "")
