"""Broken on purpose: forward reads address 0 through ctypes, which kills the process with a
segmentation fault; the evaluation must survive it and report a runtime error."""

import ctypes

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)  # dereferences NULL: SIGSEGV
        return x
