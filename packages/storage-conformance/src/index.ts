export {
  type ConformanceTarget,
  type ReadBehind,
  runStorageConformance,
  type StoredTable,
} from './conformance.js';
