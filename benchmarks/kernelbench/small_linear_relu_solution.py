"""The small linear + ReLU written with torch ops: a candidate whose verdict is all overhead."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.relu(F.linear(x, self.linear.weight, self.linear.bias))
