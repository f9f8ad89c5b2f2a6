"""ViTForImageClassification written by hand in plain torch, for tests/refs/external_test.sh:
an implementation of the zoo's class other than the zoo's own (Debian has no transformers
package), with transformers 5's state_dict names. make_references.py --model-module builds it.

TANH_GELU=1 in the environment makes it compute another function (the tanh approximation of
GELU): a reference that must be found to disagree with ours.
"""

import math
import os

import torch

# The implementation's name in its bundles' keys: two implementations, two keys.
IMPLEMENTATION = "vit_model.py" + (" (tanh GELU)" if os.environ.get("TANH_GELU") else "")


class Layer(torch.nn.Module):
    def __init__(self, h, im, eps):
        super().__init__()
        self.layernorm_before = torch.nn.LayerNorm(h, eps=eps)
        self.attention = torch.nn.Module()
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self.attention, name, torch.nn.Linear(h, h))
        self.layernorm_after = torch.nn.LayerNorm(h, eps=eps)
        self.mlp = torch.nn.Module()
        self.mlp.fc1 = torch.nn.Linear(h, im)
        self.mlp.fc2 = torch.nn.Linear(im, h)


class ViT(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, p = cfg["hidden_size"], cfg["patch_size"]
        c = cfg.get("num_channels", 3)
        tokens = (cfg["image_size"] // p) ** 2 + 1
        self.heads = cfg["num_attention_heads"]
        self.num_labels = cfg.get("num_labels", 2)
        self.vit = torch.nn.Module()
        e = self.vit.embeddings = torch.nn.Module()
        e.cls_token = torch.nn.Parameter(torch.zeros(1, 1, h))
        e.position_embeddings = torch.nn.Parameter(torch.zeros(1, tokens, h))
        e.patch_embeddings = torch.nn.Module()
        e.patch_embeddings.projection = torch.nn.Conv2d(c, h, p, stride=p)
        eps = cfg.get("layer_norm_eps", 1e-12)
        self.vit.layers = torch.nn.ModuleList(
            Layer(h, cfg["intermediate_size"], eps) for _ in range(cfg["num_hidden_layers"]))
        self.vit.layernorm = torch.nn.LayerNorm(h, eps=eps)
        self.classifier = torch.nn.Linear(h, self.num_labels)
        self.gelu = (lambda x: torch.nn.functional.gelu(x, approximate="tanh")) if os.environ.get(
            "TANH_GELU") else torch.nn.functional.gelu

    def forward(self, pixel_values, labels=None):
        e = self.vit.embeddings
        x = e.patch_embeddings.projection(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat([e.cls_token.expand(x.shape[0], -1, -1), x], 1) + e.position_embeddings
        b, s, h = x.shape
        hd = h // self.heads
        split = lambda t: t.view(b, s, self.heads, hd).transpose(1, 2)
        for l in self.vit.layers:
            y = l.layernorm_before(x)
            q, k, v = (split(getattr(l.attention, n)(y)) for n in ("q_proj", "k_proj", "v_proj"))
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
            x = x + l.attention.o_proj((a @ v).transpose(1, 2).reshape(b, s, h))
            x = x + l.mlp.fc2(self.gelu(l.mlp.fc1(l.layernorm_after(x))))
        logits = self.classifier(self.vit.layernorm(x)[:, 0])
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = (torch.nn.functional.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
                           if self.num_labels == 1 else
                           torch.nn.functional.cross_entropy(logits, labels))
        return out


def build(config):
    return ViT(config)
