"""The plain, untuned scikit-image nucleus pipeline that issue 24 compares the project's
segmenter with: rgb2hed, Otsu on the hematoxylin channel, small objects and holes cleaned, the
Euclidean distance transform, peak_local_max seeds, watershed. Its only lengths are textbook
nucleus sizes in microns, converted with each tile's mpp; nothing was fitted to any tile.

    python bench/segmentation_skimage_plain.py CASES.json

CASES.json: [{"image": path of raw interleaved RGB, "labels": path to write, "width", "height",
"mpp"}]. Writes each tile's labels as raw little-endian uint32 (0 = background).
"""

import json
import sys

import numpy as np
from scipy import ndimage as ndi
from skimage import color, filters, measure, morphology, segmentation
from skimage.feature import peak_local_max

# A nucleus is at least 3 µm across; two nuclei's centres are at least 3 µm apart.
MIN_AREA_UM2 = 7.0
MIN_DISTANCE_UM = 3.0


def segment(rgb, mpp):
    hematoxylin = color.rgb2hed(rgb)[..., 0]
    mask = hematoxylin > filters.threshold_otsu(hematoxylin)
    min_size = int(MIN_AREA_UM2 / mpp**2)
    mask = morphology.remove_small_objects(mask, max_size=min_size)
    mask = morphology.remove_small_holes(mask, max_size=min_size)
    distance = ndi.distance_transform_edt(mask)
    peaks = peak_local_max(
        distance,
        min_distance=max(1, int(MIN_DISTANCE_UM / 2 / mpp)),
        labels=measure.label(mask),
        exclude_border=False,
    )
    markers = np.zeros(mask.shape, dtype=np.int32)
    markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
    return segmentation.watershed(-distance, markers, mask=mask).astype(np.uint32)


def main():
    for case in json.load(open(sys.argv[1])):
        rgb = np.fromfile(case["image"], dtype=np.uint8).reshape(case["height"], case["width"], 3)
        segment(rgb, case["mpp"]).astype("<u4").tofile(case["labels"])


if __name__ == "__main__":
    main()
