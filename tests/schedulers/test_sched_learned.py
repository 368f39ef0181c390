"""The learned scheduler: its input (the last layer's K/V after prefill, averaged over heads), its
output classes (switch segments), the label rule, deterministic training, safe save/load, and the
shipped classifier for the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_cases import SMALL

from mpsim.engine.backends import make_backend
from mpsim.engine.generate import generate
from mpsim.engine.model import Decoder
from mpsim.engine.scheduler import Ladder, candidate_points, switch_step
from mpsim.engine.weights import dummy_weights
from mpsim.errors import MpsimInputError
from mpsim.schedulers.learned import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    ClassifierConfig,
    KVClassifier,
    class_to_switch,
    kv_features,
    learned_scheduler,
    load_classifier,
    save_classifier,
)
from mpsim.schedulers.runs import DecoderPool
from mpsim.schedulers.train import (
    TrainConfig,
    TrainingData,
    labels_from_quality,
    make_training_data,
    train_classifier,
)

LADDER = Ladder((4, 3))


def _model(head_dim: int = SMALL.head_dim, seed: int = 0) -> KVClassifier:
    torch.manual_seed(seed)
    m = KVClassifier(ClassifierConfig(head_dim, segments=3, hidden=16))
    torch.nn.init.normal_(m.query)
    return m.eval()


def test_features_average_heads_and_mask_the_padding() -> None:
    k = torch.randn(3, 2, 5, 8, dtype=torch.float16)
    v = torch.randn(3, 2, 5, 8, dtype=torch.float16)
    fk, fv, mask = kv_features((k, v), (5, 2, 3))
    assert fk.shape == fv.shape == (3, 5, 8) and fk.dtype == torch.float32
    assert torch.equal(fk, k.float().mean(dim=1)) and torch.equal(fv, v.float().mean(dim=1))
    assert mask.tolist()[1] == [True, True, False, False, False]
    with pytest.raises(ValueError, match="prompt_lens"):
        kv_features((k, v), (5, 0, 3))
    with pytest.raises(ValueError, match="last_kv"):
        kv_features((k[0], v[0]), (5,))


def test_classifier_output_is_one_logit_per_segment_and_ignores_padding() -> None:
    m = _model(8)
    k, v = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    mask = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])
    out = m(k, v, mask)
    assert out.shape == (2, 4)
    k2, v2 = k.clone(), v.clone()
    k2[0, 4:], v2[0, 4:] = 100.0, -100.0  # change only padded positions of sequence 0
    assert torch.equal(m(k2, v2, mask)[0], out[0])


def test_classes_map_to_the_candidate_points() -> None:
    assert [class_to_switch(c, 3, 32) for c in range(4)] == candidate_points(32, 3)
    assert [class_to_switch(c, 4, 20) for c in range(5)] == candidate_points(20, 4)


def test_learned_scheduler_switches_each_prompt_at_its_class() -> None:
    dec = Decoder(dummy_weights(SMALL, 3), LADDER.policy(), make_backend("reference"))
    prompts = [[i, i + 1, 2 * i + 5, 9] for i in range(1, 9)]
    sched = learned_scheduler(_model(), LADDER, gen_len=9)
    out = generate(dec, prompts, 9, sched)
    assert len(sched.chosen) == 8 and set(sched.chosen) <= {0, 1, 2, 3}
    got = [switch_step(log, 4) for log in out.decode_bits]
    assert got == [min(class_to_switch(c, 3, 9), 8) for c in sched.chosen]


def test_labels_are_the_earliest_point_keeping_all_high_quality() -> None:
    q = np.array([[0.5, 0.9, 0.9, 0.9],   # S = L/3 is the first to match all-high
                  [1.0, 0.2, 0.3, 0.8],   # S = 0 already beats all-high
                  [0.1, 0.2, 0.3, 0.4]])  # only staying high keeps it
    assert labels_from_quality(q).tolist() == [1, 0, 3]


def _toy_data(n: int = 24, seed: int = 0) -> TrainingData:
    g = torch.Generator().manual_seed(seed)
    k, v = torch.randn(n, 5, 8, generator=g), torch.randn(n, 5, 8, generator=g)
    labels = (k[:, :, 0].mean(1) > 0).long().numpy() * 3  # learnable from K
    return TrainingData(k, v, torch.ones(n, 5, dtype=torch.bool), np.zeros((n, 4)), labels, 0.0)


def test_training_is_deterministic_and_fits_a_learnable_rule() -> None:
    cfg = TrainConfig(epochs=150, hidden=16, lr=3e-3, seed=1)
    a, rec = train_classifier(_toy_data(), cfg)
    b, _ = train_classifier(_toy_data(), cfg)
    pairs = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs)
    assert rec["accuracy_fit"] >= 0.9 and sum(rec["label_counts"]) == 24
    assert rec["class_prior"][1] == rec["class_prior"][2] == 0.0


def test_training_data_from_the_engine(tmp_path: Path) -> None:
    pool = DecoderPool(dummy_weights(SMALL, 4))
    cfg = TrainConfig(samples=5, prompt_len=6, gen_len=7, batch=3, epochs=5, hidden=8)
    data = make_training_data(pool, LADDER, cfg)
    assert data.k.shape == (5, 6, SMALL.head_dim) and data.mask.all()
    assert data.quality.shape == (5, 4) and np.array_equal(data.labels, labels_from_quality(data.quality))
    model, record = train_classifier(data, cfg)
    assert model.cfg.head_dim == SMALL.head_dim and len(record["class_prior"]) == 4


def test_save_load_round_trip_and_bad_files(tmp_path: Path) -> None:
    m = _model(8)
    save_classifier(m, tmp_path, {"class_prior": [1.0, 0, 0, 0]})
    back, record = load_classifier(tmp_path)
    k, v, mask = torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.ones(2, 3, dtype=torch.bool)
    assert torch.equal(back(k, v, mask), m(k, v, mask)) and record["class_prior"][0] == 1.0
    cfg = json.loads((tmp_path / CONFIG_FILE).read_text())
    cfg["classifier"]["head_dim"] = 16
    (tmp_path / CONFIG_FILE).write_text(json.dumps(cfg))
    with pytest.raises(MpsimInputError, match="do not match"):
        load_classifier(tmp_path)
    (tmp_path / CONFIG_FILE).write_text(json.dumps({"format": "other"}))
    with pytest.raises(MpsimInputError, match="expected format"):
        load_classifier(tmp_path)
    (tmp_path / WEIGHTS_FILE).write_bytes(b"not safetensors")
    (tmp_path / CONFIG_FILE).write_text(json.dumps({"format": "mpsim-learned-scheduler", "version": 1,
                                                    "classifier": {"head_dim": 8, "segments": 3, "hidden": 16,
                                                                   "queries": 1, "dropout": 0.1}}))
    with pytest.raises(MpsimInputError, match="not a readable safetensors"):
        load_classifier(tmp_path)


def test_the_shipped_classifier_fits_the_tiny_model() -> None:
    from mpsim.tiny.shipped import tiny_dir, tiny_spec

    model, record = load_classifier(tiny_dir())
    assert model.cfg.head_dim == tiny_spec().head_dim
    assert len(record["class_prior"]) == model.cfg.classes and record["ladder"] == [4, 3]
