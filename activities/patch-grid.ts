import { prefixedStore } from '../compute/store';
import { type TissuePatches, tissuePatchGrid } from '../compute/tissue';
import { readMaskArray } from '../compute/zarr';
import type { SlideRecord } from '../db/sample-slides';
import type { ObjectStore } from '../storage';

/**
 * The credit grid of a slide at `mpp`, from its stored tissue mask. Pricing (the recount) and
 * the prediction job both call this one function, so the positions paid for are the positions
 * predicted. Undefined when the slide has no mask yet.
 */
export async function storedPatchGrid(
  store: ObjectStore,
  slide: SlideRecord,
  mpp: number,
): Promise<TissuePatches | undefined> {
  if (!slide.tissueMaskZarrPrefix) return undefined;
  const mask = await readMaskArray(prefixedStore(store, slide.tissueMaskZarrPrefix));
  const base = slide.levels[0]!;
  return tissuePatchGrid({
    mask: mask.mask,
    width: mask.width,
    height: mask.height,
    maskDownsampleX: slide.tissueMaskDownsampleX!,
    maskDownsampleY: slide.tissueMaskDownsampleY!,
    levelWidthPx: base.widthPx,
    levelHeightPx: base.heightPx,
    mpp,
  });
}
