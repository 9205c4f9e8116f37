/** The package ships no types: it exports one function from text to metric families. */
declare module 'parse-prometheus-text-format' {
  export default function parse(text: string): unknown[];
}
