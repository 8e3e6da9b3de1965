"""Reads an embed output folder the way CLAM and TRIDENT read their own outputs (from the formats
they document: CLAM's Generic_MIL_Dataset in .pt and h5 mode and its patch-file readers, TRIDENT's
feature and patch files and its slide encoders' `patch_size_level0`), and checks that every layout
holds the same rows as tessera's features/.

Usage: read_peer_layouts.py STAGE_DIR MANIFEST_CSV ENCODER
Prints "ok <slides> <empty> <failed>" and exits 0, or raises (also when torch, which the
project installs as python3-torch, is not importable).
"""
import csv
import os
import sys

import h5py
import numpy as np

TRIDENT_COORDS_ATTRS = ["patch_size", "patch_size_level0", "level0_magnification",
                        "target_magnification", "overlap", "level0_width", "level0_height", "name"]


def clam_getitem(data_dir, slide_id, use_h5, torch):
    """CLAM datasets/dataset_generic.py Generic_MIL_Dataset.__getitem__, data_dir a string."""
    if not use_h5:
        return torch.load(os.path.join(data_dir, "pt_files", "{}.pt".format(slide_id)))
    with h5py.File(os.path.join(data_dir, "h5_files", "{}.h5".format(slide_id)), "r") as f:
        features = f["features"][:]
        coords = f["coords"][:]
    return torch.from_numpy(features), coords


def main(stage_dir, manifest, encoder):
    import torch
    with open(os.path.join(stage_dir, "slides.csv"), newline="") as f:
        status = {row["slide_id"]: row for row in csv.DictReader(f)}
    with open(manifest, newline="") as f:
        rows = list(csv.DictReader(f))
    # The manifest is CLAM's csv_path: case_id, slide_id and label columns.
    for row in rows:
        assert {"case_id", "slide_id", "label"} <= set(row), row.keys()
    clam_dir = os.path.join(stage_dir, "clam")
    counts = {"ok": 0, "empty": 0, "failed": 0}
    for row in rows:
        slide_id = row["slide_id"]
        st = status[slide_id]["status"]
        counts[st] += 1
        own = os.path.join(stage_dir, "features", slide_id + ".h5")
        if st == "failed":
            assert not os.path.exists(own), own
            assert not os.path.exists(os.path.join(clam_dir, "pt_files", slide_id + ".pt"))
            continue
        with h5py.File(own, "r") as f:
            want = f["features"][:]
            want_xy = f["coords"][:]
            dim = f["features"].shape[1]
        n = int(status[slide_id]["patches"])
        assert want.shape == (n, dim) and want.dtype == np.float32, (slide_id, want.shape)
        assert want_xy.shape == (n, 2) and want_xy.dtype == np.int64, (slide_id, want_xy.shape)

        # CLAM, default mode: a tensor saved with torch.save.
        pt = clam_getitem(clam_dir, slide_id, False, torch)
        assert isinstance(pt, torch.Tensor) and pt.dtype == torch.float32, type(pt)
        assert tuple(pt.shape) == (n, dim), (slide_id, pt.shape)
        assert np.array_equal(pt.numpy(), want), slide_id
        # CLAM, h5 mode.
        feats, xy = clam_getitem(clam_dir, slide_id, True, torch)
        assert np.array_equal(feats.numpy(), want) and np.array_equal(xy, want_xy), slide_id
        # CLAM's patch-file readers: read_region(coord, patch_level, (patch_size, patch_size)).
        with h5py.File(os.path.join(clam_dir, "patches", slide_id + ".h5"), "r") as f:
            a = f["coords"].attrs
            assert int(a["patch_size"]) > 0 and int(a["patch_level"]) >= 0, dict(a)
            assert np.array_equal(f["coords"][:], want_xy), slide_id

        # TRIDENT: features_<encoder>/<name>.h5 and patches/<name>_patches.h5.
        with h5py.File(os.path.join(stage_dir, "features_" + encoder, slide_id + ".h5"), "r") as f:
            assert f["features"].attrs["encoder"] == encoder, dict(f["features"].attrs)
            assert f["features"].attrs["name"] == slide_id
            attrs = {"features": dict(f["features"].attrs), "coords": dict(f["coords"].attrs)}
            assert np.array_equal(f["features"][:], want), slide_id
            assert np.array_equal(f["coords"][:], want_xy), slide_id
        c = attrs["coords"]
        missing = [k for k in TRIDENT_COORDS_ATTRS if k not in c]
        assert not missing, (slide_id, missing)
        # What TRIDENT's slide encoders (TITAN, GigaPath, CARE) take.
        psl0 = attrs["coords"]["patch_size_level0"]
        assert psl0 == round(c["patch_size"] * c["level0_magnification"] /
                             c["target_magnification"]), (slide_id, dict(c))
        with h5py.File(os.path.join(stage_dir, "patches", slide_id + "_patches.h5"), "r") as f:
            p = dict(f["coords"].attrs)
            assert np.array_equal(f["coords"][:], want_xy), slide_id
        for k in TRIDENT_COORDS_ATTRS:
            assert p[k] == c[k], (slide_id, k, p[k], c[k])
    print("ok", counts["ok"], counts["empty"], counts["failed"])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
