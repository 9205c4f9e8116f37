/**
 * Text for a terminal: the CLI prints values a remote party chose (a client id a server
 * registered, a scope, an error description), and a terminal obeys the control characters
 * in what it prints (`ESC ]0;…` retitles the window, other sequences move the cursor, hide
 * text or, in some terminals, write files). Every C0 and C1 control character, and DEL, is
 * shown as `\xNN` instead; `--json` output is JSON, which escapes them itself.
 */

// C0 (U+0000–U+001F), DEL (U+007F), C1 (U+0080–U+009F); and the same without the line feed.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

const escaped = (character: string): string =>
  `\\x${character.charCodeAt(0).toString(16).padStart(2, '0')}`;

/** One value in a line or a table cell: every control character escaped, line feeds too. */
export function clean(value: unknown): string {
  return String(value).replace(CONTROL, escaped);
}

/** Whole output: every control character escaped but the line feeds that separate lines. */
export function printable(text: string): string {
  return text.replace(CONTROL_BUT_NEWLINE, escaped);
}
