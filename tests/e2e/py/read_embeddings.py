"""Reads an embed output folder with h5py, as a user's notebook would, and checks that the merged
file (virtual datasets over the rank shards) and the per-slide feature files agree.

Usage: read_embeddings.py STAGE_DIR   (run from any working directory)
Prints "ok <rows> <dim> <slides>" and exits 0, or raises.
"""
import os
import sys

import h5py
import numpy as np


def main(stage_dir):
    with h5py.File(os.path.join(stage_dir, "embeddings.h5"), "r") as f:
        ids = f["patch_id"][:]
        emb = f["embeddings"][:].astype(np.float32)
        slide = f["slide"][:]
        coords = f["coords"][:]
        dim = int(f.attrs["output_dim"])
    assert emb.shape == (ids.shape[0], dim), emb.shape
    assert np.all(np.diff(ids) > 0), "patch ids not ascending"
    assert np.all(np.isfinite(emb)), "non-finite embeddings"
    assert np.all(slide == (ids >> 32)), "slide column disagrees with the patch ids"
    features = os.path.join(stage_dir, "features")
    rows = 0
    names = sorted(os.listdir(features))
    for name in names:
        with h5py.File(os.path.join(features, name), "r") as f:
            n = f["features"].shape[0]
            assert np.array_equal(f["features"][:], emb[rows:rows + n]), name
            assert np.array_equal(f["coords"][:], coords[rows:rows + n]), name
            rows += n
    assert rows == ids.shape[0], (rows, ids.shape[0])
    print("ok", ids.shape[0], dim, len(names))


if __name__ == "__main__":
    main(sys.argv[1])
