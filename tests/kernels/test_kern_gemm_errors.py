"""GEMM launchers refuse bad arguments with a ValueError that names the argument (no garbage output)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mpsim.engine.kernel_weights import anyprec_weight, group_weight
from mpsim.kernels import runtime
from mpsim.kernels.gemm import linear
from mpsim.kernels.gemm_anyprec import dequant_anyprec, gemm_anyprec
from mpsim.kernels.gemm_fp16 import gemm_fp16
from mpsim.kernels.gemm_group import dequant_group, gemm_group
from mpsim.kernels.launch_config import LaunchConfig
from mpsim.reference.anyprec import quantize_anyprec
from mpsim.reference.group_quant import quantize_group

N, K = 40, 96
RNG = np.random.default_rng(0)
W = RNG.standard_normal((N, K)).astype(np.float16)
GW = group_weight(quantize_group(W, 4, 32), torch.device("cpu"))
APW = anyprec_weight(quantize_anyprec(W, 4, 2), 3, torch.device("cpu"))


def x16(m: int = 2, k: int = K) -> torch.Tensor:
    return torch.randn(m, k).half()


def group(x: torch.Tensor, **over: object) -> torch.Tensor:
    args: dict = dict(qweight=GW.qweight, scales=GW.scales, zeros=GW.zeros, bits=4, group_size=32)
    args.update(over)
    q, s, z = args.pop("qweight"), args.pop("scales"), args.pop("zeros")
    return gemm_group(x, q, s, z, **args)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: gemm_fp16(x16().float(), torch.from_numpy(W)), "x"),
    (lambda: gemm_fp16(x16(k=K + 1), torch.from_numpy(W)), "weight"),
    (lambda: gemm_fp16(x16(), torch.from_numpy(W).float()), "weight"),
    (lambda: gemm_fp16(x16(K, 2).T, torch.from_numpy(W)), "x"),  # non-contiguous along K
    (lambda: gemm_fp16(x16(), torch.from_numpy(W).T.contiguous().T), "weight"),
    (lambda: gemm_fp16(x16(), torch.from_numpy(W), torch.zeros(N + 1).half()), "bias"),
    (lambda: gemm_fp16(x16(), torch.from_numpy(W), torch.zeros(N)), "bias"),
    (lambda: gemm_fp16(x16()[None], torch.from_numpy(W)), "x"),
    (lambda: group(x16(), qweight=GW.qweight.float()), "qweight"),
    (lambda: group(x16(), qweight=GW.qweight[:, :-1]), "qweight"),
    (lambda: group(x16(), qweight=torch.cat([GW.qweight] * 2, 1)[:, ::2]), "qweight"),
    (lambda: group(x16(), scales=GW.scales[:, :2]), "scales"),
    (lambda: group(x16(), zeros=GW.zeros.float()), "zeros"),
    (lambda: group(x16(), bits=5), "bits"),
    (lambda: group(x16(), group_size=48), "group_size"),
    (lambda: group(x16(), group_size=64), "group_size"),  # 64 does not divide KP=96
    (lambda: group(x16(k=200)), "qweight"),
    (lambda: dequant_group(GW.qweight, GW.scales, GW.zeros.half()[:1], k=K, bits=4,
                           group_size=32), "zeros"),
    (lambda: gemm_anyprec(x16(), APW.qweight, APW.luts[3], bits=4), "lut"),
    (lambda: gemm_anyprec(x16(), APW.qweight, APW.luts[3], bits=5), "bits"),
    (lambda: gemm_anyprec(x16(), APW.qweight[0], APW.luts[3], bits=3), "qweight"),
    (lambda: gemm_anyprec(x16(k=K + 32), APW.qweight, APW.luts[3], bits=3), "qweight"),
    (lambda: dequant_anyprec(APW.qweight, APW.luts[3].float(), k=K, bits=3), "lut"),
    (lambda: gemm_anyprec(x16(), APW.qweight.transpose(1, 2).contiguous().transpose(1, 2),
                          APW.luts[3], bits=3), "qweight"),
])
def test_launcher_errors_name_the_argument(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


@pytest.mark.parametrize("cfg", [
    LaunchConfig("gemm_fp16_kernel", (2,), 32, 32, 32, 4, 1),        # wrong family
    LaunchConfig("gemm_group_kernel", (2,), 32, 32, 32, 4, 1),       # tiled GEMM without group_m
    LaunchConfig("gemv_group_kernel", (1, 1), 1, 32, 32, 4, 1),      # block_m < M, too few tiles
    LaunchConfig("gemv_group_kernel", (2, 1), 2, 32, 48, 4, 1),      # block_k not a power of two
    LaunchConfig("gemv_group_kernel", (2, 3), 2, 32, 32, 4, 1, 2),   # grid disagrees with split
])
def test_hand_configs_are_checked(cfg: LaunchConfig) -> None:
    with pytest.raises(ValueError, match=r"^config\b"):
        group(x16(), config=cfg)


def test_linear_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match=r"^weight\b"):
        linear(x16(), torch.from_numpy(W))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^x\b"):
        linear(x16(k=K - 1), GW)
    with pytest.raises(ValueError, match=r"^bits\b"):
        APW.at_bits(1)


def test_runtime_refuses_to_run_without_cuda_or_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the kernels compile for it")
    assert runtime.device() == torch.device("cpu") and not runtime.on_gpu()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        runtime.device()
