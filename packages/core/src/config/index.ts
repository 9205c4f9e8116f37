/**
 * `@keyway/core/config`: configuration written as text, as a standalone server reads it
 * from its environment (`keyway serve`): durations (`7d`) and rate limits
 * (`auth=20/60,mint=60/60`), each parsed with a message that says what is wrong.
 *
 * @see README.md "Configuration of keyway serve"
 * @module
 */
export { parseRateLimits, type RateLimitsConfig } from '../auth/rate-limit.js';
export { parseDuration } from '../contract/time.js';
