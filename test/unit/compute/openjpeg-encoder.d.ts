/** The encoder of @cornerstonejs/codec-openjpeg (untyped), used by tests to make JPEG 2000 tiles. */
declare module '@cornerstonejs/codec-openjpeg/wasmjs' {
  export interface J2KEncoder {
    getDecodedBuffer(info: {
      width: number;
      height: number;
      bitsPerSample: number;
      componentCount: number;
      isSigned: boolean;
    }): Uint8Array;
    encode(): void;
    getEncodedBuffer(): Uint8Array;
    delete(): void;
  }

  const factory: (options?: {
    print?: (text: string) => void;
    printErr?: (text: string) => void;
  }) => Promise<{ J2KEncoder: new () => J2KEncoder }>;
  export default factory;
}
