"""Tiny Hugging Face model folders made at test time: a random Llama-architecture config.json, its
safetensors (HF parameter names) and a real tokenizer (a byte-level BPE `tokenizer.json` trained with
`tokenizers`, or a sentencepiece `tokenizer.model`) trained on a few KB of text. Nothing is
downloaded."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Summarize: the meeting moved to Tuesday; bring the report.",
    "def parse(self, text):\n    return text.split()\n",
    "Guten Morgen! Wie geht es dir?  Mir geht's gut, danke.",
    "naïve café – ünïcödé ✓ and tabs\tand  double  spaces",
]


def training_text(kb: int = 6) -> str:
    """A few KB of text: a stdlib module's source (every Python install has it) plus TEXTS."""
    src = Path(sysconfig.get_paths()["stdlib"]) / "json" / "decoder.py"
    return src.read_text(encoding="utf-8")[: kb * 1024] + "\n".join(TEXTS)


def write_bpe_tokenizer(folder: Path, vocab: int = 384, *, template_bos: bool = True,
                        config: dict[str, Any] | None = None) -> None:
    """A byte-level BPE tokenizer.json with <s> (id 0) and </s> (id 1); its post-processor adds <s>
    when `template_bos`; `config` becomes tokenizer_config.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<s>", "</s>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([training_text()], trainer)
    if template_bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                           special_tokens=[("<s>", 0)])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    cfg = {"bos_token": "<s>", "eos_token": "</s>"} if config is None else config
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))


def write_sentencepiece(folder: Path, vocab: int = 400) -> None:
    import sentencepiece as spm

    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.txt"
    corpus.write_text(training_text())
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(folder / "tokenizer"),
                                   vocab_size=vocab, model_type="bpe", unk_id=0, bos_id=1, eos_id=2,
                                   pad_id=-1,
                                   byte_fallback=True, minloglevel=2)
    corpus.unlink()
    (folder / "tokenizer.vocab").unlink()


def llama_config(vocab: int, *, layers: int = 2, hidden: int = 64, ffn: int = 128, heads: int = 4,
                 kv_heads: int = 2, context: int = 256, **extra: Any) -> dict[str, Any]:
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "_name_or_path": "test-llama",
            "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "vocab_size": vocab,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": context,
            "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1, **extra}


def write_random_llama(folder: Path, cfg: dict[str, Any], seed: int = 0, scale: float = 0.08) -> None:
    """config.json + model.safetensors with random weights under HF Llama names (fp16)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = h // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    t = {"model.embed_tokens.weight": w(v, h), "model.norm.weight": np.ones(h, np.float16),
         "lm_head.weight": w(v, h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t |= {p + "input_layernorm.weight": np.ones(h, np.float16),
              p + "post_attention_layernorm.weight": np.ones(h, np.float16),
              p + "self_attn.q_proj.weight": w(h, h), p + "self_attn.k_proj.weight": w(kv, h),
              p + "self_attn.v_proj.weight": w(kv, h), p + "self_attn.o_proj.weight": w(h, h),
              p + "mlp.gate_proj.weight": w(f, h), p + "mlp.up_proj.weight": w(f, h),
              p + "mlp.down_proj.weight": w(h, f)}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(t, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))


def make_hf_folder(folder: Path, *, vocab: int = 384, **cfg: Any) -> Path:
    """A complete tiny HF folder: BPE tokenizer.json + random Llama weights matching its vocabulary."""
    write_bpe_tokenizer(folder, vocab)
    write_random_llama(folder, llama_config(vocab, **cfg))
    (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 1}))
    return folder
