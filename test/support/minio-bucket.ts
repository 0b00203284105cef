import { randomBytes } from 'node:crypto';
import { ListMultipartUploadsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { ensureBucket, type S3StoreOptions } from '../../storage';
import { startMinio } from './minio';

export interface MinioBucket {
  /** The S3 store's options for the bucket (and `prefix`, when given). */
  options: S3StoreOptions;
  /** The bucket for a process of the service (API, worker), as its environment (no prefix). */
  environment: Record<string, string>;
  /** A client of its own, to look behind the store. */
  client: S3Client;
  /** MinIO's process. */
  minioPid: number;
  /** What the uploads left besides published objects: multipart uploads and staged pieces. */
  uploadLeftovers(): Promise<string[]>;
  stop(): Promise<void>;
}

/** A MinIO just started may answer 503 until its drives are ready. */
async function ensureBucketOnceReady(options: S3StoreOptions): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await ensureBucket(options);
      return;
    } catch (err) {
      if (attempt === 20) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** A MinIO of its own with a fresh bucket named `name-<random>`. */
export async function startMinioBucket(name: string, prefix?: string): Promise<MinioBucket> {
  const minio = await startMinio();
  const options: S3StoreOptions = {
    endpoint: minio.endpoint,
    region: 'us-east-1',
    bucket: `${name}-${randomBytes(4).toString('hex')}`,
    accessKeyId: minio.accessKeyId,
    secretAccessKey: minio.secretAccessKey,
    forcePathStyle: true,
    ...(prefix === undefined ? {} : { prefix }),
  };
  await ensureBucketOnceReady(options);
  const client = new S3Client({
    endpoint: options.endpoint,
    region: options.region,
    forcePathStyle: true,
    credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
  });
  const Bucket = options.bucket;
  const staging = prefix === undefined ? '.tmp/' : `${prefix}/.tmp/`;
  return {
    options,
    environment: {
      STORAGE_BACKEND: 's3',
      S3_BUCKET: options.bucket,
      S3_ENDPOINT: minio.endpoint,
      S3_ACCESS_KEY_ID: minio.accessKeyId,
      S3_SECRET_ACCESS_KEY: minio.secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
    },
    client,
    minioPid: minio.pid,
    async uploadLeftovers() {
      const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket }));
      const staged = await client.send(new ListObjectsV2Command({ Bucket, Prefix: staging }));
      return [
        ...(uploads.Uploads ?? []).map((upload) => `multipart ${upload.Key}`),
        ...(staged.Contents ?? []).map((object) => `piece ${object.Key}`),
      ];
    },
    async stop() {
      client.destroy();
      await minio.stop();
    },
  };
}
