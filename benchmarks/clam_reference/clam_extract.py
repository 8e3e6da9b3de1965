#!/usr/bin/python3
"""A CLAM-style feature extractor: the reference tessera's embed stage is compared with.

Built the way CLAM's extract_features_fp.py works (written from its description, not copied):
a torch Dataset over patch coordinates whose items are read with openslide-python's
read_region(...).convert('RGB') and torchvision transforms, a DataLoader, and a ResNet-50
truncated after layer3 with global average pooling (CLAM's resnet50_trunc, 1024-d), in eval mode
under torch.inference_mode, features appended to an HDF5 file batch by batch. CPU, fp32.

Coordinates come from tessera's patchgen run (RUN/patchgen/index.h5), from CLAM's own patch file
(an .h5 with `coords` and the attributes patch_size and patch_level) or from a CSV with the
columns x,y[,size,level] (level-0 x, y of the top-left corner).

  clam_extract.py --coords FILE [--slide SLIDE] --out FEATURES.h5 [--json REPORT.json] [options]
  clam_extract.py --coords RUN/patchgen/index.h5 --export-coords COORDS.csv
  clam_extract.py --model-only --patches N [--json REPORT.json] [options]

Run with Debian's /usr/bin/python3 (python3-torch, python3-torchvision, python3-openslide,
python3-pil, python3-h5py).
"""
import argparse
import csv
import json
import os
import platform
import sys
import time

import h5py
import numpy as np
import torch
import torchvision
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
MODEL_INPUT = 224


class PatchList:
    """Level-0 top-left corners of patches of one slide, read at `level` with side `size`."""

    def __init__(self, xy, size, level, slide=None):
        self.xy = np.asarray(xy, dtype=np.int64).reshape(-1, 2)
        self.size = int(size)
        self.level = int(level)
        self.slide = slide


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def read_tessera_index(f, slide_id):
    """Rows of one slide of patchgen's index.h5 (docs/formats.md), in index order."""
    slides = f["slides"]
    ids = [_text(s) for s in slides["slide_id"][()]]
    if slide_id is None:
        ok = [i for i, s in enumerate(slides["status"][()]) if _text(s) == "ok"]
        if not ok:
            sys.exit("error: no slide with status ok in the index")
        s = ok[0]
    elif slide_id in ids:
        s = ids.index(slide_id)
    else:
        sys.exit(f"error: slide '{slide_id}' is not in the index")
    rows = f["slide"][()] == s
    return PatchList(f["coords"][()][rows], slides["read_size"][s], slides["level"][s],
                     _text(slides["path"][s]))


def read_coords(path, slide_id=None, size=None, level=None):
    """Patch coordinates from a tessera index.h5, a CLAM patch .h5 or a CSV."""
    if path.endswith(".h5"):
        with h5py.File(path, "r") as f:
            if "slides" in f:
                return read_tessera_index(f, slide_id)
            coords = f["coords"]
            return PatchList(coords[()], size or coords.attrs["patch_size"],
                             level if level is not None else coords.attrs["patch_level"])
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"error: '{path}' holds no coordinates")
    first = rows[0]
    size = size or int(first.get("size") or 0)
    level = level if level is not None else int(first.get("level") or 0)
    if size <= 0:
        sys.exit(f"error: '{path}' has no size column; give --patch-size")
    return PatchList([(int(r["x"]), int(r["y"])) for r in rows], size, level,
                     first.get("slide") or None)


def export_coords(patches, out):
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x", "y", "size", "level", "slide"])
        for x, y in patches.xy:
            w.writerow([int(x), int(y), patches.size, patches.level, patches.slide or ""])


class SlidePatches(Dataset):
    """One patch per item, read from the slide as CLAM's bag dataset reads it."""

    def __init__(self, slide_path, patches, transform):
        self.slide_path = slide_path
        self.patches = patches
        self.transform = transform
        self.slide = None  # opened lazily, so that every DataLoader worker has its own handle

    def __len__(self):
        return len(self.patches.xy)

    def __getitem__(self, i):
        import openslide
        if self.slide is None:
            self.slide = openslide.OpenSlide(self.slide_path)
        x, y = (int(v) for v in self.patches.xy[i])
        size = self.patches.size
        img = self.slide.read_region((x, y), self.patches.level, (size, size)).convert("RGB")
        return self.transform(img), torch.tensor([x, y])


def make_transform(read_size):
    steps = [] if read_size == MODEL_INPUT else [transforms.Resize(MODEL_INPUT)]
    steps += [transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    return transforms.Compose(steps)


class ResNet50Trunc(torch.nn.Module):
    """torchvision's ResNet-50 up to layer3, then global average pooling: [B, 1024]."""

    def __init__(self):
        super().__init__()
        r = torchvision.models.resnet50(weights=None)
        self.body = torch.nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool,
                                        r.layer1, r.layer2, r.layer3)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        return torch.flatten(self.pool(self.body(x)), 1)


def make_model(seed):
    torch.manual_seed(seed)
    return ResNet50Trunc().eval()


