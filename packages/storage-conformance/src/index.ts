export { EVENTS_BEFORE_ANCESTORS, expectBackfilled } from './audit-backfill.js';
export {
  type ConformanceTarget,
  type ReadBehind,
  runStorageConformance,
  type StoredTable,
} from './conformance.js';
