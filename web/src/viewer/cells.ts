import { type FileMetaData, parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import { openSegmentationFile, type RangeFile, type SpsClient } from '../../../sdk';

/** What the viewer shows of one cell: the morphology row and each marker's mean. */
export interface CellSummary {
  label: number;
  instanceId: string;
  areaUm2: number;
  means: { marker: string; mean: number }[];
}

interface Table {
  file: RangeFile;
  metadata: FileMetaData;
}

type Row = Record<string, unknown>;

/**
 * Rows of a segmentation layer's Parquet tables, looked up by mask label. The tables are read
 * with Range requests (footer, then the row group that holds the row), never whole. Rows follow
 * the labels (label n is row n - 1); a table where that does not hold is searched by its key
 * column once.
 */
export class CellTables {
  private readonly tables = new Map<string, Promise<Table>>();
  private readonly indexes = new Map<string, Promise<Map<string, number>>>();
  private readonly cells = new Map<number, Promise<CellSummary | null>>();

  constructor(
    private readonly sps: SpsClient,
    private readonly sampleId: string,
    private readonly layerId: string,
    private readonly markers: readonly string[],
  ) {}

  /** The cell with this mask label; null when the tables have no such row. */
  cell(label: number): Promise<CellSummary | null> {
    let found = this.cells.get(label);
    if (!found) {
      found = this.read(label);
      this.cells.set(label, found);
    }
    return found;
  }

  private async read(label: number): Promise<CellSummary | null> {
    const instance = await this.row('features/instances.parquet', 'local_label', String(label), label - 1, [
      'instance_id',
      'local_label',
      'area_um2',
    ]);
    if (!instance) return null;
    const instanceId = String(instance.instance_id);
    const means = await Promise.all(
      this.markers.map(async (marker) => {
        const row = await this.row(
          `features/markers/${marker}.parquet`,
          'instance_id',
          instanceId,
          label - 1,
          ['instance_id', 'mean'],
        );
        return { marker, mean: Number(row?.mean) };
      }),
    );
    return { label, instanceId, areaUm2: Number(instance.area_um2), means };
  }

  private table(path: string): Promise<Table> {
    let table = this.tables.get(path);
    if (!table) {
      table = (async () => {
        const file = await openSegmentationFile(this.sps, this.sampleId, this.layerId, path);
        return { file, metadata: await parquetMetadataAsync(file) };
      })();
      this.tables.set(path, table);
    }
    return table;
  }

  /** The row whose `key` column is `value`: first at `guess`, else by the column's index. */
  private async row(
    path: string,
    key: string,
    value: string,
    guess: number,
    columns: string[],
  ): Promise<Row | null> {
    const { file, metadata } = await this.table(path);
    const rows = Number(metadata.num_rows);
    const at = async (index: number) =>
      (await parquetReadObjects({ file, metadata, columns, rowStart: index, rowEnd: index + 1 }))[0] as Row;
    if (guess >= 0 && guess < rows) {
      const row = await at(guess);
      if (String(row[key]) === value) return row;
    }
    const index = await this.index(path, key);
    const found = index.get(value);
    return found === undefined ? null : at(found);
  }

  private index(path: string, key: string): Promise<Map<string, number>> {
    let index = this.indexes.get(path);
    if (!index) {
      index = (async () => {
        const { file, metadata } = await this.table(path);
        const rows = await parquetReadObjects({ file, metadata, columns: [key] });
        return new Map(rows.map((row, i) => [String((row as Row)[key]), i]));
      })();
      this.indexes.set(path, index);
    }
    return index;
  }
}