class FeatureWriter:
    """Appends batches of features and coords to an HDF5 file, as CLAM saves batch by batch."""

    def __init__(self, path, dim):
        self.f = h5py.File(path, "w")
        self.features = self.f.create_dataset("features", (0, dim), maxshape=(None, dim),
                                              dtype="float32", chunks=(64, dim))
        self.coords = self.f.create_dataset("coords", (0, 2), maxshape=(None, 2),
                                            dtype="int64", chunks=(64, 2))

    def append(self, features, coords):
        n = self.features.shape[0]
        for d, v in ((self.features, features), (self.coords, coords)):
            d.resize(n + len(v), axis=0)
            d[n:] = v

    def close(self):
        self.f.close()


def versions():
    import openslide
    import PIL
    return {"python": platform.python_version(), "torch": torch.__version__,
            "torchvision": torchvision.__version__, "openslide_python": openslide.__version__,
            "openslide": openslide.__library_version__, "pillow": PIL.__version__,
            "h5py": h5py.__version__, "numpy": np.__version__}


def extract(args, patches, report):
    slide_path = args.slide or patches.slide
    if not slide_path:
        sys.exit("error: the coordinates name no slide; give --slide")
    t_start = time.perf_counter()
    model = make_model(args.seed)
    dataset = SlidePatches(slide_path, patches, make_transform(patches.size))
    loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=args.num_workers,
                        shuffle=False, pin_memory=False)
    writer = FeatureWriter(args.out, 1024)
    load_s = forward_s = write_s = 0.0
    n = 0
    t_model = time.perf_counter()
    it = iter(loader)
    with torch.inference_mode():
        while True:
            t0 = time.perf_counter()
            try:
                batch, coords = next(it)
            except StopIteration:
                load_s += time.perf_counter() - t0
                break
            t1 = time.perf_counter()
            features = model(batch)
            t2 = time.perf_counter()
            writer.append(features.numpy(), coords.numpy())
            t3 = time.perf_counter()
            load_s += t1 - t0
            forward_s += t2 - t1
            write_s += t3 - t2
            n += len(batch)
    writer.close()
    total_s = time.perf_counter() - t_start
    report.update({
        "mode": "extract", "slide": os.path.abspath(slide_path), "out": os.path.abspath(args.out),
        "patches": n, "patch_size": patches.size, "level": patches.level,
        "total_s": total_s, "setup_s": t_model - t_start, "load_s": load_s,
        "forward_s": forward_s, "write_s": write_s, "tiles_per_s": n / total_s,
    })


def model_only(args, report):
    """Forward passes over random batches made before the timing: the model's own speed."""
    model = make_model(args.seed)
    g = torch.Generator().manual_seed(args.seed + 1)
    sizes = [min(args.batch_size, args.patches - b)
             for b in range(0, args.patches, args.batch_size)]
    batches = [torch.randn(s, 3, MODEL_INPUT, MODEL_INPUT, generator=g) for s in sizes]
    with torch.inference_mode():
        for b in batches[:args.warmup_batches]:
            model(b)
        t0 = time.perf_counter()
        for b in batches:
            model(b)
        forward_s = time.perf_counter() - t0
    report.update({"mode": "model-only", "patches": args.patches, "batches": len(batches),
                   "warmup_batches": args.warmup_batches, "total_s": forward_s,
                   "forward_s": forward_s, "tiles_per_s": args.patches / forward_s})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--coords", help="tessera index.h5, CLAM patch .h5, or CSV x,y[,size,level]")
    p.add_argument("--slide-id", help="with a tessera index: the slide (default: the first ok)")
    p.add_argument("--slide", help="slide file (default: the one the coordinates name)")
    p.add_argument("--patch-size", type=int, help="read size, when the coordinates lack it")
    p.add_argument("--level", type=int, help="pyramid level, when the coordinates lack it")
    p.add_argument("--limit", type=int, default=0, help="only the first N patches (0: all)")
    p.add_argument("--export-coords", metavar="CSV", help="write the coordinates as CSV and exit")
    p.add_argument("--out", help="features .h5 (features [N, 1024] float32, coords [N, 2])")
    p.add_argument("--json", help="also write the report here")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-workers", type=int, default=0,
                   help="DataLoader workers (CLAM: 4 on a GPU; 0 loads in the main process)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the weights")
    p.add_argument("--model-only", action="store_true",
                   help="time forward passes over random batches made up front")
    p.add_argument("--patches", type=int, default=64, help="with --model-only: images in all")
    p.add_argument("--warmup-batches", type=int, default=0,
                   help="with --model-only: untimed batches first")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    report = {"tool": "clam_extract.py", "argv": sys.argv[1:], "device": "cpu",
              "precision": "fp32", "model": "resnet50_trunc", "batch_size": args.batch_size,
              "num_workers": args.num_workers, "threads": torch.get_num_threads(),
              "seed": args.seed, "versions": versions()}
    if args.model_only:
        if args.patches < 1:
            sys.exit("error: --patches must be >= 1")
        model_only(args, report)
    else:
        if not args.coords:
            sys.exit("error: give --coords (or --model-only)")
        patches = read_coords(args.coords, args.slide_id, args.patch_size, args.level)
        if args.limit > 0:
            patches.xy = patches.xy[:args.limit]
        if args.export_coords:
            export_coords(patches, args.export_coords)
            print(f"{len(patches.xy)} coordinates -> {args.export_coords}")
            return
        if not args.out:
            sys.exit("error: give --out")
        extract(args, patches, report)
    text = json.dumps(report, indent=2)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
