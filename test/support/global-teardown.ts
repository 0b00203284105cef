/** The services and the scratch folder belong to `npm test` (cli/dev.ts), which removes them. */
export default async function globalTeardown(): Promise<void> {}
