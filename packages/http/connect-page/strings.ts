/*
 * Every string the connect page shows, in one table (docs/api.md §19): an operator who
 * translates or rewords the page changes this file only. `{app}`, `{provider}`, `{account}`,
 * `{host}` and `{error}` are filled in where they appear.
 */
export const STRINGS = {
  title: 'Connect your accounts',
  subtitle: 'to {app}',
  defaultApp: 'the application',
  greeting: 'Signed in to {app} as {user}.',
  loading: 'Loading…',
  logoAlt: '{app}',
  providersLabel: 'Accounts you can connect',
  signsInAt: 'You sign in at {host}',
  statusNone: 'Not connected',
  statusActive: 'Connected',
  statusActiveAs: 'Connected as {account}',
  statusPending: 'Waiting for you to finish signing in',
  statusError: 'Needs attention: {error}',
  connect: 'Connect',
  connectNamed: 'Connect {provider}',
  reconnect: 'Reconnect',
  reconnectNamed: 'Reconnect {provider}',
  disconnect: 'Disconnect',
  disconnectNamed: 'Disconnect {provider}',
  confirmDisconnect: 'Yes, disconnect {provider}',
  cancel: 'Cancel',
  waiting:
    'Finish signing in to {provider} in the window that opened. This page updates when you are done.',
  popupBlocked: 'Your browser blocked the sign-in window: continuing in this tab.',
  connected: '{provider} is connected.',
  disconnected: '{provider} is disconnected.',
  declined: 'You declined the connection to {provider}. Nothing was connected.',
  failed: '{provider} could not be connected: {error}',
  retry: 'Try again',
  expired: 'This connect link has expired or was ended. Ask {app} for a new one.',
  unreachable: 'The connection service could not be reached. Check your network and try again.',
  continueTo: 'Continue to {app}',
  backTo: 'Back to {app}',
  noProviders: 'There is nothing to connect here.',
} as const;

export type StringKey = keyof typeof STRINGS;

/** A string of the table with its placeholders filled in. */
export function say(key: StringKey, values: Record<string, string> = {}): string {
  return STRINGS[key].replace(/\{(\w+)\}/g, (whole, name: string) => values[name] ?? whole);
}
