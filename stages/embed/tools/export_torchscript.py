#!/usr/bin/env python3
"""Exports a pathology foundation model to TorchScript for tessera's embed stage.

Run this where the weights can be downloaded (Hugging Face access granted for the gated models,
`huggingface-cli login` done) and the model's Python packages are installed: torch, timm >= 1.0,
and additionally transformers for phikon-v2 or the `conch` package
(github.com/mahmoodlab/CONCH) for conch. Then copy the two output files to the cluster:

  export_torchscript.py uni --out /models/uni.pt
  -> /models/uni.pt   TorchScript module: float input [n, 3, I, I] normalised per the preset,
                      output the final embedding [n, D] (pooling is done inside the module)
  -> /models/uni.ini  the preset (configs/models/uni.ini plus a provenance comment), which
                      tessera finds next to the .pt file

The module is traced (torch.jit.trace) in fp32 on --device with a batch of --batch random images;
tessera casts it to bf16/fp16 at load time when asked. The traced module is checked against the
eager model on fresh random input before it is saved. Export with the same or an older torch
major.minor than the libtorch tessera links, else libtorch may refuse the file.
"""
import argparse
import datetime
import os
import sys

MODELS = ("uni", "uni2-h", "h-optimus-0", "h-optimus-1", "virchow2", "phikon-v2", "prov-gigapath",
          "conch")
_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PRESETS = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "configs", "models"))


def read_preset(path):
    """The key = value pairs of an INI preset (comments stripped) and its raw text."""
    with open(path) as f:
        text = f.read()
    values = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, value = (part.strip() for part in line.split("=", 1))
            values[key] = value
    return values, text


def build(name):
    """Returns an eager nn.Module mapping normalised input [n, 3, I, I] to embeddings [n, D]."""
    import torch  # imported lazily so that --help works without the model packages

    class Embedder(torch.nn.Module):
        def __init__(self, backbone, pool):
            super().__init__()
            self.backbone = backbone
            self.pool = pool

        def forward(self, x):
            return self.pool(self.backbone, x)

    def direct(model, x):
        return model(x)

    if name in ("uni", "uni2-h", "h-optimus-0", "h-optimus-1", "virchow2", "prov-gigapath"):
        import timm
        if name == "uni":
            model = timm.create_model("hf-hub:MahmoodLab/uni", pretrained=True, init_values=1e-5,
                                      dynamic_img_size=True)
        elif name == "uni2-h":
            model = timm.create_model(
                "hf-hub:MahmoodLab/UNI2-h", pretrained=True, img_size=224, patch_size=14, depth=24,
                num_heads=24, init_values=1e-5, embed_dim=1536, mlp_ratio=2.66667 * 2,
                num_classes=0, no_embed_class=True, mlp_layer=timm.layers.SwiGLUPacked,
                act_layer=torch.nn.SiLU, reg_tokens=8, dynamic_img_size=True)
        elif name in ("h-optimus-0", "h-optimus-1"):
            hub = "bioptimus/H-optimus-0" if name == "h-optimus-0" else "bioptimus/H-optimus-1"
            model = timm.create_model(f"hf-hub:{hub}", pretrained=True, init_values=1e-5,
                                      dynamic_img_size=False)
        elif name == "virchow2":
            model = timm.create_model("hf-hub:paige-ai/Virchow2", pretrained=True,
                                      mlp_layer=timm.layers.SwiGLUPacked, act_layer=torch.nn.SiLU)

            def virchow_pool(m, x):  # class token || mean of the patch tokens (after 4 registers)
                tokens = m(x)
                return torch.cat([tokens[:, 0], tokens[:, 5:].mean(1)], dim=-1)

            return Embedder(model, virchow_pool)
        else:
            model = timm.create_model("hf_hub:prov-gigapath/prov-gigapath", pretrained=True)
        return Embedder(model, direct)

    if name == "phikon-v2":
        from transformers import AutoModel
        model = AutoModel.from_pretrained("owkin/phikon-v2")

        def phikon_pool(m, x):
            return m(pixel_values=x, return_dict=False)[0][:, 0, :]

        return Embedder(model, phikon_pool)

    if name == "conch":
        from conch.open_clip_custom import create_model_from_pretrained
        model, _ = create_model_from_pretrained("conch_ViT-B-16", "hf_hub:MahmoodLab/conch")

        def conch_pool(m, x):
            return m.encode_image(x, proj_contrast=False, normalize=False)

        return Embedder(model, conch_pool)

    raise ValueError(f"unknown model {name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", choices=MODELS, help="which foundation model to export")
    parser.add_argument("--out", required=True, help="output TorchScript file (.pt)")
    parser.add_argument("--presets", default=DEFAULT_PRESETS,
                        help="directory with <model>.ini presets (default: the repository's "
                             "configs/models)")
    parser.add_argument("--device", default="cpu", help="device to trace on (cpu, cuda)")
    parser.add_argument("--batch", type=int, default=2, help="batch size of the tracing input")
    args = parser.parse_args()

    import torch

    preset_path = os.path.join(args.presets, f"{args.model}.ini")
    preset, preset_text = read_preset(preset_path)
    size, dim = int(preset["input_size"]), int(preset["output_dim"])

    model = build(args.model).eval().to(args.device)
    example = torch.randn(args.batch, 3, size, size, device=args.device)
    with torch.no_grad():
        traced = torch.jit.trace(model, example, check_trace=False)
        check = torch.randn(args.batch + 1, 3, size, size, device=args.device)
        eager_out, traced_out = model(check), traced(check)
    if tuple(traced_out.shape) != (args.batch + 1, dim):
        sys.exit(f"{args.model}: traced output has shape {tuple(traced_out.shape)}, the preset "
                 f"{preset_path} says output_dim = {dim}")
    diff = (eager_out - traced_out).abs().max().item()
    if diff > 1e-3:
        sys.exit(f"{args.model}: traced and eager outputs differ by {diff}")

    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    traced.cpu().save(args.out)
    preset_out = os.path.splitext(args.out)[0] + ".ini"
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with open(preset_out, "w") as f:
        f.write(f"# Exported by export_torchscript.py on {stamp} with torch {torch.__version__}\n"
                f"# from {preset_path}; module output [n, {dim}], max |traced - eager| = {diff:.2e}\n")
        f.write(preset_text)
    print(f"wrote {args.out} and {preset_out}")


if __name__ == "__main__":
    main()
