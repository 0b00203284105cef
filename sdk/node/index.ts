export { fileSource } from './file-source';
