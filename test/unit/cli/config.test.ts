import { ConfigError, loadConfig, requireProductionConfig } from '../../../cli/config';

describe('loadConfig', () => {
  test('embedded defaults', () => {
    const config = loadConfig({});
    expect(config.http).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      publicBaseUrl: 'http://127.0.0.1:8080',
    });
    expect(config.storage.backend).toBe('fs');
    expect(config.limits).toMatchObject({ ratePerSecond: 20, rateBurst: 100, signedUrlTtlSeconds: 3600 });
    expect(config.limits.uploadSessionTtlSeconds).toBe(7 * 24 * 3600);
    expect(config.database.url).toBeUndefined();
  });

  test('one clear line for each bad value', () => {
    expect(() =>
      loadConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud', STORAGE_BACKEND: 'ftp' }),
    ).toThrow(ConfigError);
    try {
      loadConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x', SIGNING_SECRET: 'short' });
    } catch (err) {
      const message = (err as Error).message;
      expect(message).toMatch(/PORT: /);
      expect(message).toMatch(/DATABASE_URL: must be a postgres:\/\/ URL/);
      expect(message).toMatch(/SIGNING_SECRET: must be at least 32 characters/);
    }
  });

  test('S3 needs a bucket', () => {
    expect(() => loadConfig({ STORAGE_BACKEND: 's3' })).toThrow(/S3_BUCKET: required/);
    const config = loadConfig({ STORAGE_BACKEND: 's3', S3_BUCKET: 'slides', S3_FORCE_PATH_STYLE: 'true' });
    expect(config.storage).toMatchObject({ backend: 's3', bucket: 'slides', forcePathStyle: true });
  });

  test('production entry points name every missing dependency', () => {
    expect(() => requireProductionConfig(loadConfig({}))).toThrow(
      /DATABASE_URL: required\n {2}TEMPORAL_ADDRESS: required\n {2}SIGNING_SECRET: required/,
    );
  });
});
