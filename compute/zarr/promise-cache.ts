/**
 * Promises by key, least recently used out past `capacity`; a promise that rejects is dropped,
 * so the next caller tries again. A `Map` keeps insertion order, the LRU order once a hit
 * re-inserts its entry.
 */
export class PromiseCache<T> {
  private readonly entries = new Map<string, Promise<T>>();

  constructor(private readonly capacity: number) {}

  get(key: string, load: () => Promise<T>): Promise<T> {
    const hit = this.entries.get(key);
    if (hit !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit;
    }
    const loading = load();
    if (this.capacity < 1) return loading;
    this.entries.set(key, loading);
    loading.catch(() => this.entries.get(key) === loading && this.entries.delete(key));
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
    return loading;
  }

  /** Forgets `key` (its object changed). */
  delete(key: string): void {
    this.entries.delete(key);
  }
}
