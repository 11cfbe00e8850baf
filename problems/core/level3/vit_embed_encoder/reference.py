"""Vision-transformer patch embedding and the first encoder layer (ViT / timm VisionTransformer,
pre-norm), inference, bfloat16.

    t = [cls; patch_embed(img)] + pos_embed                 (N, S, E), S = 1 + (IMG // P)^2
    t = t + proj(attn(qkv(ln1(t))))
    y = t + fc2(gelu(fc1(ln2(t))))

img (N, 3, IMG, IMG) bfloat16. patch_embed: a PxP convolution with stride P and bias, 3 -> E (the
last IMG % P rows and columns are dropped), flattened row-major over the (IMG // P)^2 patches; cls
(E) is prepended, pos_embed (S, E) added. ln1, ln2: LayerNorm over E with weight and bias, eps
1e-6. Attention: qkv an nn.Linear E -> 3E with bias (q, k, v in that order, each split into NH
heads of E / NH), softmax(q k^T / sqrt(E / NH)) v over all S tokens (no mask), heads concatenated,
proj an nn.Linear E -> E with bias. MLP: fc1 E -> Fm, exact (erf) GELU, fc2 Fm -> E, with biases.
Every parameter is bfloat16 and each layer's output is rounded to bfloat16.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, IMG: int, P: int, E: int, NH: int, Fm: int):
        super().__init__()
        self.NH = NH
        n_patches = (IMG // P) ** 2
        self.patch_embed = nn.Conv2d(3, E, P, stride=P)
        self.cls_token = nn.Parameter(torch.randn(E) * 0.5, requires_grad=False)
        self.pos_embed = nn.Parameter(torch.randn(1 + n_patches, E) * 0.5, requires_grad=False)
        self.ln1 = nn.LayerNorm(E, eps=1e-6)
        self.qkv = nn.Linear(E, 3 * E)
        self.proj = nn.Linear(E, E)
        self.ln2 = nn.LayerNorm(E, eps=1e-6)
        self.fc1 = nn.Linear(E, Fm)
        self.fc2 = nn.Linear(Fm, E)
        with torch.no_grad():
            # weights ~ N(0, 1/fan_in), biases ~ 0.1 N(0, 1): every branch of about unit size
            for layer in (self.patch_embed, self.qkv, self.proj, self.fc1, self.fc2):
                fan_in = layer.weight[0].numel()
                layer.weight.copy_(torch.randn(layer.weight.shape) / math.sqrt(fan_in))
                layer.bias.copy_(0.1 * torch.randn(layer.bias.shape))
            for ln in (self.ln1, self.ln2):  # away from ones and zeros
                ln.weight.copy_(1.0 + 0.3 * torch.randn(E))
                ln.bias.copy_(0.3 * torch.randn(E))
        self.to(torch.bfloat16)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        p = self.patch_embed(img).flatten(2).transpose(1, 2)  # (N, patches, E)
        N, _, E = p.shape
        t = torch.cat((self.cls_token.expand(N, 1, E), p), dim=1) + self.pos_embed
        S, NH = t.shape[1], self.NH
        qkv = self.qkv(self.ln1(t)).view(N, S, 3, NH, E // NH).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])  # scale 1/sqrt(E / NH)
        t = t + self.proj(a.transpose(1, 2).reshape(N, S, E))
        return t + self.fc2(F.gelu(self.fc1(self.ln2(t))))


def get_init_inputs(IMG, P, E, NH, Fm, **params):
    return [IMG, P, E, NH, Fm]


def get_inputs(N, IMG, **params):
    # normalised pixels (ImageNet mean/std applied): about unit size, channel means not zero
    img = torch.randn(N, 3, IMG, IMG) + 0.3 * torch.randn(1, 3, 1, 1)
    return [img.to(torch.bfloat16)]
