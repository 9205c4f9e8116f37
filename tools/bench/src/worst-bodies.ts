import { createBroker } from '@keyway/core';
import { createHandler } from '@keyway/http';
import { memoryStorage } from '@keyway/store-memory';
import { worstRequests } from '@keyway/test-support/worst-bodies';
import { type Budget, median } from './measure.js';

/** One route's worst body: the time the handler takes to refuse it, against parsing it alone. */
export interface WorstBodyRow {
  name: string;
  bodyBytes: number;
  answerBytes: number;
  status: number;
  /** Median time of one answer, milliseconds. */
  answerMs: number;
  /** Median time of `JSON.parse` of the same body, milliseconds: the floor no handler beats. */
  parseMs: number;
}

const ROOT_KEY = 'bench-root-key-0123456789-abcdefghijklmnop';

/**
 * The worst request bodies of every route, sent through the handler in
 * process with the root key: each answer's size, and its time against `JSON.parse` of the
 * same body. Before the bounds, a list of a quarter million wrong scopes took about 8 s and
 * answered 20 MiB.
 */
export async function benchWorstBodies(options: { budget: Budget }): Promise<WorstBodyRow[]> {
  const broker = createBroker({
    rootKey: ROOT_KEY,
    storage: memoryStorage(),
    providerManagement: true,
    baseUrl: 'https://keyway.example.test',
    purgeIntervalMs: false,
    webhookPollIntervalMs: false,
  });
  const handler = createHandler(broker);
  const rows: WorstBodyRow[] = [];
  const runs = Math.max(3, options.budget.rounds);
  try {
    for (const request of worstRequests()) {
      const send = async () => {
        const response = await handler(
          new Request(`https://keyway.example.test${request.path}`, {
            method: request.method,
            headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
            body: request.body,
          }),
        );
        return { status: response.status, text: await response.text() };
      };
      const answers: number[] = [];
      const parses: number[] = [];
      let last = await send();
      for (let run = 0; run < runs; run++) {
        let started = performance.now();
        try {
          JSON.parse(request.body);
        } catch {
          // A body nested deeper than the parser's stack is refused by it: that is its floor.
        }
        parses.push(performance.now() - started);
        started = performance.now();
        last = await send();
        answers.push(performance.now() - started);
      }
      rows.push({
        name: request.name,
        bodyBytes: request.body.length,
        answerBytes: last.text.length,
        status: last.status,
        answerMs: median(answers),
        parseMs: median(parses),
      });
    }
  } finally {
    await broker.close();
  }
  return rows;
}
