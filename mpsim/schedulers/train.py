"""Training the learned scheduler: labels made by the engine, a classifier fitted on the CPU.

Data: prompts from the stdlib *training* files (never the validation or test halves of the held-out
files). For each prompt the engine generates greedily under fp16 and under every candidate switch
point S in {0, L/N, ..., L} of the ladder (prefill high, decode 1..S high, then low); the label is
the earliest S whose continuation's Rouge-L against fp16's is at least that of staying high (S = L),
PMPD's rule. The features are the last layer's K/V after the high-precision prefill.

Training: full-batch AdamW on cross-entropy weighted by inverse class frequency (PMPD balances its
classes by oversampling; weighting is the same in expectation), dropout on the pooling weights, a
fixed seed and one thread (deterministic). A seeded 20% of the prompts is held out of the fit to
report how well the labels are predicted (accuracy and balanced accuracy, the mean per-class recall).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from mpsim.engine.generate import generate
from mpsim.engine.scheduler import FixedScheduler, Ladder, StepState, candidate_points, switch_policy
from mpsim.policy import parse_policy
from mpsim.schedulers.learned import ClassifierConfig, KVClassifier, kv_features
from mpsim.schedulers.runs import DecoderPool, PromptSet, continuations, prompt_set, rouge_scores


@dataclass(frozen=True)
class TrainConfig:
    split: str = "train"    # prompt source (mpsim.schedulers.runs.SPLITS)
    samples: int = 384
    prompt_len: int = 64
    gen_len: int = 32
    segments: int = 3
    queries: int = 2           # learned queries (PMPD: the model's KV heads; the tiny model has 2)
    hidden: int | None = None  # MLP width (None: queries * head_dim, as PMPD)
    dropout: float = 0.1
    metric: str = "rouge_bytes"
    batch: int = 128        # prompts per generation batch
    epochs: int = 150
    lr: float = 1e-3
    weight_decay: float = 1e-2
    holdout: float = 0.2
    seed: int = 0


@dataclass
class TrainingData:
    k: torch.Tensor          # (N, T, D) head-averaged last-layer K after prefill
    v: torch.Tensor
    mask: torch.Tensor       # (N, T) bool
    quality: np.ndarray      # (N, classes) Rouge-L vs fp16 of each candidate switch point
    labels: np.ndarray       # (N,) class of the earliest S that keeps all-high's quality
    seconds: float           # wall time of the generations


class _KVProbe(FixedScheduler):
    """A fixed schedule that keeps the prefill K/V it is shown at decode step 1."""

    kv: tuple[torch.Tensor, torch.Tensor] | None = None
    lens: tuple[int, ...] = ()

    def decode_bits(self, state: StepState) -> int:
        if state.step == 1:
            self.kv, self.lens = state.last_kv, state.prompt_lens
        return super().decode_bits(state)


def labels_from_quality(quality: np.ndarray) -> np.ndarray:
    """Earliest class whose quality is >= the last class's (staying high); (N, C) -> (N,)."""
    keeps = quality >= quality[:, -1:]
    return keeps.argmax(axis=1)


def _score(tokens: list[list[int]], ref: list[list[int]], metric: str, pset: PromptSet) -> np.ndarray:
    by_tokens, by_words = rouge_scores(tokens, ref, pset.words)
    return by_words if metric == "rouge_words" else by_tokens


def make_training_data(pool: DecoderPool, ladder: Ladder, cfg: TrainConfig,
                       progress: Callable[[str], None] | None = None,
                       prompts: PromptSet | None = None) -> TrainingData:
    """Labels and K/V features on `prompts` (default: cfg.samples windows of the stdlib training files)."""
    start = time.perf_counter()
    pset = prompts or prompt_set(cfg.split, cfg.samples, cfg.prompt_len, cfg.gen_len, cfg.seed)
    points = candidate_points(cfg.gen_len, cfg.segments)
    parts = []
    for lo in range(0, len(pset), cfg.batch):
        parts.append(_chunk(pool, ladder, pset.subset(lo, lo + cfg.batch), points, cfg))
        if progress is not None:
            progress(f"labels: {min(lo + cfg.batch, len(pset))}/{len(pset)} prompts, "
                     f"{time.perf_counter() - start:.0f} s")
    k = torch.cat([p[0] for p in parts])
    v = torch.cat([p[1] for p in parts])
    mask = torch.cat([p[2] for p in parts])
    quality = np.concatenate([p[3] for p in parts])
    return TrainingData(k, v, mask, quality, labels_from_quality(quality), time.perf_counter() - start)


