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

# Ruifrok and Johnston's unit stain vectors, the fallback of stain-estimate.ts.
H = np.array([0.644211, 0.716556, 0.266844])
E = np.array([0.092789, 0.954111, 0.283111])
H /= np.linalg.norm(H)
E /= np.linalg.norm(E)
OD_OF_VALUE = (-np.log10((np.arange(256) + 1) / 256)).astype(np.float32)


def degrees(a, b):
    return np.degrees(np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1)))


def macenko(od):
    """stain-estimate.ts: the stains at the 1st and 99th percentile angles in the plane of the two
    largest eigenvectors of the tissue pixels' OD covariance, Ruifrok's where implausible."""
    flat = od.reshape(-1, 3)
    flat = flat[:: max(1, -(-len(flat) // 20_000))]
    tissue = flat[flat.sum(axis=1) >= 0.3]
    if len(tissue) < 2000:
        return H, E
    values, vectors = np.linalg.eigh(np.cov(tissue.T))
    plane = vectors[:, np.argsort(values)[::-1][:2]]
    plane *= np.where(plane.sum(axis=0) < 0, -1, 1)
    angles = np.sort(np.arctan2(tissue @ plane[:, 1], tissue @ plane[:, 0]))
    n = len(angles)
    ends = [angles[int(np.floor(0.01 * (n - 1)))], angles[int(np.ceil(0.99 * (n - 1)))]]
    a, b = (np.clip(plane @ [np.cos(t), np.sin(t)], 0, None) for t in ends)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    h, e = (a, b) if a[0] > b[0] else (b, a)
    if degrees(h, e) < 10 or degrees(h, H) >= degrees(h, E) or degrees(e, E) >= degrees(e, H):
        return H, E
    return h, e


def stain_densities(rgb):
    """stain.ts's colour deconvolution with the tile's own vectors (H, E and their cross product)."""
    od = OD_OF_VALUE[rgb]
    h, e = macenko(od)
    r = np.cross(h, e)
    unmix = np.linalg.inv(np.stack([h, e, r / np.linalg.norm(r)])).astype(np.float32)
    hed = od @ unmix
    return hed[..., 0], hed[..., 1]


def relative_otsu_cut(densities, p):
    """threshold.ts: Otsu on densities coded in 1/128ths of their 99th percentile, within bounds."""
    if densities.size == 0:
        return np.inf
    scale = np.percentile(densities, 99)
    codes = np.clip(np.floor(densities / (scale / 128)), 0, 255).astype(np.int64)
    counts = np.bincount(codes, minlength=256)
    cumulative = np.cumsum(counts) / counts.sum()
    if np.searchsorted(cumulative, 0.99) - np.searchsorted(cumulative, 0.01) < 8:
        return np.inf
    cut = filters.threshold_otsu(hist=(counts, np.arange(256))) + 1
    return min(max(cut * scale / 128, p["minCutFraction"] * scale), p["maxCutFraction"] * scale)


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
    mask = smooth >= relative_otsu_cut(smooth[~glass], p)
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
