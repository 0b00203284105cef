"""Writes models/baseline-v0.7.onnx, the bundled v0.7 model: an honest, untrained baseline.

No trained virtual-multiplexing model can be had here (DESIGN.md, Models), so v0.7 is a fixed
image-processing graph that turns H&E into 14 marker-like channels with rules a pathologist
would recognise as crude proxies. It is NOT a model of immunofluorescence: every channel is a
rule on stain densities and local contrast, and several channels (CD3, CD4, CD8, FOXP3) cannot
be told apart on H&E at all, so they differ only in how strict their rule is. What it gives the
service is a real path: tiles in, ONNX Runtime, channels out, with a halo and a fixed scale.

Graph (input `rgb` float32 [N, 3, 240, 240], RGB 0..255 at 0.5 um/px; output `markers`
float32 [N, 14, 224, 224] in 0..1):
  1. optical density OD = -log10((I + 1) / 256) per RGB channel;
  2. colour deconvolution (Ruifrok & Johnston 2001, H&E vectors; the third, residual vector
     is their cross product) as a 1x1 Conv: densities h, e, r;
  3. a Gaussian smooth (sigma 1 px, 5 taps, separable, valid): h, e, r;
  4. a wider Gaussian (sigma 2.5 px, 13 taps, separable, valid) of those: hw, ew, rw, the
     neighbourhood means; local contrast is h - hw ("a nucleus darker than around it");
  5. the centre 224 x 224 of (3) beside (4): 6 feature maps, the halo of 8 px consumed
     exactly by the two valid convolutions (2 + 6);
  6. per marker a linear mix of the features plus a bias (1x1 Conv), then tanh(relu(.)):
     0 where the rule does not fire (glass, which the service stores as 0 too), towards 1
     where it fires strongly.

Run from the repository root with the test venv (which has `onnx`):
  ~/.cache/sps/venv/bin/python scripts/make-baseline-model.py [--out models/baseline-v0.7.onnx]
The output is byte-for-byte reproducible for a pinned onnx/protobuf (test/unit/models).
"""

import argparse
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TILE = 224
HALO = 8
SIZE = TILE + 2 * HALO
MPP = 0.5
OPSET = 17
IR_VERSION = 8

# Stain vectors in optical-density space, one row per stain (R, G, B).
HEMATOXYLIN = [0.644211, 0.716556, 0.266844]
EOSIN = [0.092789, 0.954111, 0.283111]

# Features after step 5, in channel order.
FEATURES = ["h", "e", "r", "hw", "ew", "rw"]

