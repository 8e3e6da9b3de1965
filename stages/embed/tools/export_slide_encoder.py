"""Exports a slide encoder to the TorchScript module `aggregate --slide-encoder` loads.

aggregate calls forward(features, coords, patch_size_level0) with features float32 [1, N, D] (a
slide's patch features), coords int64 [1, N, 2] (level-0 x, y of each patch's top-left corner)
and patch_size_level0 an int, and takes a [1, D'] or [D'] result: TRIDENT's calling convention
(its slide encoders get a batch {'features', 'coords', 'attributes': {'patch_size_level0'}}).

  # a TRIDENT slide encoder (needs `pip install trident` and the model's weights and extras):
  export_slide_encoder.py --trident titan --patch-dim 768 --patch-size-level0 1024 --out titan.pt
  # mean pooling as TRIDENT's mean-<encoder> (no weights; aggregate --pooling mean does the same):
  export_slide_encoder.py --mean --out mean.pt

TRIDENT's encoders are traced (torch.jit.trace) on a random slide of --example-patches patches:
the trace records one path through the model, so patch_size_level0 is fixed at export (GigaPath
reads it as a Python int). The exported module refuses another patch_size_level0 with an error
instead of computing something else; export once per patch geometry. Run the exported module once
against TRIDENT's own output on a real slide before a study (tests cover the calling convention
with a small scripted encoder, not these models).
"""
import argparse
import sys

import torch


class MeanSlideEncoder(torch.nn.Module):
    """TRIDENT's mean-<encoder>: the mean of the patch features."""

    def forward(self, features: torch.Tensor, coords: torch.Tensor,
                patch_size_level0: int) -> torch.Tensor:
        return features.mean(dim=1)


class TridentCall(torch.nn.Module):
    """Calls a TRIDENT slide encoder with its batch dictionary (traced, so plain tensors in)."""

    def __init__(self, encoder, device, patch_size_level0):
        super().__init__()
        self.encoder = encoder
        self.device_name = device
        self.patch_size_level0 = patch_size_level0

    def forward(self, features, coords):
        batch = {"features": features, "coords": coords,
                 "attributes": {"patch_size_level0": self.patch_size_level0}}
        with torch.autocast(device_type="cuda", enabled=self.device_name.startswith("cuda")
                            and getattr(self.encoder, "precision", torch.float32) != torch.float32):
            return self.encoder(batch, self.device_name).float()


class FixedGeometry(torch.nn.Module):
    """The scripted outer module: checks patch_size_level0 against the traced one."""

    def __init__(self, traced, patch_size_level0: int):
        super().__init__()
        self.traced = traced
        self.patch_size_level0 = patch_size_level0

    def forward(self, features: torch.Tensor, coords: torch.Tensor,
                patch_size_level0: int) -> torch.Tensor:
        if patch_size_level0 != self.patch_size_level0:
            raise RuntimeError("this slide encoder was exported for patch_size_level0 = "
                               + str(self.patch_size_level0) + ", not "
                               + str(patch_size_level0) + ": export it again")
        return self.traced(features, coords)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trident", help="TRIDENT slide encoder name (titan, prism, chief, gigapath, "
                   "madeleine, feather, ...)")
    p.add_argument("--mean", action="store_true", help="export mean pooling instead")
    p.add_argument("--patch-dim", type=int, default=768, help="D of the patch features")
    p.add_argument("--patch-size-level0", type=int, default=512)
    p.add_argument("--example-patches", type=int, default=256)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.mean == bool(a.trident):
        p.error("give exactly one of --trident NAME and --mean")
    if a.mean:
        module = torch.jit.script(MeanSlideEncoder())
    else:
        from trident.slide_encoder_models import encoder_factory
        encoder = encoder_factory(a.trident).to(a.device).eval()
        call = TridentCall(encoder, a.device, a.patch_size_level0)
        g = torch.Generator().manual_seed(0)
        n = a.example_patches
        features = torch.randn(1, n, a.patch_dim, generator=g).to(a.device)
        side = int(n ** 0.5) + 1
        idx = torch.arange(n)
        coords = (torch.stack([idx % side, idx // side], dim=1) * a.patch_size_level0)
        coords = coords.unsqueeze(0).to(torch.int64).to(a.device)
        with torch.inference_mode():
            traced = torch.jit.trace(call, (features, coords), check_trace=False)
        module = torch.jit.script(FixedGeometry(traced, a.patch_size_level0))
    module.save(a.out)
    print("wrote {}".format(a.out))


if __name__ == "__main__":
    main(sys.argv[1:])
