// The types of layers.js for the tests that read its zone table (the rules themselves are plain JS, loaded by eslint.config.js).
import type { ESLint } from "eslint";

export interface Zone {
  name: string;
  /** Folders (or single files) of the repo, without a trailing slash. */
  files: readonly string[];
  /** What the zone's files may not import, in the same form. */
  forbidden: readonly string[];
  /** Where code that needs a forbidden import belongs: the message's second half. */
  belongs: string;
}

export const DOMAIN: readonly string[];
export const ZONES: readonly Zone[];
declare const plugin: ESLint.Plugin;
export default plugin;
