/** Every object key the service writes is built here, so the layout has one definition. */
export const objectKeys = {
  samplePrefix: (organizationId: string, sampleId: string) => `orgs/${organizationId}/samples/${sampleId}/`,
  uploadPart: (organizationId: string, sampleId: string, startOffset: number, nonce: string) =>
    `orgs/${organizationId}/samples/${sampleId}/upload-parts/${String(startOffset).padStart(16, '0')}-${nonce}`,
  originalUpload: (organizationId: string, sampleId: string, filename: string) =>
    `orgs/${organizationId}/samples/${sampleId}/original/${filename}`,
} as const;
