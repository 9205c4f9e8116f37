export {
  type ConformanceTarget,
  runStorageConformance,
} from './conformance.js';
