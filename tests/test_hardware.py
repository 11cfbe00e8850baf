import pytest

from rooftop.score.hardware import datasheet, lookup
from rooftop.score.roofline import floor_seconds, roofline_fraction

REQUIRED = ["H100 SXM", "H100 PCIe", "H200", "B200", "A100", "L40S", "L4", "RTX 4090", "RTX PRO 6000"]


@pytest.mark.parametrize("device_name,key_part", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100"), ("NVIDIA H200", "h200"),
    ("NVIDIA B200", "b200"), ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA L40S", "l40s"), ("NVIDIA L4", "l4"),
    ("NVIDIA GeForce RTX 4090", "4090"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "6000"),
])
def test_device_names_find_their_entry(device_name, key_part):
    gpu = lookup(device_name)
    assert gpu is not None and key_part in gpu.key.lower()


def test_l40s_is_not_l4_and_h100_variants_differ():
    assert lookup("NVIDIA L40S").key != lookup("NVIDIA L4").key
    assert lookup("NVIDIA H100 PCIe").dram_gbps < lookup("NVIDIA H100 80GB HBM3").dram_gbps
    assert lookup("NVIDIA H200").dram_gbps > lookup("NVIDIA H100 80GB HBM3").dram_gbps
    assert lookup("Intel Xeon") is None


def test_every_entry_has_sources_and_dense_peaks():
    for gpu in datasheet():
        assert gpu.sources, gpu.key
        assert gpu.peak_flops("float32") and gpu.peak_flops("bfloat16"), gpu.key
        # dense tensor-core bf16 is always above the CUDA-core fp32 rate
        assert gpu.peak_flops("bfloat16") > gpu.peak_flops("float32"), gpu.key


def test_roofline_fraction_is_floor_over_time():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    nbytes = h100.dram_bytes_per_s * 1e-3  # one millisecond of traffic at the datasheet bandwidth
    assert floor_seconds(h100, "float32", 1.0, nbytes) == pytest.approx(1e-3)
    assert roofline_fraction(h100, "float32", 1.0, nbytes, 2e-3) == pytest.approx(0.5)
    flops = h100.peak_flops("bfloat16") * 1e-3
    assert roofline_fraction(h100, "bf16", flops, 1.0, 1e-3) == pytest.approx(1.0)
    assert roofline_fraction(None, "bf16", flops, 1.0, 1e-3) is None
