"""The shipped hardware files: all load, all numbers cite sources, published values pinned."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.hw_models.schema import Block, GpuSpec, NpuSpec
from mpsim.hw_models.validate import schema_keys

SHIPPED = [
    "a100-sxm-80gb", "b200-sxm", "h100-sxm", "h200-sxm", "l40s", "rtx-4090", "npu-llm", "npu-edge",
]


def blocks(obj: object, path: str = "") -> list[tuple[str, Block]]:
    out: list[tuple[str, Block]] = []
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        key = f"{path}.{f.name}" if path else f.name
        if isinstance(value, Block):
            out.append((key, value))
        if dataclasses.is_dataclass(value):
            out.extend(blocks(value, key))
    return out


def test_list_hardware_is_exactly_the_shipped_set() -> None:
    assert list_hardware() == sorted(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_file_loads_with_its_name(name: str) -> None:
    spec = load_hardware(name)
    assert spec.name == name
    assert spec.kind == ("npu" if name.startswith("npu") else "gpu")


@pytest.mark.parametrize("name", SHIPPED)
def test_every_block_cites_a_known_source(name: str) -> None:
    spec = load_hardware(name)
    ids = {s.id for s in spec.sources}
    found = blocks(spec)
    assert len(found) >= 6  # GPUs: compute, sm, tensor_core, cuda_core, l2, dram
    for path, block in found:
        assert block.source in ids, path
        assert set(block.key_sources.values()) <= ids, path
        for f in dataclasses.fields(block):
            if f.name not in ("source", "key_sources"):
                assert spec.source_of(f"{path}.{f.name}").id in ids


@pytest.mark.parametrize("name", SHIPPED)
def test_every_source_is_cited(name: str) -> None:
    # Uncited sources may only be background papers (PMPD motivates npu-llm but gives no numbers).
    spec = load_hardware(name)
    cited = set()
    for _, block in blocks(spec):
        cited.add(block.source)
        cited.update(block.key_sources.values())
    uncited = [s for s in spec.sources if s.id not in cited]
    assert all(s.kind == "paper" for s in uncited), uncited


@pytest.mark.parametrize("name", ["npu-llm", "npu-edge"])
def test_npu_presets_cite_their_chips_and_label_the_rest(name: str) -> None:
    spec = load_hardware(name)
    published = ("compute.cores", "compute.clock_MHz", "dram.bandwidth_GBps")
    assert all(spec.source_of(k).kind != "assumption" for k in published)
    design = ("mac_array.rows", "weight_decoder.weights_per_cycle", "gemv.macs_per_cycle",
              "sram.weight_buffer.size_MiB", "dispatch.overhead_us", "energy.static_W")
    assert {spec.source_of(k).kind for k in design} == {"assumption"}


def test_npu_presets_reproduce_their_published_numbers() -> None:
    llm, edge = load_hardware("npu-llm"), load_hardware("npu-edge")
    assert isinstance(llm, NpuSpec) and isinstance(edge, NpuSpec)
    # FuriosaAI RNGD: 8 PEs at 1 GHz, 256 TFLOP/s bf16, 512 TOP/s int8, 2 HBM3 1.5 TB/s 48 GB, 150 W.
    assert (llm.compute.cores, llm.clock_MHz, llm.dram.size_GB) == (8, 1000, 48)
    assert llm.matrix_peak_flops("bf16") == pytest.approx(256e12)
    assert llm.matrix_peak_flops("int8") == pytest.approx(512e12)
    assert llm.dram_bandwidth_Bps() == 1.5e12 and llm.dram.type == "HBM3"
    assert llm.energy is not None and llm.energy.tdp_W == 150
    assert llm.sram.weight_buffer.size_MiB + llm.sram.activation_buffer.size_MiB <= 32e6 / 2**20
    # Exynos 2400 NPU: 2 x 8192 (GTE) + 2 x 512 (STE) MACs at 1196 MHz = 41.64 TOP/s; 6 MB SRAM.
    gte = edge.matrix_peak_flops("int8")
    ste = 2 * 512 * 2 * edge.clock_MHz * 1e6
    assert gte + ste == pytest.approx(41.64e12, rel=1e-3)
    total_sram = edge.compute.cores * (edge.sram.weight_buffer.size_MiB
                                       + edge.sram.activation_buffer.size_MiB)
    assert total_sram <= 6e6 / 2**20
    assert edge.dram_bandwidth_Bps() == 84.8e9 and edge.dram.type == "LPDDR5X"


@pytest.mark.parametrize(
    ("name", "sms", "bandwidth_GBps", "fp16_TFLOPs", "l2_MiB"),
    [
        ("a100-sxm-80gb", 108, 2039, 312, 40),
        ("b200-sxm", 148, 8000, 2250, 126.5),
        ("h100-sxm", 132, 3350, 989.4, 50),
        ("h200-sxm", 132, 4800, 989.4, 60),
        ("l40s", 142, 864, 362.05, 96),
        ("rtx-4090", 128, 1008, 165.2, 72),
    ],
)
def test_published_gpu_numbers(
    name: str, sms: int, bandwidth_GBps: float, fp16_TFLOPs: float, l2_MiB: float
) -> None:
    spec = load_hardware(name)
    assert isinstance(spec, GpuSpec)
    assert spec.compute.sm_count == sms
    assert spec.dram_bandwidth_Bps() == bandwidth_GBps * 1e9
    assert spec.matrix_peak_flops("fp16") == fp16_TFLOPs * 1e12
    assert spec.l2.size_MiB == l2_MiB


@pytest.mark.parametrize("name", [n for n in SHIPPED if not n.startswith("npu")])
def test_tensor_peak_matches_per_sm_rate_within_2_percent(name: str) -> None:
    spec = load_hardware(name)
    assert isinstance(spec, GpuSpec)
    tc = spec.tensor_core
    for dtype, per_sm in tc.flops_per_clock_per_SM.items():
        derived = spec.compute.sm_count * per_sm * tc.datasheet_clock_MHz * 1e6
        assert derived == pytest.approx(spec.matrix_peak_flops(dtype), rel=0.02), dtype
    fp32 = spec.compute.sm_count * spec.cuda_core.fp32_flops_per_clock_per_SM
    assert fp32 * spec.compute.boost_clock_MHz * 1e6 == pytest.approx(
        spec.vector_peak_flops(), rel=0.02
    )


@pytest.mark.parametrize("name", SHIPPED)
def test_per_cycle_rate_reproduces_peak(name: str) -> None:
    # The simulator counts cycles with matrix_flops_per_cycle; it must agree with the roofline.
    spec = load_hardware(name)
    per_cycle = spec.matrix_flops_per_cycle("fp16")
    total = per_cycle * spec.compute_units * spec.clock_MHz * 1e6
    assert total == pytest.approx(spec.matrix_peak_flops("fp16"), rel=1e-12)


def test_sanity_relations() -> None:
    h100, h200, a100 = (load_hardware(n) for n in ("h100-sxm", "h200-sxm", "a100-sxm-80gb"))
    assert h200.dram_bandwidth_Bps() > h100.dram_bandwidth_Bps() > a100.dram_bandwidth_Bps()
    assert h200.matrix_peak_flops("fp16") == h100.matrix_peak_flops("fp16")
    fp8, fp16 = h100.matrix_peak_flops("fp8"), h100.matrix_peak_flops("fp16")
    assert fp8 == pytest.approx(2 * fp16, rel=1e-3)
    edge, llm = load_hardware("npu-edge"), load_hardware("npu-llm")
    assert 10 * edge.dram_bandwidth_Bps() < llm.dram_bandwidth_Bps()
    assert 1e12 <= llm.dram_bandwidth_Bps() <= 3.2e12
    for npu in (edge, llm):
        assert 0.5 < npu.achievable_bandwidth_fraction <= 1.0
        assert 0 < npu.launch_overhead_s() < 1e-4
    for gpu in (h100, h200, a100):  # datasheet numbers only: the simulator's constants apply
        assert gpu.achievable_bandwidth_fraction is None and gpu.launch_overhead_s() is None


DATASHEET_KINDS = {"datasheet", "whitepaper"}
# Numbers no model reads (base clocks); the H200's L2 size and the B200's SM count and L2 size, which
# NVIDIA's datasheets omit (the device reports them: vendor figures, not performance measurements);
# the B200's tensor rate per SM (and the tensor clock it implies), which NVIDIA does not publish: a
# labelled assumption (b200-sxm.yaml, source assume-blackwell-sm-rate).
NOT_FROM_DATASHEETS = {("l40s", "compute.base_clock_MHz"), ("l40s", "l2.size_MiB"),
                       ("h100-sxm", "compute.base_clock_MHz"), ("h200-sxm", "compute.base_clock_MHz"),
                       ("h200-sxm", "l2.size_MiB"), ("b200-sxm", "compute.sm_count"),
                       ("b200-sxm", "l2.size_MiB"), ("b200-sxm", "tensor_core.flops_per_clock_per_SM"),
                       ("b200-sxm", "tensor_core.datasheet_clock_MHz"),
                       # base clocks: NVIDIA publishes none for these boards (TechPowerUp, unverified)
                       ("a100-sxm-80gb", "compute.base_clock_MHz"), ("b200-sxm", "compute.base_clock_MHz"),
                       # the L2's partitions: third-party microbenchmarks (GH100), the rows (L40S)
                       ("h100-sxm", "l2.partitions"), ("h200-sxm", "l2.partitions"),
                       ("l40s", "l2.partitions")}


@pytest.mark.parametrize("name", [n for n in SHIPPED if not n.startswith("npu")])
def test_gpu_files_hold_datasheet_numbers_only(name: str) -> None:
    """Per-device numbers come from datasheets (and whitepapers, the CUDA guide); everything that
    is fitted or assumed lives in mpsim/sim/params.py as one constant for every device. The A100 is
    the held-out device: all of its numbers are from datasheets but its base clock (third-party)."""
    spec = load_hardware(name)
    assert isinstance(spec, GpuSpec)
    for path, block in blocks(spec):
        if path == "energy":  # energy estimates (mpsim/sim/energy.py): no time model reads them
            continue
        for f in dataclasses.fields(block):
            if f.name in ("source", "key_sources") or getattr(block, f.name) is None:
                continue
            key = f"{path}.{f.name}"
            kind = spec.source_of(key).kind
            if (name, key) not in NOT_FROM_DATASHEETS:
                assert kind in DATASHEET_KINDS, (key, kind)
    overrides = (spec.l2.bandwidth_GBps, spec.l2.latency_ns, spec.dram.latency_ns,
                 spec.dram.load_latency_ns, spec.dram.achievable_bandwidth_fraction, spec.launch)
    assert overrides == (None,) * 6


@pytest.mark.parametrize("name", ["npu-llm", "npu-edge"])
def test_npu_decoder_never_bounds_at_peak_bandwidth(name: str) -> None:
    spec = load_hardware(name)
    assert isinstance(spec, NpuSpec)
    # A design assumption made visible: the decoder (both formats) and the GEMV path are sized for
    # the lowest width at peak bandwidth; tests/sim/test_sim_npu.py shows them binding when not.
    per_s = spec.compute_units * spec.clock_MHz * 1e6
    tables = [spec.weight_decoder.weights_per_cycle, spec.weight_decoder.anyprec_weights_per_cycle or {}]
    for table in tables:
        for bits, per_cycle in table.items():
            assert per_cycle * per_s >= spec.dram_bandwidth_Bps() * 8 / bits, bits
    assert spec.gemv is not None
    assert spec.gemv.macs_per_cycle * per_s >= spec.dram_bandwidth_Bps() * 8 / 2


@pytest.mark.parametrize("name", SHIPPED)
def test_describe_names_device_and_sources(name: str) -> None:
    spec = load_hardware(name)
    text = spec.describe()
    assert text.startswith(name)
    assert all(s.id in text for s in spec.sources)
    assert len(text.splitlines()) >= 5


def test_source_of_follows_key_sources_and_rejects_non_keys() -> None:
    spec = load_hardware("h100-sxm")
    assert spec.source_of("dram.bandwidth_GBps").id == "nvidia-h100-datasheet"
    assert spec.source_of("dram.latency_ns").kind == "datasheet"  # the block's (the key is unset)
    assert spec.source_of("compute.base_clock_MHz").id == "techpowerup-h100-sxm"
    with pytest.raises(KeyError):
        spec.source_of("dram.colour")
    with pytest.raises(KeyError):
        spec.source_of("name")


def test_docs_describe_every_schema_key() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "hardware.md"
    text = docs.read_text(encoding="utf-8")
    for spec_class in (GpuSpec, NpuSpec):
        for key, _ in schema_keys(spec_class):
            leaf = key.rsplit(".", 1)[-1]
            if leaf in ("source", "key_sources", "sources"):
                continue
            assert f"`{key}" in text or f"`{key.split('.')[0]}.*`" in text, key
