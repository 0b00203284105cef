"""The classical segmenter of compute/segmentation (classical.ts, nuclei.ts) and the per-cell
measurements (features.ts) written with scikit-image and SciPy, step for step, to time them on
the same tiles as bench/segmentation.ts. Single-threaded: the caller sets OMP/BLAS threads to 1.

    python bench/segmentation_skimage.py TILES.json

TILES.json: {"mpp": float, "params": {...ClassicalOptions}, "tiles": [{"path", "width",
"height", "core": [x0, y0, x1, y1]}]}, each path a raw interleaved RGB file of a tile's window,
core the part it owns, in window pixels. Prints one JSON line: seconds, pixels, cells.
"""

import json
import sys
import time

import numpy as np
from scipy import ndimage as ndi
from scipy.spatial import ConvexHull
from skimage import filters, measure, morphology, segmentation
from skimage.feature import peak_local_max

# Ruifrok and Johnston's unit stain vectors and the unmixing of stain.ts (H, E and their cross product).
H = np.array([0.644211, 0.716556, 0.266844])
E = np.array([0.092789, 0.954111, 0.283111])
H /= np.linalg.norm(H)
E /= np.linalg.norm(E)
R = np.cross(H, E)
R /= np.linalg.norm(R)
UNMIX = np.linalg.inv(np.stack([H, E, R])).astype(np.float32)  # od (RGB) @ UNMIX = (h, e, r)
OD_OF_VALUE = (-np.log10((np.arange(256) + 1) / 256)).astype(np.float32)


def stain_densities(rgb):
    """rgb2hed-style colour deconvolution with stain.ts's density convention."""
    od = OD_OF_VALUE[rgb]
    hed = od @ UNMIX
    return hed[..., 0], hed[..., 1]


CORNERS = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])


def square_solidity(region):
    """Area over the hull of the pixels' unit squares, as labels.ts measures it (regionprops'
    own solidity counts the pixels of a rasterised hull, which keeps more ragged objects)."""
    if region.area < 3:
        return 1.0
    corners = (region.coords[:, None, :] + CORNERS[None]).reshape(-1, 2)
    return region.area / ConvexHull(corners).volume


def segment(rgb, mpp, p):
    h, e = stain_densities(rgb)
    smooth = filters.gaussian(h, sigma=p["smoothingUm"] / mpp, mode="nearest", truncate=3.0, preserve_range=True)
    glass = np.all(rgb >= p["whiteLevel"], axis=-1)
    # Otsu over densities coded in 0.01 OD steps, as threshold.ts does; codes above t are nucleus.
    codes = np.clip(np.rint(smooth[~glass] / 0.01), 0, 255).astype(np.int64)
    counts = np.bincount(codes, minlength=256)
    if np.count_nonzero(counts) > 1:
        cut = (filters.threshold_otsu(hist=(counts, np.arange(256))) + 0.5) * 0.01
    else:
        cut = p["maxThresholdOd"]
    cut = min(max(cut, p["minThresholdOd"]), p["maxThresholdOd"])
    mask = smooth >= cut
    radius = round(p["openingRadiusUm"] / mpp)
    if radius > 0:
        mask = ndi.binary_opening(mask, morphology.disk(radius))
    # Holes of at most this many pixels (the pre-0.26 `area_threshold` removed only smaller ones).
    mask = morphology.remove_small_holes(mask, max_size=int(p["maxHoleAreaUm2"] / mpp**2))
    distance = ndi.distance_transform_edt(mask)
    relief = filters.gaussian(distance, sigma=p["distanceSmoothingUm"] / mpp, mode="nearest", truncate=3.0)
    peaks = peak_local_max(
        relief,
        min_distance=max(1, int(p["seedSeparationUm"] / mpp)),
        threshold_abs=p["minSeedDistanceUm"] / mpp,
        labels=mask.astype(np.uint8),
        exclude_border=False,
        p_norm=2,  # seeds.ts drops peaks within a Euclidean disk of a higher one
    )
    markers = np.zeros(mask.shape, dtype=np.int32)
    markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
    labels = segmentation.watershed(-relief, markers, mask=mask)
    # Foreground no seed reached (too thin for a peak) becomes objects of its own, as labels.ts does.
    unseeded, _ = ndi.label(mask & (labels == 0))
    labels = np.where(unseeded > 0, unseeded + labels.max(), labels)
    keep = np.zeros(labels.max() + 1, dtype=bool)
    for region in measure.regionprops(labels):
        um2 = region.area * mpp**2
        keep[region.label] = p["minAreaUm2"] <= um2 <= p["maxAreaUm2"] and square_solidity(region) >= p["minSolidity"]
    nuclei, _, _ = segmentation.relabel_sequential(np.where(keep[labels], labels, 0))
    cells = segmentation.expand_labels(nuclei, distance=p["cellExpansionUm"] / mpp)
    return cells, nuclei, np.stack([h, e], axis=-1)


def measure_cells(cells, nuclei, stains, core):
    """regionprops of the cells the tile owns (centroid in its core): the columns of instances.parquet."""
    x0, y0, x1, y1 = core
    nucleus_area = np.bincount(nuclei.ravel(), minlength=cells.max() + 1)
    rows = []
    for r in measure.regionprops(cells, intensity_image=stains):
        cy, cx = r.centroid
        if not (x0 <= int(cx) < x1 and y0 <= int(cy) < y1):
            continue
        rows.append(
            (
                r.centroid,
                r.bbox,
                r.area,
                r.perimeter,
                r.eccentricity,
                r.solidity,
                r.axis_major_length,
                r.axis_minor_length,
                r.orientation,
                r.intensity_mean,
                nucleus_area[r.label],
            )
        )
    return rows


def main():
    spec = json.load(open(sys.argv[1]))
    mpp, params = spec["mpp"], spec["params"]
    seconds = 0.0
    pixels = 0
    cells = 0
    for tile in spec["tiles"]:
        rgb = np.fromfile(tile["path"], dtype=np.uint8).reshape(tile["height"], tile["width"], 3)
        start = time.process_time()
        labels, nuclei, stains = segment(rgb, mpp, params)
        rows = measure_cells(labels, nuclei, stains, tile["core"])
        seconds += time.process_time() - start
        pixels += tile["width"] * tile["height"]
        cells += len(rows)
    print(json.dumps({"seconds": seconds, "pixels": pixels, "cells": cells}))


if __name__ == "__main__":
    main()
