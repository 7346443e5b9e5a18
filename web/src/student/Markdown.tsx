// The agent's answers as Markdown, rendered to React elements (never HTML: nothing the model
// writes can inject markup). The common subset models write: fenced code (an unclosed fence
// while streaming is code to the end), headings, lists, quotes, tables, rules, paragraphs
// with their line breaks, and inline code, bold, italics, strikethrough and http(s) links.
import { Fragment, memo, type ReactNode } from "react";
import { CopyButton } from "../components/common";

type Block =
  | { type: "code"; lang: string; text: string }
  | { type: "heading"; level: number; text: string }
  | { type: "list"; ordered: boolean; start: number; items: string[] }
  | { type: "quote"; text: string }
  | { type: "table"; head: string[]; rows: string[][] }
  | { type: "rule" }
  | { type: "paragraph"; text: string };

const FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+#.-]*)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*(\d{1,9})[.)]\s+(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const TABLE_RULE = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split("|")
    .map((cell) => cell.trim());
}

export function parseBlocks(source: string): Block[] {
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  const blocks: Block[] = [];
  let i = 0;
  const at = (n: number) => lines[n] ?? "";
  while (i < lines.length) {
    const line = at(i);
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1] ?? "```";
      const body: string[] = [];
      i += 1;
      while (i < lines.length && !at(i).trimStart().startsWith(marker)) body.push(at(i++));
      i += 1; // the closing fence (or past the end while streaming)
      blocks.push({ type: "code", lang: fence[2] ?? "", text: body.join("\n") });
      continue;
    }
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      blocks.push({ type: "heading", level: heading[1]?.length ?? 1, text: heading[2] ?? "" });
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      blocks.push({ type: "rule" });
      i += 1;
      continue;
    }
    if (line.includes("|") && TABLE_RULE.test(at(i + 1))) {
      const head = cells(line);
      const rows: string[][] = [];
      i += 2;
      while (i < lines.length && at(i).includes("|") && at(i).trim()) rows.push(cells(at(i++)));
      blocks.push({ type: "table", head, rows });
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && /^\s{0,3}>/.test(at(i))) {
        body.push(at(i++).replace(/^\s{0,3}>\s?/, ""));
      }
      blocks.push({ type: "quote", text: body.join("\n") });
      continue;
    }
    const bullet = BULLET.exec(line);
    const numbered = NUMBERED.exec(line);
    if (bullet || numbered) {
      const ordered = !bullet;
      const pattern = ordered ? NUMBERED : BULLET;
      const items: string[] = [];
      while (i < lines.length) {
        const match = pattern.exec(at(i));
        if (match) {
          items.push((ordered ? match[2] : match[1]) ?? "");
        } else if (at(i).trim() && /^\s+/.test(at(i)) && items.length) {
          items[items.length - 1] += `\n${at(i).trim()}`; // a continuation line
        } else {
          break;
        }
        i += 1;
      }
      blocks.push({ type: "list", ordered, start: Number(numbered?.[1] ?? 1), items });
      continue;
    }
    const body: string[] = [];
    while (i < lines.length && at(i).trim()) {
      const next = at(i);
      if (body.length && (FENCE.test(next) || HEADING.test(next) || /^\s{0,3}>/.test(next))) break;
      if (body.length && (BULLET.test(next) || NUMBERED.test(next)) && !/^\s/.test(next)) break;
      body.push(next);
      i += 1;
    }
    blocks.push({ type: "paragraph", text: body.join("\n") });
  }
  return blocks;
}

const INLINE =
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]+?)\*\*|~~(?=\S)([\s\S]+?)~~|\*(?=[^\s*])([^*]+?)\*|\[([^\]\n]+)\]\(((?:https?:\/\/|mailto:)[^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

export function renderInline(text: string, key = "i"): ReactNode[] {
  const out: ReactNode[] = [];
  let last = 0;
  let n = 0;
  const plain = (value: string) => {
    const lines = value.split("\n");
    lines.forEach((line, index) => {
      if (index > 0) out.push(<br key={`${key}b${n++}`} />);
      if (line) out.push(line);
    });
  };
  for (const match of text.matchAll(INLINE)) {
    const start = match.index ?? 0;
    plain(text.slice(last, start));
    last = start + match[0].length;
    const k = `${key}.${n++}`;
    if (match[2] !== undefined) out.push(<code key={k}>{match[2]}</code>);
    else if (match[3] !== undefined) out.push(<strong key={k}>{renderInline(match[3], k)}</strong>);
    else if (match[4] !== undefined) out.push(<del key={k}>{renderInline(match[4], k)}</del>);
    else if (match[5] !== undefined) out.push(<em key={k}>{renderInline(match[5], k)}</em>);
    else if (match[6] !== undefined && match[7] !== undefined) {
      out.push(
        <a key={k} href={match[7]} target="_blank" rel="noopener noreferrer">
          {renderInline(match[6], k)}
        </a>,
      );
    } else if (match[8] !== undefined) {
      out.push(
        <a key={k} href={match[8]} target="_blank" rel="noopener noreferrer">
          {match[8]}
        </a>,
      );
    }
  }
  plain(text.slice(last));
  return out;
}

function CodeBlock({ lang, text }: { lang: string; text: string }) {
  return (
    <div className="code-block">
      <div className="code-head">
        <span className="mono">{lang}</span>
        <CopyButton text={text} />
      </div>
      <pre>
        <code>{text}</code>
      </pre>
    </div>
  );
}

function renderBlock(block: Block, key: number, top: number): ReactNode {
  switch (block.type) {
    case "code":
      return <CodeBlock key={key} lang={block.lang} text={block.text} />;
    case "heading": {
      // answers sit under the page's h1 and the transcript's h2: their top heading is an h3
      const Tag = `h${Math.min(6, 3 + block.level - top)}` as "h3";
      return <Tag key={key}>{renderInline(block.text)}</Tag>;
    }
    case "list": {
      const items = block.items.map((item, i) => <li key={i}>{renderInline(item, `l${i}`)}</li>);
      return block.ordered ? (
        <ol key={key} start={block.start === 1 ? undefined : block.start}>
          {items}
        </ol>
      ) : (
        <ul key={key}>{items}</ul>
      );
    }
    case "quote":
      return (
        <blockquote key={key}>
          <MarkdownBody text={block.text} />
        </blockquote>
      );
    case "table":
      return (
        <div key={key} className="table-scroll">
          <table>
            <thead>
              <tr>
                {block.head.map((cell, i) => (
                  <th key={i} scope="col">
                    {renderInline(cell, `h${i}`)}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {block.rows.map((row, r) => (
                <tr key={r}>
                  {row.map((cell, i) => (
                    <td key={i}>{renderInline(cell, `c${r}.${i}`)}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      );
    case "rule":
      return <hr key={key} />;
    case "paragraph":
      return <p key={key}>{renderInline(block.text)}</p>;
  }
}

function MarkdownBody({ text }: { text: string }) {
  const blocks = parseBlocks(text);
  const levels = blocks.flatMap((block) => (block.type === "heading" ? [block.level] : []));
  const top = levels.length ? Math.min(...levels) : 1;
  return <Fragment>{blocks.map((block, i) => renderBlock(block, i, top))}</Fragment>;
}

export const Markdown = memo(function Markdown({ text }: { text: string }) {
  return (
    <div className="markdown">
      <MarkdownBody text={text} />
    </div>
  );
});
