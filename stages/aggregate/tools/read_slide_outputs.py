"""Reads an aggregate output the way its users do and checks it against embed's features:
TRIDENT's slide feature files (WSI.extract_slide_features writes them, and its readers load
f['features'][:], f['coords'][:] and dict(f['coords'].attrs)), the .pt tensors (torch.load) and the
cohort file loaded in one line for scikit-learn.

Usage: read_slide_outputs.py OUT_DIR EMBED_DIR MODE
  MODE mean | max | mean+max | coords-mean (the test slide encoder) | patient-mean
Prints "ok <vectors> <skipped>" or raises.
"""
import csv
import glob
import os
import sys

import h5py
import numpy as np

TRIDENT_COORDS_ATTRS = ["patch_size", "patch_size_level0", "level0_magnification",
                        "target_magnification", "overlap", "level0_width", "level0_height", "name"]


def trident_read(path):
    """How TRIDENT reads a slide feature file back (features squeezed to [D'])."""
    with h5py.File(path, "r") as f:
        features = f["features"][:]
        coords = f["coords"][:]
        coords_attrs = dict(f["coords"].attrs)
        name = f["features"].attrs["name"]
    return features, coords, coords_attrs, name


def expected(mode, feats, coords, psl0):
    if mode in ("mean", "patient-mean"):
        return feats.astype(np.float64).mean(axis=0)
    if mode == "max":
        return feats.max(axis=0)
    if mode == "mean+max":
        return np.concatenate([feats.astype(np.float64).mean(axis=0), feats.max(axis=0)])
    if mode == "coords-mean":
        return np.concatenate([feats.astype(np.float64).mean(axis=0),
                               coords.astype(np.float64).mean(axis=0) / psl0])
    raise ValueError(mode)


def main(out_dir, embed_dir, mode):
    level = "patient" if mode.startswith("patient") else "slide"
    # The one-line load.
    f = h5py.File(os.path.join(out_dir, "patients.h5" if level == "patient" else "slides.h5"), "r")
    X, y = f["features"][:], f["labels/diagnosis"].asstr()[:]
    ids = f["ids"].asstr()[:]
    slides = f["slides"].asstr()[:]
    skipped = f["skipped/ids"].asstr()[:]
    assert X.shape[0] == len(ids) == len(y) and X.dtype == np.float32, X.shape
    assert np.isfinite(X).all()
    with open(os.path.join(out_dir, "skipped.csv"), newline="") as s:
        assert [r["id"] for r in csv.DictReader(s)] == list(skipped)
    folders = glob.glob(os.path.join(out_dir, level + "_features_*"))
    assert len(folders) == 1, folders
    try:
        import torch
    except ImportError:
        torch = None
    for i, item in enumerate(ids):
        vec, coords, attrs, name = trident_read(os.path.join(folders[0], item + ".h5"))
        assert name == item and attrs["name"] == item, (name, attrs["name"])
        assert set(TRIDENT_COORDS_ATTRS) <= set(attrs), attrs.keys()
        assert vec.shape == (X.shape[1],), vec.shape
        assert np.array_equal(vec, X[i]), item
        feats, want_xy = [], []
        for slide in slides[i].split("|"):
            path = os.path.join(embed_dir, "features", slide + ".h5")
            with h5py.File(path, "r") as e:
                if e["features"].shape[0] == 0:
                    continue
                feats.append(e["features"][:])
                want_xy.append(e["coords"][:])
                psl0 = int(e["coords"].attrs["patch_size_level0"])
        feats = np.concatenate(feats)
        want_xy = np.concatenate(want_xy)
        assert np.array_equal(coords, want_xy), item
        want = expected(mode, feats, want_xy, psl0)
        assert np.allclose(vec, want, rtol=1e-5, atol=1e-5), (item, np.abs(vec - want).max())
        if torch is not None:
            t = torch.load(os.path.join(out_dir, level + "_embeddings", item + ".pt"))
            assert tuple(t.shape) == (1, X.shape[1]) and np.array_equal(t.numpy()[0], X[i]), item
    print("ok {} {}".format(len(ids), len(skipped)))


if __name__ == "__main__":
    main(*sys.argv[1:])
