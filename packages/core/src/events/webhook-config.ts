import { Webhook } from 'standardwebhooks';
import { z } from 'zod';
import { EVENT_TYPES } from '../contract/codes.js';

const WEBHOOK_SECRET =
  'a webhook "secret" must be "whsec_" followed by a base64 key (Standard Webhooks)';

/** Why a signing secret cannot sign (not `whsec_` and a base64 key), or `null`. */
function signingKeyProblem(secret: string): string | null {
  if (!/^whsec_[A-Za-z0-9+/]{16,}={0,2}$/.test(secret)) return WEBHOOK_SECRET;
  try {
    new Webhook(secret);
    return null;
  } catch {
    return WEBHOOK_SECRET;
  }
}

/** One webhook endpoint of the broker's configuration (docs/api.md §11). */
export const WebhookSchema = z.strictObject(
  {
    url: z.string(),
    secret: z.string().refine((secret) => signingKeyProblem(secret) === null, WEBHOOK_SECRET),
    types: z.array(z.enum(EVENT_TYPES)).min(1).optional(),
  },
  { error: '"webhooks" must be an array of { url, secret, types? }' },
);
