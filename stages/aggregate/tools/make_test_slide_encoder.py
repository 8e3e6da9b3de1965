"""Makes the TorchScript slide encoder of aggregate's tests: TRIDENT's calling convention
(features [1, N, D] float32, coords [1, N, 2] int64 level-0, patch_size_level0 int) and an output
a test can recompute: the mean feature, then the mean patch position in patch units.

Usage: make_test_slide_encoder.py OUT.pt
"""
import sys

import torch


class CoordsMean(torch.nn.Module):
    def forward(self, features: torch.Tensor, coords: torch.Tensor,
                patch_size_level0: int) -> torch.Tensor:
        where = coords.to(torch.float32).mean(dim=1) / float(patch_size_level0)
        return torch.cat([features.mean(dim=1), where], dim=1)


if __name__ == "__main__":
    torch.jit.script(CoordsMean()).save(sys.argv[1])
