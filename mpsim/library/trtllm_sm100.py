"""TensorRT-LLM's attention op on Blackwell (sm_100), PyTorch flow (`TrtllmAttention`): kernel names,
the dispatch rule, configs and the row builder (`attention_row(..., kernel="trtllm_sm100")`);
mpsim/sim/gpu/library/trtllm_sm100.py prices the rows. The same op on Hopper (XQA / MMHA, fmha_v2)
is the trtllm room's (mpsim/library/trtllm_attention.py).

What runs, read from NVIDIA/TensorRT-LLM (cpp/tensorrt_llm/kernels/):
- generation: xqaDispatcher.cpp sets `mUseTllmGen` on the SM100 family; `runImpl` then runs
  `invokeBuildDecoderInfo` (gptKernels.cu: the cumulative KV lengths and the FMHA scales; "always
  needed as cu_kv_seq_lens is needed by trtllm-gen kernels", where Hopper's XQA path skips it for
  a plain decode, `isBuildDecoderInfoKernelNeeded`), the QKV-preprocessing kernel
  (`invokeQKVPreprocessing`: RoPE on Q and K, the new token's K/V appended to the paged cache, Q
  converted to e4m3 when the cache is e4m3: "both the NVFP4 KV kernels and FP8 KV kernels uses FP8
  input for Q") and then the trtllm-gen generation kernel (`TllmGenFmhaRunner`,
  FmhaKernelType::Generation). `shouldUse` falls back to MMHA for beam search, streamingLLM and
  variable windows, and, in the stored source (not pinned to a release), above 16 query heads per
  KV head. The published B200 rows (TRT-LLM 1.3.0rc20) disagree on that one: groups of 24 and 32 run
  at 13-16 us where MMHA would take 48-280 us, groups of 64-128 at MMHA's price; so the limit is
  32, an observation of b200_sxm's generation rows (docs/validation.md "TRT-LLM attention on
  Blackwell"), and the trtllm-gen runner's own limit: its generation kernels take at most 32 query
  heads per KV head (fmhaKernels.h `hashFromRunnerParams`): flashinfer_trtllm.TG_KEEP_MAX_GROUP.
  Vanilla MHA stays on trtllm-gen (the Hopper rule's MHA exclusion is XQA's).
- context: fmhaDispatcher.cpp runs trtllm-gen (`isSM100Family() && headSize != 80`; head size 80
  falls back to fmha_v2, not modelled here) after the same preprocessing as on Hopper. With an e4m3
  cache the context FMHA reads e4m3 K/V with e4m3 Q, as on Hopper (the trtllm room's fmha_config);
  the FP8 context FMHA (`fp8_attention`) likewise runs fp8 MMAs. A CTA holds one query head
  (numHeadsPerCta = 1 in fmhaKernels.h's grid unless the kernel groups heads, and "Grouping Q heads
  doesn't work with the packedQkv layout" the context call reads, checkFmhaOptions): the query group
  is not packed into the 128-row tile as in FlashInfer's paged call. The rows agree for every cache
  and compute dtype: 256 one-token prompts of 64 query heads take 294-353 us whatever the KV heads
  (1-8), about one 3 us CTA wave per 148 (sequence, query head) CTAs, where vLLM's packed call takes
  13-32 us growing with the KV heads (b200_sxm context tables, TRT-LLM 1.3.0rc20 and vLLM 0.24.0).
  A one-token prompt runs the context kernel too, not the generation one.

The trtllm-gen kernels are the cubins FlashInfer also ships (vLLM on Blackwell, the flashinfer_trtllm
room): their tiles and split rule are that room's assumptions (mpsim/library/flashinfer_trtllm.py).
"""

from __future__ import annotations

from dataclasses import replace

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS
from mpsim.library.flashinfer_trtllm import TG_KEEP_MAX_GROUP, tg_config
from mpsim.library.rows import (
    Row,
    apply_config,
    check_prefill_chunk,
    window_entry,
)
from mpsim.library.trtllm_attention import mmha_config, op_row

TRTLLM_TG_DECODE = "trtllm_tg_decode"
TRTLLM_TG_CONTEXT = "trtllm_tg_context"
KERNELS = (TRTLLM_TG_DECODE, TRTLLM_TG_CONTEXT)
FMHA_V2_HEAD_DIM = 80      # fmhaDispatcher.cpp: trtllm-gen "only supports power of 2 head sizes"


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int = GPU_SMS, fp8_attention: bool = False,
                  window: int = 0) -> Row:
    """A TensorRT-LLM attention op row on sm_100: the context (q_len > 1, or a one-token prompt) or
    generation call, each one launch row standing for the preprocessing kernel and the trtllm-gen
    kernel (MMHA where the dispatch rule falls back to it). 8-bit KV is e4m3; `l2_warm`: replayed
    back to back (a cache that fits the L2 stays there). RoPE and the KV append are inside the op
    (`kv_append` is implied); `window`: a sliding window, in the config where it binds (the
    trtllm-gen work's tile range, as vLLM's FlashInfer rows)."""
    fp8_kv = kv_bits == 8
    row = op_row(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, kv_block)
    win = window_entry(kv_len, window)
    if q_len > 1 or kv_len == 1:  # a context call (a one-token prompt has no cache before it)
        if head_dim == FMHA_V2_HEAD_DIM:
            raise MpsimInputError("attention: TensorRT-LLM's sm_100 context with head_dim 80 runs "
                                  "fmha_v2 (fmhaDispatcher.cpp), not modelled on Blackwell")
        if q_len > 1:
            check_prefill_chunk("TensorRT-LLM context", batch, q_len, kv_len, heads, kv_heads, head_dim)
        cfg = tg_config(batch, q_len, heads, kv_heads, head_dim, kv_len, 8 if fp8_kv or fp8_attention
                        else 16, kv_append=False, l2_warm=False, sms=sms, context=True,
                        pack_gqa=False)
        return apply_config(row, replace(cfg, kernel=TRTLLM_TG_CONTEXT, extra=(*cfg.extra, *win)))
    if fp8_attention:
        raise MpsimInputError("attention: fp8_attention describes TensorRT-LLM's context FMHA")
    if heads // kv_heads > TG_KEEP_MAX_GROUP:  # MMHA (not the stored xqaDispatcher.cpp's 16)
        cfg = mmha_config(batch, heads, kv_heads, head_dim, kv_len, fp8_kv, sms)
        return apply_config(row, replace(cfg, extra=(*cfg.extra, ("l2_warm", int(l2_warm)), *win)))
    cfg = tg_config(batch, 1, heads, kv_heads, head_dim, kv_len, kv_bits, kv_append=False,
                    l2_warm=l2_warm, sms=sms)
    return apply_config(row, replace(cfg, kernel=TRTLLM_TG_DECODE, extra=(*cfg.extra, *win)))
