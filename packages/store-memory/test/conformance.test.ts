import { runStorageConformance } from '@keyway/storage-conformance';
import { memoryStorage } from '../src/index.js';

runStorageConformance('memoryStorage()', { create: () => memoryStorage() });