# One rule per catalog channel, in models/registry.ts order. Terms are feature weights; `hc`
# and `ec` are local contrast (h - hw, e - ew). The bias is the threshold below which the
# channel stays 0. Densities on H&E at 0.5 um/px run from 0 (glass) to about 1.5 (nuclei);
# the thresholds were set from CMU-1-Small-Region so that each rule fires on a minority of
# tissue pixels. Each `why` says what the rule stands in for.
RULES = [
    ("DAPI", {"h": 3.0, "hc": 2.0}, -1.2,
     "nuclear DNA: hematoxylin density, sharpened by its local contrast"),
    ("PanCK", {"e": 2.0, "hw": 2.5, "hc": -2.0}, -1.8,
     "epithelium: eosinophilic cytoplasm among densely packed nuclei, off the nuclei themselves"),
    ("CD3", {"h": 2.5, "hc": 5.0, "e": -1.5, "ew": -1.0}, -1.5,
     "T cells: small dark round nuclei with scant cytoplasm (lymphocyte rule)"),
    ("CD4", {"h": 2.5, "hc": 5.0, "e": -1.5, "ew": -1.0}, -1.8,
     "helper T cells: the lymphocyte rule, stricter (H&E cannot tell CD4 from CD8)"),
    ("CD8", {"h": 2.5, "hc": 5.0, "e": -1.5, "ew": -1.0}, -2.0,
     "cytotoxic T cells: the lymphocyte rule, stricter still"),
    ("CD20", {"h": 2.0, "hc": 3.0, "hw": 2.5, "e": -1.5, "ew": -1.0}, -2.2,
     "B cells: lymphocyte nuclei in dense clusters (follicles)"),
    ("CD45", {"h": 2.5, "hc": 5.0, "e": -1.0, "ew": -0.5}, -1.3,
     "all leukocytes: the lymphocyte rule, most permissive"),
    ("CD68", {"e": 2.0, "h": 1.0, "r": 2.0, "hc": -3.0}, -1.4,
     "macrophages: abundant, pale or foamy cytoplasm around moderately dense nuclei"),
    ("Ki67", {"h": 3.0, "hc": 6.0}, -3.5,
     "proliferation: the darkest, most contrasted nuclei (mitotic figures stain darkest)"),
    ("aSMA", {"e": 3.0, "ew": 1.5, "hw": -3.0, "h": -1.0}, -1.2,
     "smooth muscle and myofibroblasts: strongly eosinophilic, nucleus-poor fibrous tissue"),
    ("FOXP3", {"h": 2.5, "hc": 5.0, "e": -1.5, "ew": -1.0}, -2.4,
     "regulatory T cells: the lymphocyte rule, strictest (a rare subset)"),
    ("PD-L1", {"e": 1.5, "hw": 1.5, "hc": 1.0, "r": 1.0}, -1.6,
     "tumour and myeloid cells: membranes between eosinophilic cytoplasm and packed nuclei"),
    ("CD31", {"ec": 6.0, "e": 1.0, "hw": -2.0}, -0.6,
     "endothelium: vessel lumens, whose red cells are eosin brighter than their surroundings"),
    ("Vimentin", {"e": 2.0, "ew": 1.0, "hw": -2.0, "hc": 1.0}, -0.8,
     "mesenchyme: eosinophilic stroma with few, spindle-shaped nuclei"),
]


def stain_matrix() -> np.ndarray:
    """Unit OD vectors of H, E and the residual, one per row."""
    h = np.array(HEMATOXYLIN, dtype=np.float64)
    e = np.array(EOSIN, dtype=np.float64)
    h /= np.linalg.norm(h)
    e /= np.linalg.norm(e)
    residual = np.cross(h, e)
    residual /= np.linalg.norm(residual)
    return np.stack([h, e, residual])


def gaussian(sigma: float, radius: int) -> np.ndarray:
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-(x * x) / (2 * sigma * sigma))
    return k / k.sum()


def separable(name: str, kernel: np.ndarray, channels: int, inputs: str, output: str):
    """A depthwise separable blur (vertical, then horizontal), valid: no padding."""
    taps = kernel.size
    vertical = np.tile(kernel.reshape(1, 1, taps, 1), (channels, 1, 1, 1)).astype(np.float32)
    horizontal = np.tile(kernel.reshape(1, 1, 1, taps), (channels, 1, 1, 1)).astype(np.float32)
    inits = [
        numpy_helper.from_array(vertical, f"{name}_v"),
        numpy_helper.from_array(horizontal, f"{name}_h"),
    ]
    nodes = [
        helper.make_node("Conv", [inputs, f"{name}_v"], [f"{name}_mid"], group=channels, name=f"{name}_v"),
        helper.make_node("Conv", [f"{name}_mid", f"{name}_h"], [output], group=channels, name=f"{name}_h"),
    ]
    return nodes, inits


def marker_weights() -> tuple[np.ndarray, np.ndarray]:
    """The per-marker 1x1 Conv: rules expanded onto FEATURES (hc = h - hw, ec = e - ew)."""
    weights = np.zeros((len(RULES), len(FEATURES)), dtype=np.float64)
    bias = np.zeros(len(RULES), dtype=np.float64)
    index = {name: i for i, name in enumerate(FEATURES)}
    for m, (_, terms, threshold, _) in enumerate(RULES):
        for term, w in terms.items():
            if term == "hc":
                weights[m, index["h"]] += w
                weights[m, index["hw"]] -= w
            elif term == "ec":
                weights[m, index["e"]] += w
                weights[m, index["ew"]] -= w
            else:
                weights[m, index[term]] += w
        bias[m] = threshold
    return weights, bias


