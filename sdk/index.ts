/**
 * The Slide Prediction Service client. Runs in browsers and Node 22: nothing here uses Node
 * built-ins (a local file source lives in `sdk/node`).
 */
export { type ClientOptions, createClient, type SpsClient } from './client';
export type { CallOptions, EndpointInput, EndpointOutput } from './endpoint';
export { type ClientErrorCode, isSpsError, SpsError } from './errors';
export {
  createOAuthClient,
  type OAuthClient,
  type OAuthClientSettings,
  type PendingAuthorization,
  refreshingCredential,
  type TokenSet,
} from './oauth';
export { slideFileProblem } from './slide-file';
export {
  type OmeZarrStore,
  openPublicSample,
  openResults,
  openSampleHe,
  openSegmentationFile,
  openSegmentationMask,
  openStoreLink,
  type RangeFile,
  type RenewableStoreRoot,
  renewableStoreRoot,
  type StoreArray,
  storeKeys,
  storeLinkRoot,
} from './store';
export { type JobEvent, type JobStreamOptions, streamJob, waitForJob } from './stream';
export {
  type ByteSource,
  blobSource,
  type IngestWaitOptions,
  ingestFailure,
  UPLOAD_GRANULE,
  type UploadBody,
  type UploadOptions,
  type UploadProgress,
  type UploadSession,
  uploadSource,
  waitForIngest,
} from './upload';
