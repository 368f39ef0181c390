"""`mpsim quantize`: quantize an HF folder once into a self-contained quantized folder, and load one.

Writing reads the source memory-mapped, one decoder layer at a time (Q/K/V and gate/up fused as the
engine launches them), quantizes it on every core (mpsim.engine.parallel_quant) and keeps only the
quantized arrays: the fp16 model is never held twice. Layout and header: mpsim/engine/quantized.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from mpsim.engine.kernel_weights import anyprec_weight, group_weight
from mpsim.engine.mapped import MappedTensors, write_safetensors
from mpsim.engine.parallel_quant import quantize_anyprec_parallel, quantize_group_parallel
from mpsim.engine.quantize import SEED_BITS, LinearSet, QuantizedLayer, policy_widths
from mpsim.engine.quantized import HEADER, TENSORS, QuantInfo, file_digest, header_dict, open_tensors
from mpsim.engine.tokenizer import TOKENIZER_FILES
from mpsim.engine.weights import LayerParams, Linear, ModelParams, Norm, hf_names, load_hf_weights
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec
from mpsim.policy import Policy
from mpsim.reference.anyprec import AnyPrecWeight as RefAnyPrec
from mpsim.reference.group_quant import WHOLE_ROW, GroupQuantWeight
from mpsim.traces.accounting import padded_k
from mpsim.traces.atomic import atomic_write, write_text_atomic
from mpsim.traces.atomic_folder import atomic_folder

OUTPUT_FILES = (TENSORS, HEADER, "config.json", *TOKENIZER_FILES)  # what `quantize --out` holds

FUSED = {"qkv": ("q", "k", "v"), "gate_up": ("gate", "up"), "o": ("o",), "down": ("down",),
         "fc1": ("fc1",), "fc2": ("fc2",)}


def weight_format(policy: Policy) -> dict[str, int | str]:
    """The stored format a policy needs: its group format, or the any-precision parent it reads."""
    if policy.family == "uniform":
        group = 0 if policy.group_size == 0 else int(policy.group_size or 128)
        return {"family": "uniform", "bits": policy.prefill_bits, "group_size": group}
    if policy.family == "anyprec":
        return {"family": "anyprec", "bits": max(4, policy.parent_bits),
                "seed_bits": min(SEED_BITS, min(policy_widths(policy)))}
    raise MpsimInputError(f"--policy {policy.spelling!r}: quantize needs a w{{b}} or ap{{b}} policy "
                          "(fp16 is the source checkpoint itself)")


def total_rows(spec: ModelSpec) -> int:
    return spec.num_layers * sum(n for n, _, _ in spec.linear_shapes().values())


def _sensitivity(sens: MappedTensors | None, spec: ModelSpec, i: int, module: str) -> np.ndarray | None:
    if sens is None:
        return None
    names = hf_names(spec)
    parts = []
    for role in FUSED[module]:
        name = names[role].format(i=i) + ".weight"
        if name not in sens:
            files = sorted({str(v.file) for v in sens.infos.values()})
            raise MpsimInputError(f"--sensitivity {', '.join(files)}: no tensor '{name}'")
        parts.append(sens.float32(name))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _linear_tensors(prefix: str, lin: Linear, fmt: dict[str, int | str], sens: np.ndarray | None,
                    progress: Callable[[int], None] | None) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    if fmt["family"] == "anyprec":
        if sens is not None and sens.shape != lin.weight.shape:
            raise MpsimInputError(f"--sensitivity: '{prefix}' has shape {sens.shape}, the weight "
                                  f"{lin.weight.shape}")
        apw = quantize_anyprec_parallel(lin.weight, int(fmt["bits"]), int(fmt["seed_bits"]), sens, progress)
        out[prefix + ".planes"] = apw.qweight
        out |= {f"{prefix}.lut{b}": t for b, t in apw.luts.items()}
    else:
        g = int(fmt["group_size"])
        gw = quantize_group_parallel(lin.weight, int(fmt["bits"]), WHOLE_ROW if g == 0 else g,
                                     progress=progress)
        out |= {prefix + ".qweight": gw.qweight, prefix + ".scales": gw.scales, prefix + ".zeros": gw.zeros}
    if lin.bias is not None:
        out[prefix + ".bias"] = lin.bias
    return out


def _norm_tensors(prefix: str, n: Norm) -> dict[str, np.ndarray]:
    return {prefix + ".weight": n.weight} | ({} if n.bias is None else {prefix + ".bias": n.bias})


def quantize_folder(src: Path, out: Path, spec: ModelSpec, policy: Policy, *,
                    sensitivity: Path | None = None,
                    progress: Callable[[int], None] | None = None) -> list[Path]:
    """Quantize `src` (config.json + safetensors + tokenizer) into `out`; returns the files written."""
    fmt = weight_format(policy)
    if sensitivity is not None and fmt["family"] != "anyprec":
        raise MpsimInputError("--sensitivity weights the any-precision clustering; "
                              f"{policy.spelling!r} is group quantization")
    if out.resolve() == src.resolve():
        raise MpsimInputError(f"--out {out}: must differ from the source folder")
    sens = MappedTensors([sensitivity]) if sensitivity is not None else None
    params = load_hf_weights(src, spec)
    tensors: dict[str, np.ndarray] = {"embed": params.embed, **_norm_tensors("final_norm", params.final_norm)}
    if not spec.tied_embeddings:
        tensors["lm_head.weight"] = params.lm_head.weight
    if params.lm_head.bias is not None:
        tensors["lm_head.bias"] = params.lm_head.bias
    for i, layer in enumerate(params.layers):  # one fp16 layer in memory at a time
        tensors |= _norm_tensors(f"layers.{i}.attn_norm", layer.attn_norm)
        if layer.mlp_norm is not None:
            tensors |= _norm_tensors(f"layers.{i}.mlp_norm", layer.mlp_norm)
        for module, lin in layer.linears.items():
            tensors |= _linear_tensors(f"layers.{i}.{module}", lin, fmt, _sensitivity(sens, spec, i, module),
                                       progress)
    sens_record = (None if sensitivity is None
                   else {"file": sensitivity.name, "sha256": file_digest(sensitivity)})
    header = header_dict(policy, tensors, fmt, sens_record, src, spec.as_dict())
    if sens_record is None and fmt["family"] == "anyprec":
        header["sensitivity"] = None
        header["clustering"] = "every weight weighted equally (no --sensitivity)"
    with atomic_folder(out, OUTPUT_FILES) as tmp:  # replaced as a whole: never half a checkpoint
        write_safetensors(tmp / TENSORS, tensors, {"format": "mpsim-quantized"})
        write_text_atomic(json.dumps(header, indent=1) + "\n", tmp / HEADER)
        for name in ("config.json", *TOKENIZER_FILES):
            if (src / name).exists():
                atomic_write(tmp / name, lambda t, name=name: shutil.copyfile(src / name, t))
        written = [out / name for name in OUTPUT_FILES if (tmp / name).exists()]
    return written


def expected_tensors(spec: ModelSpec, info: QuantInfo) -> dict[str, tuple[str, list[int]]]:
    """Every tensor a quantized folder of this model and format must hold: name -> (dtype, shape)."""
    h, want = spec.hidden, {}
    norm_bias = spec.norm == "layer"

    def norm(prefix: str) -> None:
        want[prefix + ".weight"] = ("F16", [h])
        if norm_bias:
            want[prefix + ".bias"] = ("F16", [h])

    want["embed"] = ("F16", [spec.vocab, h])
    norm("final_norm")
    if not spec.tied_embeddings:
        want["lm_head.weight"] = ("F16", [spec.vocab, h])
    if spec.lm_head_bias:
        want["lm_head.bias"] = ("F16", [spec.vocab])
    for i in range(spec.num_layers):
        norm(f"layers.{i}.attn_norm")
        if not spec.parallel_attn_mlp:
            norm(f"layers.{i}.mlp_norm")
        for module, (n, k, bias) in spec.linear_shapes().items():
            want |= _linear_expected(f"layers.{i}.{module}", n, k, bias, info)
    return want


Expected = dict[str, tuple[str, list[int]]]


def _linear_expected(prefix: str, n: int, k: int, bias: bool, info: QuantInfo) -> Expected:
    out: Expected = {}
    if info.family == "anyprec":
        out[prefix + ".planes"] = ("I32", [info.bits, n, padded_k(k, None) // 32])
        out |= {f"{prefix}.lut{b}": ("F16", [n, 1 << b]) for b in info.widths()}
    else:
        g = info.group_size or 0
        kp = padded_k(k, None if g == 0 else g)
        out[prefix + ".qweight"] = ("I32", [n, kp * info.bits // 32])
        groups = 1 if g == 0 else kp // g
        out[prefix + ".scales"] = ("F16", [n, groups])
        out[prefix + ".zeros"] = ("F16", [n, groups])
    if bias:
        out[prefix + ".bias"] = ("F16", [n])
    return out


def load_quantized(info: QuantInfo, spec: ModelSpec,
                   device: torch.device) -> tuple[ModelParams, list[QuantizedLayer]]:
    """fp16 embeddings/norms/lm_head and every layer's stored weights on `device` (memory-mapped)."""
    want = expected_tensors(spec, info)
    for name, (dtype, shape) in want.items():
        got = info.tensors.get(name)
        if got is None or [got.get("dtype"), got.get("shape")] != [dtype, shape]:
            found = "missing" if got is None else f"{got.get('dtype')} {got.get('shape')}"
            raise MpsimInputError(f"{info.folder / HEADER}: tensor '{name}' is {found}; {spec.name} in this "
                                  f"format needs {dtype} {shape}")
    t = open_tensors(info)

    def norm(prefix: str) -> Norm:
        return Norm(t.raw(prefix + ".weight"), t.raw(prefix + ".bias") if prefix + ".bias" in t else None)

    layers, quantized = [], []
    for i in range(spec.num_layers):
        mlp = None if spec.parallel_attn_mlp else norm(f"layers.{i}.mlp_norm")
        layers.append(LayerParams(norm(f"layers.{i}.attn_norm"), mlp, {}))
        quantized.append(QuantizedLayer({m: _linear_set(t, f"layers.{i}.{m}", n, k, info, device)
                                         for m, (n, k, _) in spec.linear_shapes().items()}))
    embed = t.raw("embed")
    head_w = embed if spec.tied_embeddings else t.raw("lm_head.weight")
    head_b = t.raw("lm_head.bias") if "lm_head.bias" in t else None
    return ModelParams(spec, embed, layers, norm("final_norm"), Linear(head_w, head_b)), quantized


def _linear_set(t: MappedTensors, prefix: str, n: int, k: int, info: QuantInfo,
                device: torch.device) -> LinearSet:
    bias = torch.from_numpy(t.raw(prefix + ".bias")).to(device) if prefix + ".bias" in t else None
    if info.family == "anyprec":
        luts = {b: t.raw(f"{prefix}.lut{b}") for b in info.widths()}
        ref = RefAnyPrec(t.raw(prefix + ".planes"), luts, info.bits, info.widths()[0], k, n)
        base = anyprec_weight(ref, info.bits, device)
        return LinearSet({b: base.at_bits(b) for b in info.widths()}, bias)
    scales = t.raw(prefix + ".scales")
    gw = GroupQuantWeight(t.raw(prefix + ".qweight"), scales, t.raw(prefix + ".zeros"), info.bits,
                          padded_k(k, info.group_size or None) // scales.shape[1], k, n)
    return LinearSet({info.bits: group_weight(gw, device)}, bias)
