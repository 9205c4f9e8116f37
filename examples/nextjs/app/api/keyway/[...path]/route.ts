import { keyway } from '../../../../lib/keyway';

export const dynamic = 'force-dynamic';
export const GET = keyway;
export const POST = keyway;
export const PUT = keyway;
export const PATCH = keyway;
export const DELETE = keyway;
