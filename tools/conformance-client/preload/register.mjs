// Preloaded (`node --import`) into the conformance suite on Node 20, which lacks
// `fs.globSync` (Node 22): the suite imports it by name, so `fs` is served, for the
// suite's modules only, by a module that adds it. Nothing happens on Node 22+.
import fs from 'node:fs';
import { register } from 'node:module';

if (typeof fs.globSync !== 'function') register('./hooks.mjs', import.meta.url);
