"""KL(teacher || student) from log-probabilities, summed over the vocabulary, mean over rows."""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, student_logp: torch.Tensor, teacher_logp: torch.Tensor) -> torch.Tensor:
        return F.kl_div(student_logp, teacher_logp, reduction="batchmean", log_target=True)


def get_init_inputs(**params):
    return []


def get_inputs(B, V, **params):
    student = torch.log_softmax(torch.randn(B, V, dtype=torch.float32) * 2.0, dim=-1)
    teacher = torch.log_softmax(torch.randn(B, V, dtype=torch.float32) * 2.0, dim=-1)
    return [student, teacher]
