import { describe, expect, it } from 'vitest';
import { openConnect } from '../src/index.js';

/*
 * openConnect against a window made here: which messages it takes (the page's origin and
 * window only), what it resolves with, and when it closes the popup. The real browser runs
 * it against `keyway serve` in packages/cli/test/connect-browser.test.ts.
 */

const URL_OF_PAGE = 'https://keyway.example.test/connect#kcs_0123456789abcdef.secret';

class FakePopup {
  closed = false;
  close() {
    this.closed = true;
  }
}

function fakeWindow(blocked = false) {
  const target = new EventTarget();
  const popup = new FakePopup();
  const opened: { url: string; name: string; features: string }[] = [];
  const timers = new Set<() => void>();
  const host = {
    screenX: 0,
    screenY: 0,
    outerWidth: 1280,
    outerHeight: 900,
    open: (url: string, name: string, features: string) => {
      opened.push({ url, name, features });
      return blocked ? null : popup;
    },
    addEventListener: target.addEventListener.bind(target),
    removeEventListener: target.removeEventListener.bind(target),
    setInterval: (tick: () => void) => {
      timers.add(tick);
      return tick;
    },
    clearInterval: (tick: () => void) => timers.delete(tick),
  };
  const post = (data: unknown, origin = 'https://keyway.example.test', source: unknown = popup) =>
    // Node's MessageEvent takes only a MessagePort as its source: a plain event, as a browser
    // hands a window's message to its listeners.
    target.dispatchEvent(Object.assign(new Event('message'), { data, origin, source }));
  const tick = () => {
    for (const run of timers) run();
  };
  return { host: host as unknown as Window, popup, opened, post, tick, timers };
}

describe('openConnect', () => {
  it('opens the page in a centred popup and resolves with the page’s outcome, closing it', async () => {
    const fake = fakeWindow();
    const result = openConnect({ url: URL_OF_PAGE, window: fake.host });
    expect(fake.opened).toEqual([
      {
        url: URL_OF_PAGE,
        name: 'keyway-connect',
        features: 'popup,width=480,height=720,left=400,top=90',
      },
    ]);
    // Another origin, another window, or another message: ignored.
    fake.post({ type: 'keyway-connect', outcome: 'connected' }, 'https://evil.example.test');
    fake.post({ type: 'keyway-connect', outcome: 'connected' }, undefined, {});
    fake.post({ type: 'other', outcome: 'connected' });
    fake.post({
      type: 'keyway-connect',
      outcome: 'connected',
      provider_id: 'acme/linear',
      connection_id: 'acme/users/bob/linear',
      error: null,
    });
    expect(await result).toEqual({
      outcome: 'connected',
      provider_id: 'acme/linear',
      connection_id: 'acme/users/bob/linear',
    });
    expect(fake.popup.closed).toBe(true);
    expect(fake.timers.size).toBe(0);
  });

  it('resolves declined and error with the page’s error code', async () => {
    const fake = fakeWindow();
    const declined = openConnect({ url: URL_OF_PAGE, window: fake.host });
    fake.post({
      type: 'keyway-connect',
      outcome: 'declined',
      provider_id: 'acme/linear',
      connection_id: 'acme/users/bob/linear',
      error: 'access_denied',
    });
    expect(await declined).toEqual({
      outcome: 'declined',
      provider_id: 'acme/linear',
      connection_id: 'acme/users/bob/linear',
      error: 'access_denied',
    });
    const other = fakeWindow();
    const failed = openConnect({ url: URL_OF_PAGE, window: other.host });
    other.post({
      type: 'keyway-connect',
      outcome: 'error',
      provider_id: 'acme/linear',
      connection_id: null,
      error: 'server_error',
    });
    expect(await failed).toEqual({
      outcome: 'error',
      provider_id: 'acme/linear',
      connection_id: null,
      error: 'server_error',
    });
  });

  it('goes on after a disconnect unless told not to, and resolves closed when the user closes it', async () => {
    const fake = fakeWindow();
    const result = openConnect({ url: URL_OF_PAGE, window: fake.host });
    const disconnected = {
      type: 'keyway-connect',
      outcome: 'disconnected',
      provider_id: 'acme/linear',
      connection_id: 'acme/users/bob/linear',
      error: null,
    };
    fake.post(disconnected);
    fake.tick();
    fake.popup.closed = true;
    fake.tick();
    expect(await result).toEqual({ outcome: 'closed' });

    const once = fakeWindow();
    const stopping = openConnect({
      url: URL_OF_PAGE,
      window: once.host,
      continueAfterDisconnect: false,
    });
    once.post(disconnected);
    expect(await stopping).toEqual({
      outcome: 'disconnected',
      provider_id: 'acme/linear',
      connection_id: 'acme/users/bob/linear',
    });
  });

  it('closes the popup when its signal aborts', async () => {
    const fake = fakeWindow();
    const controller = new AbortController();
    const result = openConnect({ url: URL_OF_PAGE, window: fake.host, signal: controller.signal });
    controller.abort();
    expect(await result).toEqual({ outcome: 'closed' });
    expect(fake.popup.closed).toBe(true);
  });

  it('refuses a URL that is no session URL, and says when the popup was blocked', () => {
    for (const url of [
      'not a url',
      'javascript:alert(1)#x',
      'https://keyway.example.test/connect',
    ]) {
      expect(() => openConnect({ url, window: fakeWindow().host })).toThrow(TypeError);
    }
    expect(() => openConnect({ url: URL_OF_PAGE, window: fakeWindow(true).host })).toThrow(
      'openConnect: the browser blocked the connect window; call openConnect from a click',
    );
  });
});
