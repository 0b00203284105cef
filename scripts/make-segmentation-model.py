"""Writes models/segmentation-baseline-v1.onnx: an honest, untrained nucleus foreground model.

No trained nucleus segmentation model (StarDist, HoVer-Net, Cellpose) can be had here, so the
bundled segmentation model is the classical front end written as an ONNX graph. It lets the
model-based segmenter (compute/segmentation/onnx.ts) run end to end through ONNX Runtime with the
same input and output convention a trained model would follow; swapping in a trained model is a
registry entry (models/registry.ts, `segmentationModels`).

Convention (compute/segmentation/onnx.ts): input `rgb` float32 [N, 3, H, W], RGB in 0..1 at
0.5 um/px, H and W free; output `foreground` float32 [N, 1, H - 2 halo, W - 2 halo], the
probability that a pixel is nucleus. This model has no `centre` output, so the segmenter seeds
its watershed from the distance transform of the thresholded foreground.

Graph:
  1. optical density OD = -log10((255 I + 1) / 256) per RGB channel (the convention of
     compute/segmentation/stain.ts and scripts/make-baseline-model.py);
  2. hematoxylin density by colour deconvolution (Ruifrok & Johnston 2001; residual = H x E),
     as a 1x1 Conv with one output channel;
  3. a Gaussian smooth (sigma 0.5 px = 0.25 um, 5 taps, separable, valid): the halo of 2 px;
  4. the tile's tissue pixels (summed OD above 0.2, i.e. not glass) give the mean and standard
     deviation of the smoothed density; the cut is mean + 0.4 std, at least 0.3 OD. This stands
     in for the classical segmenter's Otsu cut (on the MoNuSeg tiles Otsu lands near mean +
     0.35 std), so the answer depends on the whole input tile, as Otsu's does;
  5. foreground = sigmoid(10 (density - cut)): 0.5 exactly at the cut.

Run from the repository root with the test venv (which has `onnx`):
  ~/.cache/sps/venv/bin/python scripts/make-segmentation-model.py [--out models/segmentation-baseline-v1.onnx]
"""

import argparse
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MPP = 0.5
HALO = 2
SIGMA = 0.5
OPSET = 17
IR_VERSION = 8

HEMATOXYLIN = [0.644211, 0.716556, 0.266844]
EOSIN = [0.092789, 0.954111, 0.283111]

# Tissue: summed OD over R, G, B above this (glass sums to about 0.05).
TISSUE_OD = 0.2
CUT_STD = 0.4
CUT_FLOOR = 0.3
STEEPNESS = 10.0


def hematoxylin_weights() -> np.ndarray:
    """The column of the inverse stain matrix that turns an OD vector into hematoxylin density."""
    h = np.array(HEMATOXYLIN, dtype=np.float64)
    e = np.array(EOSIN, dtype=np.float64)
    h /= np.linalg.norm(h)
    e /= np.linalg.norm(e)
    residual = np.cross(h, e)
    residual /= np.linalg.norm(residual)
    return np.linalg.inv(np.stack([h, e, residual]))[:, 0]


def gaussian(sigma: float, radius: int) -> np.ndarray:
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-(x * x) / (2 * sigma * sigma))
    return k / k.sum()


