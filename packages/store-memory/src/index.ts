export { type MemoryStorage, memoryStorage } from './memory-storage.js';
