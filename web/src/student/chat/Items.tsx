// The transcript's entries: message bubbles, the agent's turns (text, tool cards, notices),
// the lanes runtime's answers, operations and notices. Each is memoised: while the agent
// streams, only the turn that grows renders again.
import { memo, type ReactNode, useState } from "react";
import { useTranslation } from "react-i18next";
import { formatDuration, formatTime, formatTokens, formatUsd } from "../../format";
import { Markdown } from "../Markdown";
import type {
  AnswerItem,
  MessageItem,
  NoticeItem,
  OperationItem,
  Refusal,
  ToolCard,
  TurnItem,
  TurnPart,
} from "../transcript";

const SHOWN_CHARS = 4000;

/** A long text cut to its start, with a button that shows the rest. */
function LongText({ text }: { text: string }) {
  const { t } = useTranslation("student");
  const [all, setAll] = useState(false);
  const cut = !all && text.length > SHOWN_CHARS;
  return (
    <>
      <pre>{cut ? `${text.slice(0, SHOWN_CHARS)}…` : text}</pre>
      {cut && (
        <button type="button" className="link-button" onClick={() => setAll(true)}>
          {t("tool.showAll", { count: text.length })}
        </button>
      )}
    </>
  );
}

/** Tool arguments as indented JSON when they are JSON. */
function prettyArguments(text: string): string {
  try {
    const value: unknown = JSON.parse(text);
    return JSON.stringify(value, null, 2);
  } catch {
    return text;
  }
}

/** A one-line preview of a call's arguments: the first value, short. */
function argumentsPreview(text: string): string {
  let preview = text;
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const first = Object.values(value as Record<string, unknown>)[0];
      preview = typeof first === "string" ? first : JSON.stringify(first ?? "");
    }
  } catch {
    // not JSON: the text itself
  }
  preview = preview.replace(/\s+/g, " ").trim();
  return preview.length > 80 ? `${preview.slice(0, 80)}…` : preview;
}

/** A message's time: the clock time today, else the date and time (it does not go stale the
 * way "3 minutes ago" would in a transcript that stays open). */
function Time({ ts }: { ts: number }) {
  const { i18n } = useTranslation();
  const date = new Date(ts * 1000);
  const today = date.toDateString() === new Date().toDateString();
  const locale = i18n.language?.startsWith("zh") ? "zh-CN" : "en";
  const text = new Intl.DateTimeFormat(
    locale,
    today ? { timeStyle: "short" } : { dateStyle: "medium", timeStyle: "short" },
  ).format(date);
  return (
    <time className="muted" dateTime={date.toISOString()} title={formatTime(ts)}>
      {text}
    </time>
  );
}

export function RefusalBox({ refusal, live = false }: { refusal: Refusal; live?: boolean }) {
  const { t } = useTranslation("student");
  const known = ["budget_exceeded", "rate_limited", "service_unavailable"];
  const title = t(`refusal.${known.includes(refusal.kind) ? refusal.kind : "other"}`);
  return (
    <div className="refusal" role={live ? "alert" : undefined}>
      <strong>{title}</strong>
      {refusal.message && <p>{refusal.message}</p>}
      {refusal.resetsAt !== null && (
        <p className="muted">{t("refusal.resets", { time: formatTime(refusal.resetsAt) })}</p>
      )}
      {refusal.retryAfter !== null && (
        <p className="muted">
          {t("refusal.retry", { seconds: Math.max(1, Math.ceil(refusal.retryAfter)) })}
        </p>
      )}
    </div>
  );
}

export const ToolCardView = memo(function ToolCardView({ card }: { card: ToolCard }) {
  const { t } = useTranslation("student");
  const preview = argumentsPreview(card.arguments);
  return (
    <details className={`tool-card ${card.status}`}>
      <summary>
        <span className="tool-icon" aria-hidden="true">
          {card.status === "running" ? "◌" : card.status === "error" ? "✕" : "✓"}
        </span>
        <span className="tool-name mono">{card.name}</span>
        {preview && <span className="tool-preview mono">{preview}</span>}
        <span className="tool-meta">
          {card.status === "running" ? (
            <span className="badge busy">{t("tool.running")}</span>
          ) : card.status === "error" ? (
            <span className="badge bad">{t("tool.failed")}</span>
          ) : (
            <span className="visually-hidden">{t("tool.succeeded")}</span>
          )}
          {card.duration !== null && (
            <span className="muted">{formatDuration(card.duration)}</span>
          )}
        </span>
      </summary>
      {card.progress && card.status === "running" && (
        <p className="tool-progress muted">{card.progress}</p>
      )}
      <div className="tool-body">
        {card.arguments && (
          <>
            <div className="tool-label">{t("tool.arguments")}</div>
            <LongText text={prettyArguments(card.arguments)} />
          </>
        )}
        {card.error && (
          <>
            <div className="tool-label">{t("tool.error")}</div>
            <pre className="tool-error">{card.error}</pre>
          </>
        )}
        {card.status !== "running" && (
          <>
            <div className="tool-label">{t("tool.result")}</div>
            {card.result ? <LongText text={card.result} /> : <p className="muted">{t("tool.noResult")}</p>}
          </>
        )}
      </div>
    </details>
  );
});

