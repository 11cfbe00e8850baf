"""A small KernelBench-format problem (a 23 us linear + ReLU on an H200): what a verdict costs
when the kernel is short and start-up and stopping dominate."""

import torch
import torch.nn as nn

batch_size = 256
in_features = 512
out_features = 384


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
