import { guardErrorResponse } from '@keyway/http';
import { guardNotes } from '../../../lib/keyway';

export const dynamic = 'force-dynamic';

const notes = new Map<string, string>([
  ['notes/alice/todo', 'buy milk'],
  ['notes/bob/todo', 'call alice'],
]);

export async function GET(request: Request): Promise<Response> {
  try {
    await guardNotes(request);
  } catch (error) {
    return guardErrorResponse(error, request);
  }
  const path = decodeURIComponent(new URL(request.url).pathname.slice(1));
  const note = notes.get(path);
  return note === undefined
    ? Response.json({ error: 'not_found' }, { status: 404 })
    : Response.json({ path, note });
}