function Part({ part }: { part: TurnPart }) {
  const { t } = useTranslation("student");
  switch (part.type) {
    case "text":
      return <Markdown text={part.text} />;
    case "reasoning":
      return (
        <details className="reasoning">
          <summary>{t("turn.reasoning")}</summary>
          <p>{part.text}</p>
        </details>
      );
    case "tool":
      return <ToolCardView card={part} />;
    case "compacted":
      return (
        <p className="turn-note">
          {t(part.trigger === "overflow" ? "turn.compactedOverflow" : "turn.compacted", {
            before: formatTokens(part.before),
            after: formatTokens(part.after),
          })}
          {part.summaryError && ` ${t("turn.summaryFailed", { error: part.summaryError })}`}
        </p>
      );
    case "sent_back":
      return (
        <p className="turn-note" title={part.message}>
          {t("turn.sentBack", { source: part.source })}
        </p>
      );
    case "refused":
      return <RefusalBox refusal={part.refusal} />;
    case "failed":
      return (
        <div className="error-box">
          <strong>{t("turn.failed")}: </strong>
          {part.message || part.error}
        </div>
      );
  }
}

function Avatar({ who }: { who: "agent" | "teacher" | "student" }) {
  const letters = { agent: "A", teacher: "T", student: "" };
  return (
    <span className={`avatar ${who}`} aria-hidden="true">
      {letters[who]}
    </span>
  );
}

export function Typing() {
  return (
    <span className="typing" aria-hidden="true">
      <span />
      <span />
      <span />
    </span>
  );
}

interface MessageProps {
  item: MessageItem;
  /** Continue an interrupted message (only its owner can). */
  onContinue?: (seq: number) => void;
  continuing?: boolean;
}

export const MessageBubble = memo(function MessageBubble({
  item,
  onContinue,
  continuing,
}: MessageProps) {
  const { t } = useTranslation("student");
  const teacher = item.role === "teacher";
  return (
    <article
      className={`msg ${teacher ? "from-teacher" : "from-student"} state-${item.state}`}
      aria-label={teacher ? t("chat.teacherSaid") : t("chat.youSaid")}
    >
      {teacher && <Avatar who="teacher" />}
      <div className="msg-col">
        <div className="bubble">
          {teacher && <div className="msg-who">{t("chat.teacher")}</div>}
          <div className="msg-text">{item.text}</div>
        </div>
        <div className="msg-meta">
          {item.state !== "done" && (
            <span className={`badge ${stateBadge(item.state)}`}>{t(`state.${item.state}`)}</span>
          )}
          {item.continued > 0 && (
            <span className="muted">{t("chat.continued", { count: item.continued })}</span>
          )}
          {item.error && item.state === "failed" && (
            <span className="muted mono">{item.error}</span>
          )}
          <Time ts={item.ts} />
        </div>
        {item.state === "interrupted" && (
          <div className="msg-interrupted">
            {item.reason && <span className="muted">{item.reason}</span>}
            {onContinue && (
              <button
                type="button"
                className="secondary small"
                disabled={continuing}
                onClick={() => onContinue(item.seq)}
              >
                {t("chat.continue")}
              </button>
            )}
          </div>
        )}
      </div>
    </article>
  );
});

function stateBadge(state: string): string {
  if (state === "running" || state === "pending") return "busy";
  if (state === "failed") return "bad";
  if (state === "interrupted") return "warn";
  return "ok";
}

function AgentBlock({
  children,
  label,
  footer,
  className = "",
}: {
  children: ReactNode;
  label: string;
  footer?: ReactNode;
  className?: string;
}) {
  return (
    <article className={`msg from-agent ${className}`} aria-label={label}>
      <Avatar who="agent" />
      <div className="msg-col">
        <div className="agent-body">{children}</div>
        {footer && <div className="msg-meta">{footer}</div>}
      </div>
    </article>
  );
}

