"""The reference's numpy weight formats as kernel weight containers on the kernel device.

reference/ quantizes (numpy); kernels/ multiply (torch tensors on their device). The engine, which
stands above both, converts one into the other here, so kernels/ never imports reference/.
"""

from __future__ import annotations

import torch

from mpsim.kernels.gemm import AnyPrecWeight, GroupWeight
from mpsim.reference.anyprec import AnyPrecWeight as RefAnyPrecWeight
from mpsim.reference.group_quant import GroupQuantWeight


def group_weight(gw: GroupQuantWeight, device: torch.device) -> GroupWeight:
    """A group-quantized weight's codes, scales and zeros as a GroupWeight on `device`."""
    return GroupWeight(torch.from_numpy(gw.qweight).to(device), torch.from_numpy(gw.scales).to(device),
                       torch.from_numpy(gw.zeros).to(device), gw.bits, gw.group_size, gw.k)


def anyprec_weight(apw: RefAnyPrecWeight, bits: int, device: torch.device) -> AnyPrecWeight:
    """An any-precision weight's parent planes and every LUT on `device`, read at `bits`."""
    luts = {b: torch.from_numpy(t).to(device) for b, t in apw.luts.items()}
    return AnyPrecWeight(torch.from_numpy(apw.qweight).to(device), luts, bits, apw.k)
