export { nodeFetch } from './fetch';
export { fileSource } from './file-source';