def _chunk(pool: DecoderPool, ladder: Ladder, chunk: PromptSet, points: list[int],
           cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray]:
    fp16 = parse_policy("fp16")
    ref = continuations(generate(pool.get(fp16), chunk.prompts, cfg.gen_len, FixedScheduler(fp16),
                                 eos=chunk.eos), chunk)
    cols = []
    probe: _KVProbe | None = None
    for s in points:
        policy = parse_policy(switch_policy(ladder, s, cfg.gen_len))
        sched = _KVProbe(policy) if probe is None else FixedScheduler(policy)
        gen = generate(pool.get(policy), chunk.prompts, cfg.gen_len, sched, eos=chunk.eos)
        probe = sched if isinstance(sched, _KVProbe) else probe
        cols.append(_score(continuations(gen, chunk), ref, cfg.metric, chunk))
    if probe is None or probe.kv is None:
        raise ValueError(f"gen_len={cfg.gen_len}: the learned scheduler needs at least one decode step")
    k, v, mask = kv_features(probe.kv, probe.lens)
    return k, v, mask, np.stack(cols, axis=1)


def split_indices(n: int, holdout: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    cut = round(n * (1 - holdout))
    return np.sort(order[:cut]), np.sort(order[cut:])


def train_classifier(data: TrainingData, cfg: TrainConfig) -> tuple[KVClassifier, dict[str, Any]]:
    """Fit on the training part; returns the model and a record of the fit (accuracies, prior)."""
    torch.manual_seed(cfg.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        d = int(data.k.shape[-1])
        model = KVClassifier(ClassifierConfig(d, cfg.segments, cfg.hidden or cfg.queries * d, cfg.queries,
                                              cfg.dropout))
        nn.init.normal_(model.query, std=d ** -0.5)
        fit, held = split_indices(len(data.labels), cfg.holdout, cfg.seed)
        y = torch.from_numpy(data.labels).long()
        weight = class_weights(data.labels[fit], model.cfg.classes)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        start = time.perf_counter()
        model.train()
        for _ in range(cfg.epochs):
            opt.zero_grad()
            logits = model(data.k[fit], data.v[fit], data.mask[fit])
            loss = nn.functional.cross_entropy(logits, y[fit], weight=weight)
            loss.backward()
            opt.step()
        model.eval()
        record = _record(model, data, fit, held, float(loss.detach()), time.perf_counter() - start, cfg)
    finally:
        torch.set_num_threads(threads)
    return model, record


def class_weights(labels: np.ndarray, classes: int) -> torch.Tensor:
    """Inverse class frequency, normalized to mean 1 over the classes present (absent ones: 0)."""
    counts = np.bincount(labels, minlength=classes).astype(float)
    w = np.divide(1.0, counts, out=np.zeros(classes), where=counts > 0)
    return torch.tensor(w * (counts > 0).sum() / w.sum(), dtype=torch.float32)


def _predict(model: KVClassifier, data: TrainingData, idx: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(data.k[idx], data.v[idx], data.mask[idx]).argmax(-1).numpy()


def _accuracy(model: KVClassifier, data: TrainingData, idx: np.ndarray) -> tuple[float, float]:
    """(accuracy, balanced accuracy) on the prompts `idx`."""
    if len(idx) == 0:
        return float("nan"), float("nan")
    pred, y = _predict(model, data, idx), data.labels[idx]
    recalls = [float((pred[y == c] == c).mean()) for c in np.unique(y)]
    return float((pred == y).mean()), float(np.mean(recalls))


def _record(model: KVClassifier, data: TrainingData, fit: np.ndarray, held: np.ndarray, loss: float,
            seconds: float, cfg: TrainConfig) -> dict[str, Any]:
    counts = np.bincount(data.labels, minlength=model.cfg.classes)
    majority_class = np.bincount(data.labels[fit]).argmax()
    majority = float((data.labels[held] == majority_class).mean()) if len(held) else float("nan")
    fit_acc, held_acc = _accuracy(model, data, fit), _accuracy(model, data, held)
    predicted = np.bincount(_predict(model, data, held), minlength=model.cfg.classes)
    return {
        "train_config": asdict(cfg),
        "class_prior": (counts / counts.sum()).round(6).tolist(),
        "label_counts": counts.tolist(),
        "final_loss": round(loss, 6),
        "accuracy_fit": round(fit_acc[0], 4),
        "accuracy_heldout": round(held_acc[0], 4),
        "balanced_accuracy_heldout": round(held_acc[1], 4),
        "majority_class_heldout": round(majority, 4),
        "predicted_counts_heldout": predicted.tolist(),
        "label_generation_s": round(data.seconds, 1),
        "fit_s": round(seconds, 1),
    }