def const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def build() -> onnx.ModelProto:
    nodes = []
    inits = [
        const("one", 1.0),
        const("scale255", 255.0),
        const("ln256", math.log(256.0)),
        const("inv_ln10", 1.0 / math.log(10.0)),
        const("tissue_od", TISSUE_OD),
        const("cut_std", CUT_STD),
        const("cut_floor", CUT_FLOOR),
        const("steepness", STEEPNESS),
        const("tiny", 1e-6),
    ]
    # 1. OD.
    nodes += [
        helper.make_node("Mul", ["rgb", "scale255"], ["counts"], name="to_counts"),
        helper.make_node("Add", ["counts", "one"], ["counts_plus_one"], name="od_add"),
        helper.make_node("Log", ["counts_plus_one"], ["ln_intensity"], name="od_log"),
        helper.make_node("Sub", ["ln256", "ln_intensity"], ["od_natural"], name="od_sub"),
        helper.make_node("Mul", ["od_natural", "inv_ln10"], ["od"], name="od_scale"),
    ]
    # 2. Hematoxylin density.
    weights = hematoxylin_weights().reshape(1, 3, 1, 1).astype(np.float32)
    inits.append(numpy_helper.from_array(weights, "deconvolution"))
    nodes.append(helper.make_node("Conv", ["od", "deconvolution"], ["density"], name="deconvolution"))
    # 3. Smooth, valid: the halo is consumed here.
    kernel = gaussian(SIGMA, HALO)
    inits += [
        numpy_helper.from_array(kernel.reshape(1, 1, -1, 1).astype(np.float32), "smooth_v"),
        numpy_helper.from_array(kernel.reshape(1, 1, 1, -1).astype(np.float32), "smooth_h"),
    ]
    nodes += [
        helper.make_node("Conv", ["density", "smooth_v"], ["smooth_mid"], name="smooth_v"),
        helper.make_node("Conv", ["smooth_mid", "smooth_h"], ["smoothed"], name="smooth_h"),
    ]
    # 4. The cut from the tissue pixels of the whole input (halo included).
    inits.append(numpy_helper.from_array(np.ones((1, 3, 1, 1), dtype=np.float32), "sum_rgb"))
    axes = numpy_helper.from_array(np.array([1, 2, 3], dtype=np.int64), "stat_axes")
    inits.append(axes)
    nodes += [
        helper.make_node("Conv", ["od", "sum_rgb"], ["od_sum"], name="od_sum"),
        helper.make_node("Greater", ["od_sum", "tissue_od"], ["is_tissue"], name="is_tissue"),
        helper.make_node("Cast", ["is_tissue"], ["tissue"], to=TensorProto.FLOAT, name="tissue"),
        helper.make_node("ReduceSum", ["tissue", "stat_axes"], ["tissue_n_raw"], keepdims=1, name="tissue_n"),
        helper.make_node("Max", ["tissue_n_raw", "one"], ["tissue_n"], name="tissue_n_floor"),
        helper.make_node("Mul", ["density", "tissue"], ["tissue_density"], name="tissue_density"),
        helper.make_node("ReduceSum", ["tissue_density", "stat_axes"], ["density_sum"], keepdims=1, name="density_sum"),
        helper.make_node("Div", ["density_sum", "tissue_n"], ["mean"], name="mean"),
        helper.make_node("Mul", ["tissue_density", "density"], ["tissue_sq"], name="tissue_sq"),
        helper.make_node("ReduceSum", ["tissue_sq", "stat_axes"], ["sq_sum"], keepdims=1, name="sq_sum"),
        helper.make_node("Div", ["sq_sum", "tissue_n"], ["mean_sq"], name="mean_sq"),
        helper.make_node("Mul", ["mean", "mean"], ["mean_squared"], name="mean_squared"),
        helper.make_node("Sub", ["mean_sq", "mean_squared"], ["variance_raw"], name="variance_raw"),
        helper.make_node("Max", ["variance_raw", "tiny"], ["variance"], name="variance"),
        helper.make_node("Sqrt", ["variance"], ["std"], name="std"),
        helper.make_node("Mul", ["std", "cut_std"], ["spread"], name="spread"),
        helper.make_node("Add", ["mean", "spread"], ["cut_raw"], name="cut_raw"),
        helper.make_node("Max", ["cut_raw", "cut_floor"], ["cut"], name="cut"),
    ]
    # 5. Probability.
    nodes += [
        helper.make_node("Sub", ["smoothed", "cut"], ["excess"], name="excess"),
        helper.make_node("Mul", ["excess", "steepness"], ["logit"], name="logit"),
        helper.make_node("Sigmoid", ["logit"], ["foreground"], name="foreground"),
    ]
    graph = helper.make_graph(
        nodes,
        "sps_segmentation_baseline_v1",
        [helper.make_tensor_value_info("rgb", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [helper.make_tensor_value_info("foreground", TensorProto.FLOAT, ["batch", 1, "out_height", "out_width"])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="slide-prediction-service scripts/make-segmentation-model.py",
        producer_version="1",
        doc_string="Untrained baseline: hematoxylin density by colour deconvolution against a per-tile "
        "cut, not a trained nucleus segmentation model.",
    )
    model.ir_version = IR_VERSION
    model.model_version = 1
    helper.set_model_props(
        model,
        {
            "sps.version": "segmentation-baseline-v1",
            "sps.mpp": str(MPP),
            "sps.halo": str(HALO),
            "sps.outputs": "foreground",
        },
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="models/segmentation-baseline-v1.onnx")
    args = parser.parse_args()
    data = build().SerializeToString(deterministic=True)
    with open(args.out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