def build() -> onnx.ModelProto:
    nodes = []
    inits = []

    # 1. OD = -log10((I + 1) / 256) = (ln 256 - ln(I + 1)) / ln 10.
    inits += [
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array(np.array(math.log(256.0), dtype=np.float32), "ln256"),
        numpy_helper.from_array(np.array(1.0 / math.log(10.0), dtype=np.float32), "inv_ln10"),
    ]
    nodes += [
        helper.make_node("Add", ["rgb", "one"], ["rgb_plus_one"], name="od_add"),
        helper.make_node("Log", ["rgb_plus_one"], ["ln_intensity"], name="od_log"),
        helper.make_node("Sub", ["ln256", "ln_intensity"], ["od_natural"], name="od_sub"),
        helper.make_node("Mul", ["od_natural", "inv_ln10"], ["od"], name="od_scale"),
    ]

    # 2. Concentrations: OD (per pixel, a row vector over RGB) = C . M, so C = OD . M^-1.
    unmix = np.linalg.inv(stain_matrix())  # [rgb, stain]
    deconv = unmix.T.reshape(3, 3, 1, 1).astype(np.float32)  # [stain, rgb, 1, 1]
    inits.append(numpy_helper.from_array(deconv, "deconvolution"))
    nodes.append(helper.make_node("Conv", ["od", "deconvolution"], ["stains"], name="deconvolution"))

    # 3 and 4. Smooth, then the neighbourhood mean of the smoothed densities.
    n, i = separable("smooth", gaussian(1.0, 2), 3, "stains", "smoothed")
    nodes += n
    inits += i
    n, i = separable("wide", gaussian(2.5, 6), 3, "smoothed", "neighbourhood")
    nodes += n
    inits += i

    # 5. The centre of the smoothed densities, beside their neighbourhood means.
    inner = HALO - 2
    inits += [
        numpy_helper.from_array(np.array([inner, inner], dtype=np.int64), "crop_starts"),
        numpy_helper.from_array(np.array([inner + TILE, inner + TILE], dtype=np.int64), "crop_ends"),
        numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "crop_axes"),
    ]
    nodes += [
        helper.make_node(
            "Slice", ["smoothed", "crop_starts", "crop_ends", "crop_axes"], ["centre"], name="crop"
        ),
        helper.make_node("Concat", ["centre", "neighbourhood"], ["features"], axis=1, name="features"),
    ]

    # 6. Per-marker rules.
    weights, bias = marker_weights()
    inits += [
        numpy_helper.from_array(weights.reshape(len(RULES), len(FEATURES), 1, 1).astype(np.float32), "rules"),
        numpy_helper.from_array(bias.astype(np.float32), "thresholds"),
    ]
    nodes += [
        helper.make_node("Conv", ["features", "rules", "thresholds"], ["evidence"], name="rules"),
        helper.make_node("Relu", ["evidence"], ["fired"], name="fired"),
        helper.make_node("Tanh", ["fired"], ["markers"], name="intensity"),
    ]

    graph = helper.make_graph(
        nodes,
        "sps_baseline_v0_7",
        [helper.make_tensor_value_info("rgb", TensorProto.FLOAT, ["batch", 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("markers", TensorProto.FLOAT, ["batch", len(RULES), TILE, TILE])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="slide-prediction-service scripts/make-baseline-model.py",
        producer_version="1",
        doc_string="Untrained baseline: colour deconvolution and fixed per-marker rules, not a trained "
        "virtual multiplexing model.",
    )
    model.ir_version = IR_VERSION
    model.model_version = 7
    helper.set_model_props(
        model,
        {
            "sps.version": "v0.7",
            "sps.mpp": str(MPP),
            "sps.tile": str(TILE),
            "sps.halo": str(HALO),
            "sps.channels": ",".join(name for name, *_ in RULES),
            "sps.rules": "\n".join(f"{name}: {why}" for name, _, _, why in RULES),
        },
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="models/baseline-v0.7.onnx")
    args = parser.parse_args()
    data = build().SerializeToString(deterministic=True)
    with open(args.out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
