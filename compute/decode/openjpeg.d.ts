/**
 * The slice of @cornerstonejs/codec-openjpeg's decoder build that compute/decode uses; the
 * package ships no types. The decoder is an Emscripten/embind object, so `delete()` frees it.
 */
declare module '@cornerstonejs/codec-openjpeg/decodewasmjs' {
  export interface FrameInfo {
    width: number;
    height: number;
    bitsPerSample: number;
    componentCount: number;
    isSigned: boolean;
  }

  export interface J2KDecoder {
    getEncodedBuffer(length: number): Uint8Array;
    getDecodedBuffer(): Uint8ClampedArray;
    decode(): void;
    getFrameInfo(): FrameInfo;
    delete(): void;
  }

  export interface OpenJpegModule {
    J2KDecoder: new () => J2KDecoder;
  }

  export interface ModuleOptions {
    print?: (text: string) => void;
    printErr?: (text: string) => void;
  }

  const factory: (options?: ModuleOptions) => Promise<OpenJpegModule>;
  export default factory;
}