export const TurnView = memo(function TurnView({ item }: { item: TurnItem }) {
  const { t } = useTranslation("student");
  const running = item.state === "running";
  const last = item.parts[item.parts.length - 1];
  const footer: ReactNode[] = [];
  if (item.state === "interrupted") {
    footer.push(
      <span key="s" className="badge warn" title={item.reason ?? undefined}>
        {t("turn.stopped")}
      </span>,
    );
  }
  if (item.duration !== null) footer.push(<span key="d">{formatDuration(item.duration)}</span>);
  if (item.usage) {
    footer.push(
      <span key="u">
        {t("turn.tokens", {
          input: formatTokens(item.usage.inputTokens),
          output: formatTokens(item.usage.outputTokens),
        })}
      </span>,
    );
    if (item.usage.cost) footer.push(<span key="c">{formatUsd(item.usage.cost)}</span>);
  }
  if (item.model && !running) footer.push(<span key="m" className="mono">{item.model}</span>);
  return (
    <AgentBlock
      label={t("chat.agentSaid")}
      className={running ? "running" : ""}
      footer={footer.length ? footer : undefined}
    >
      {item.parts.map((part, i) => (
        <Part key={i} part={part} />
      ))}
      {running && (!last || last.type !== "text") && <Typing />}
    </AgentBlock>
  );
});

export const AnswerView = memo(function AnswerView({
  item,
  intent,
}: {
  item: AnswerItem;
  intent?: string;
}) {
  const { t } = useTranslation("student");
  return (
    <AgentBlock
      label={t("chat.agentSaid")}
      footer={
        item.lane ? (
          <span className="lane-tag" title={intent}>
            {t("lanes.lane", { id: item.lane })}
            {intent ? ` · ${intent}` : ""}
          </span>
        ) : undefined
      }
    >
      <Markdown text={item.text} />
    </AgentBlock>
  );
});

export const OperationView = memo(function OperationView({
  item,
  onStop,
  stopping,
}: {
  item: OperationItem;
  onStop?: (op: string) => void;
  stopping?: boolean;
}) {
  const { t } = useTranslation("student");
  const running = item.status === "running";
  const ok = item.status === "completed" && (item.exitCode ?? 0) === 0;
  return (
    <div className="op-row">
      <details className={`tool-card op ${running || item.status === "cancelling" ? "running" : ok ? "success" : "error"}`}>
        <summary>
          <span className="tool-icon" aria-hidden="true">
            {running ? "◌" : ok ? "✓" : "✕"}
          </span>
          <span className="tool-name mono">{item.op}</span>
          <span className="tool-preview mono">$ {item.command}</span>
          <span className="tool-meta">
            <span className={`badge ${running ? "busy" : ok ? "ok" : "bad"}`}>
              {t(`op.status.${item.status}`, { defaultValue: item.status })}
            </span>
            {item.exitCode !== null && (
              <span className="muted">{t("op.exit", { code: item.exitCode })}</span>
            )}
            <span className="muted">{t("lanes.lane", { id: item.lane })}</span>
          </span>
        </summary>
        <div className="tool-body">
          <div className="tool-label">{t("op.command")}</div>
          <pre>{item.command}</pre>
          {item.cancelReason && <p className="muted">{t("op.cancelled", { reason: item.cancelReason })}</p>}
          {item.output !== null && (
            <>
              <div className="tool-label">{t("op.output")}</div>
              {item.output ? <LongText text={item.output} /> : <p className="muted">{t("tool.noResult")}</p>}
            </>
          )}
        </div>
      </details>
      {running && onStop && (
        <button
          type="button"
          className="danger small"
          disabled={stopping}
          aria-label={t("op.stopName", { op: item.op })}
          onClick={() => onStop(item.op)}
        >
          {t("op.stop")}
        </button>
      )}
    </div>
  );
});

export const NoticeView = memo(function NoticeView({ item }: { item: NoticeItem }) {
  const { t } = useTranslation("student");
  const text =
    item.code === "lane_ended"
      ? t("lanes.ended", { id: item.lane, reason: item.message })
      : item.code === "lane_failed"
        ? t("lanes.failed", { id: item.lane, message: item.message })
        : t("lanes.runFailed", { message: item.message });
  return (
    <p className={item.code === "lane_ended" ? "turn-note" : "error-box"}>{text}</p>
  );
});
