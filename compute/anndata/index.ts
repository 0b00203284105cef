export { type CellsH5adOptions, writeCellsH5ad } from './cells-h5ad';
export { type CellsTableZarrOptions, writeCellsTableZarr } from './cells-zarr';
