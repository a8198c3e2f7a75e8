/**
 * Reads a Markdown page the way a reader (and GitHub) does: its relative links, its heading
 * anchors, and its fenced code blocks with their language.
 */
import { readFileSync } from 'node:fs';

export interface CodeBlock {
  readonly lang: string;
  readonly text: string;
}

export interface MarkdownPage {
  readonly links: readonly string[];
  readonly anchors: ReadonlySet<string>;
  readonly blocks: readonly CodeBlock[];
}

/** GitHub's heading slug: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N} -]/gu, '')
    .replace(/ /g, '-');
}

export function readMarkdown(file: string): MarkdownPage {
  const text = readFileSync(file, 'utf8');
  const blocks: CodeBlock[] = [];
  const prose: string[] = [];
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let block: { lang: string; lines: string[] } | undefined;
  for (const line of text.split('\n')) {
    const fence = /^```(\S*)/.exec(line);
    if (fence) {
      if (block) {
        blocks.push({ lang: block.lang, text: block.lines.join('\n') });
        block = undefined;
      } else block = { lang: fence[1] ?? '', lines: [] };
      continue;
    }
    if (block) {
      block.lines.push(line);
      continue;
    }
    prose.push(line);
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) {
      const base = slug(heading[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
  }
  const links = [...prose.join('\n').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
  return { links, anchors, blocks };
}
