/*
 * The pieces every view shares. Preact writes every value as a text node (nothing here
 * sets HTML), so a value from the API — and through it from a remote server — is text.
 */
import { type ComponentChildren, createContext } from 'preact';
import { useContext, useState } from 'preact/hooks';
import { ApiError, describe, type Json } from './api.js';

/** Says a line in the page's live region (screen readers hear it). */
export type Say = (text: string, kind?: 'info' | 'error') => void;
export const SayContext = createContext<Say>(() => {});
export const useSay = () => useContext(SayContext);

/** A JSON value, collapsible, as text: the raw documents and answers of the debugger. */
export function JsonView(props: { label: string; value: unknown; open?: boolean }) {
  return (
    <details class="json" open={props.open}>
      <summary>{props.label}</summary>
      <pre>{JSON.stringify(props.value, null, 2)}</pre>
    </details>
  );
}

/** What each step of a trace implements, so a failure can be read against its source. */
const REFERENCES: Record<string, string> = {
  probe: 'RFC 9728 §5.1 (the 401 challenge names the metadata)',
  resource_metadata: 'RFC 9728 §3 (protected-resource metadata)',
  resource_match: 'RFC 9728 §3.3 (the metadata names this resource)',
  authorization_server_metadata: 'RFC 8414 §3, §3.3 (metadata, exact issuer)',
  requirements: 'MCP authorization; RFC 7636 §4.2 (PKCE S256)',
  legacy: 'MCP 2025-03-26 (docs/api.md §6 item 9)',
  discover: 'MCP 2026-07-28, server/discover',
  initialize: 'MCP lifecycle, initialization',
  initialized: 'MCP lifecycle, initialization',
  'tools/list': 'MCP server features, tools',
  close: 'MCP Streamable HTTP, session management',
  registration: 'RFC 7591 §3 (dynamic client registration)',
};

/** One step of a discovery or probe trace. */
export interface Step {
  step: string;
  url?: string | null;
  status?: number | null;
  ok?: boolean;
  note?: string;
  message?: string;
  document?: Json;
}

/** A discovery or probe trace as an ordered timeline; the documents found, collapsible. */
export function Timeline(props: { steps: Step[] }) {
  return (
    <ol class="timeline">
      {props.steps.map((step, index) => {
        const ok = step.ok === true;
        const reference = REFERENCES[step.step];
        return (
          <li key={index} class={ok ? 'ok' : 'failed'}>
            <strong>
              {ok ? '✓ ' : '✗ '}
              {step.step}
            </strong>
            {step.status === null || step.status === undefined ? '' : ` HTTP ${step.status}`}
            {typeof step.url === 'string' && <code>{step.url}</code>}
            <p>{step.note ?? step.message ?? ''}</p>
            {reference !== undefined && <small>See {reference}.</small>}
            {step.document !== undefined && (
              <JsonView label={`The document (${step.step})`} value={step.document} />
            )}
          </li>
        );
      })}
    </ol>
  );
}

/** An API failure where it happened: its words, and the failing steps when it names some. */
export function Failure(props: { error: unknown }) {
  const { error } = props;
  const steps =
    error instanceof ApiError && Array.isArray(error.details)
      ? (error.details as Step[]).filter((step) => typeof step.step === 'string')
      : [];
  const fields =
    error instanceof ApiError && Array.isArray(error.details)
      ? (error.details as { path?: string; message?: string }[]).filter(
          (detail) => typeof detail.path === 'string',
        )
      : [];
  return (
    <div class="failure" role="alert">
      <p class="error">{describe(error)}</p>
      {fields.length > 0 && (
        <ul>
          {fields.map((field) => (
            <li key={field.path}>
              <code>{field.path}</code>: {field.message}
            </li>
          ))}
        </ul>
      )}
      {steps.length > 0 && <Timeline steps={steps} />}
    </div>
  );
}

/** A value with a button that copies it (the gateway URL of a connection). */
export function Copyable(props: { label: string; value: string }) {
  const [copied, setCopied] = useState<'idle' | 'done' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setCopied('done');
    } catch {
      setCopied('failed');
    }
  };
  return (
    <div class="copyable">
      <span class="term">{props.label}</span>
      <code>{props.value}</code>
      <button type="button" class="small" onClick={copy}>
        {copied === 'done' ? 'Copied' : 'Copy'}
        <Hidden> {props.label}</Hidden>
      </button>
      {copied === 'failed' && <span class="error">The browser refused: select and copy it.</span>}
    </div>
  );
}

/** Words for assistive technology only: a button's object, where the eye sees the row. */
export function Hidden(props: { children: ComponentChildren }) {
  return <span class="visually-hidden">{props.children}</span>;
}

/** Terms and values, as a definition list. */
export function Facts(props: { rows: [string, ComponentChildren][]; label?: string }) {
  return (
    <dl aria-label={props.label}>
      {props.rows.map(([term, value]) => [
        <dt key={`t${term}`}>{term}</dt>,
        <dd key={`d${term}`}>{value}</dd>,
      ])}
    </dl>
  );
}

/** A labelled input: the label names what the API calls the field. */
export function Field(props: {
  id: string;
  label: string;
  value: string;
  onInput: (value: string) => void;
  type?: 'text' | 'url' | 'password' | 'number' | 'datetime-local';
  required?: boolean;
  placeholder?: string;
  hint?: string;
  autoComplete?: string;
}) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        // Preact types each input type apart; any of these takes the same attributes.
        type={(props.type ?? 'text') as 'text'}
        value={props.value}
        required={props.required}
        placeholder={props.placeholder}
        autoComplete={props.autoComplete ?? 'off'}
        aria-describedby={props.hint === undefined ? undefined : `${props.id}-hint`}
        onInput={(event) => props.onInput((event.currentTarget as HTMLInputElement).value)}
      />
      {props.hint !== undefined && (
        <small id={`${props.id}-hint`} class="hint">
          {props.hint}
        </small>
      )}
    </div>
  );
}

/** A labelled choice among options `[value, text]`. */
export function Choice(props: {
  id: string;
  label: string;
  value: string;
  options: [string, string][];
  onChange: (value: string) => void;
  disabled?: boolean;
}) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <select
        id={props.id}
        value={props.value}
        disabled={props.disabled}
        onChange={(event) => props.onChange((event.currentTarget as HTMLSelectElement).value)}
      >
        {props.options.map(([value, text]) => (
          <option key={value} value={value}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}

/** An instant of the API as the reader's local time, with the instant itself on hover. */
export function When(props: { at: string | null | undefined; never?: string }) {
  if (props.at === null || props.at === undefined) return <span>{props.never ?? 'never'}</span>;
  const date = new Date(props.at);
  return (
    <time dateTime={props.at} title={props.at}>
      {Number.isNaN(date.getTime()) ? props.at : date.toLocaleString()}
    </time>
  );
}

/** Space-separated words from an input, none empty. */
export const words = (text: string) => text.split(/\s+/).filter(Boolean);

/** A status as a small badge, its word always written (never colour alone). */
export function Badge(props: { value: string }) {
  return <span class={`badge badge-${props.value.replace(/[^a-z_]/g, '')}`}>{props.value}</span>;
}
