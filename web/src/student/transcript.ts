// A session's event log folded into what the chat shows: the messages with their states, the
// agent's turns (streamed text, tool cards, notices), the lanes runtime's answers and
// operations, and the latest plan (todos), lanes snapshot and budget. Pure: no React, no I/O,
// so every rule is unit-tested (transcript.test.ts).
//
// The log (see the service's EventOut): `message` events are instructions (their state also
// changes through `status` events: run_started, run_ended, run_interrupted, continued,
// resumed); `run` events are the framework's run events of the serial and batch runtimes
// (`data.kind`: text_delta, tool_call_started, ...), which carry no message seq: they belong
// to the messages whose run started last; `lane` events are the lanes runtime's steps.
//
// A turn is created at its first run event (not at `run_started`, which the lanes runtime
// sends too), so it sits in the transcript where the agent began answering and grows there;
// a message sent meanwhile appears below it.
import type { SessionEvent } from "../api/events";

export type MessageState = "pending" | "running" | "done" | "failed" | "interrupted";
export type TurnState = "running" | "done" | "failed" | "interrupted";

/** A refusal of the service: a budget spent, a rate limit, a model unavailable. */
export interface Refusal {
  kind: string;
  message: string;
  /** When the budget resets (Unix seconds), if the service said. */
  resetsAt: number | null;
  /** Seconds to wait before trying again, if the service said. */
  retryAfter: number | null;
}

export interface ToolCard {
  type: "tool";
  id: string;
  name: string;
  arguments: string;
  status: "running" | "success" | "error";
  result: string | null;
  error: string | null;
  /** Seconds the call took (when it completed). */
  duration: number | null;
  /** The last update the running tool reported (a subagent's step, a line of progress). */
  progress: string | null;
}

export type TurnPart =
  | { type: "text"; text: string }
  | { type: "reasoning"; text: string }
  | ToolCard
  | {
      type: "compacted";
      trigger: string;
      before: number;
      after: number;
      trimmed: number;
      summarized: number;
      summaryError: string | null;
    }
  | { type: "sent_back"; source: string; message: string }
  | { type: "refused"; refusal: Refusal }
  | { type: "failed"; error: string; message: string };

export interface MessageItem {
  type: "message";
  key: string;
  seq: number;
  ts: number;
  text: string;
  role: "student" | "teacher";
  state: MessageState;
  /** How often it was continued or resumed after a stop. */
  continued: number;
  /** The continued and resumed events seen (the stored message counts them too: on a
   * replay it already holds the final count, live it holds the count when it was sent). */
  continuations: number;
  /** Why it was interrupted (or resumed). */
  reason: string | null;
  /** The error it failed with (a kind such as budget_exceeded, or an exception's name). */
  error: string | null;
}

export interface RunUsage {
  inputTokens: number;
  outputTokens: number;
  cost: number | null;
}

export interface TurnItem {
  type: "turn";
  key: string;
  seq: number;
  ts: number;
  /** The messages this run answers (several in the batch runtime). */
  messageSeqs: number[];
  /** Those still running: the turn ends when the last one ends. */
  open: number[];
  parts: TurnPart[];
  state: TurnState;
  reason: string | null;
  usage: RunUsage | null;
  model: string | null;
  duration: number | null;
  /** Whether the current model call streamed text (else its reply's text is added whole). */
  streamed: boolean;
}

/** An answer of the lanes runtime: the router's direct answer to a message, or a lane's
 * summary when it ended. */
export interface AnswerItem {
  type: "answer";
  key: string;
  seq: number;
  ts: number;
  messageSeq: number | null;
  lane: string | null;
  text: string;
}

/** A command a lane started on one of the student's computers. */
export interface OperationItem {
  type: "operation";
  key: string;
  seq: number;
  ts: number;
  lane: string;
  op: string;
  command: string;
  /** running, cancelling, completed, failed, or what the executor said. */
  status: string;
  exitCode: number | null;
  output: string | null;
  cancelReason: string | null;
}

export interface NoticeItem {
  type: "notice";
  key: string;
  seq: number;
  ts: number;
  code: "lane_failed" | "lane_ended" | "run_failed";
  lane: string | null;
  messageSeq: number | null;
  message: string;
}

export type ChatItem = MessageItem | TurnItem | AnswerItem | OperationItem | NoticeItem;

export interface Todo {
  content: string;
  status: "pending" | "in_progress" | "completed";
}

export interface LaneOperation {
  id: string;
  what: string;
  executor: string;
  status: string;
  progress: string;
}

export interface Lane {
  id: string;
  intent: string;
  status: string;
  active: boolean;
  created: number | null;
  termination: string;
  operations: LaneOperation[];
}

export interface BudgetLeft {
  scope: string;
  period: string;
  remainingTokens: number | null;
  remainingCostUsd: number | null;
  resetsAt: number | null;
}

export interface Transcript {
  items: readonly ChatItem[];
  /** Each item's position in `items`, by key. */
  index: ReadonlyMap<string, number>;
  /** The turn receiving run events, if one is open. */
  openTurn: string | null;
  /** Messages whose run started and that no turn holds yet. */
  starting: readonly number[];
  /** The item of each operation id (ids can repeat after the runtime restarts: the latest). */
  operations: ReadonlyMap<string, string>;
  /** The latest plan the agent wrote (null: it has written none). */
  todos: readonly Todo[] | null;
  /** The latest lanes snapshot (null: not a lanes session, or no lane yet). */
  lanes: readonly Lane[] | null;
  /** What was left of the budgets after the latest run (null: none reported). */
  budget: readonly BudgetLeft[] | null;
  lastSeq: number;
  /** Tool calls and operations completed so far (the workspace's files may have changed). */
  completedCalls: number;
}

export function emptyTranscript(): Transcript {
  return {
    items: [],
    index: new Map(),
    openTurn: null,
    starting: [],
    operations: new Map(),
    todos: null,
    lanes: null,
    budget: null,
    lastSeq: 0,
    completedCalls: 0,
  };
}

// -- reading untyped event data ------------------------------------------------------------------

type Data = Record<string, unknown>;

function str(value: unknown, fallback = ""): string {
  return typeof value === "string" ? value : fallback;
}

function strOrNull(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : null;
}

function num(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function obj(value: unknown): Data | null {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Data)
    : null;
}

/** A time as Unix seconds: a number already, or an ISO text (a refusal's `resets_at`). */
export function toSeconds(value: unknown): number | null {
  if (typeof value === "number" && Number.isFinite(value)) return value;
  if (typeof value === "string" && value) {
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? null : ms / 1000;
  }
  return null;
}

const MESSAGE_STATES: readonly string[] = ["pending", "running", "done", "failed", "interrupted"];

function messageState(value: unknown, fallback: MessageState): MessageState {
  return typeof value === "string" && MESSAGE_STATES.includes(value)
    ? (value as MessageState)
    : fallback;
}

/** A refusal from the fields of a refused run event or of an error answer's body. */
export function refusalOf(kind: string, data: Data): Refusal {
  return {
    kind,
    message: str(data.message),
    resetsAt: toSeconds(data.resets_at),
    retryAfter: num(data.retry_after),
  };
}

const REFUSALS = new Set(["budget_exceeded", "rate_limited", "service_unavailable"]);

/** The run events a turn shows (others, such as tool_call_delta, are skipped). */
const TURN_KINDS = new Set([
  "run_started",
  "model_request_started",
  "text_delta",
  "reasoning_delta",
  "model_response_received",
  "answer_sent_back",
  "tool_call_started",
  "tool_progress",
  "tool_call_completed",
  "context_compacted",
  "run_failed",
  "run_completed",
]);

export function normalizeTodos(items: unknown): Todo[] {
  if (!Array.isArray(items)) return [];
  return items.flatMap((item): Todo[] => {
    if (typeof item === "string") return [{ content: item, status: "pending" }];
    const o = obj(item);
    if (!o) return [];
    const status = str(o.status);
    return [
      {
        content: str(o.content),
        status: status === "completed" || status === "in_progress" ? status : "pending",
      },
    ];
  });
}

export function normalizeLanes(lanes: unknown): Lane[] {
  if (!Array.isArray(lanes)) return [];
  return lanes.flatMap((lane): Lane[] => {
    const o = obj(lane);
    if (!o) return [];
    const operations = Array.isArray(o.operations) ? o.operations : [];
    return [
      {
        id: str(o.id),
        intent: str(o.intent),
        status: str(o.status),
        active: o.active === true,
        created: num(o.created),
        termination: str(o.termination),
        operations: operations.flatMap((op): LaneOperation[] => {
          const p = obj(op);
          if (!p) return [];
          return [
            {
              id: str(p.id),
              what: str(p.what),
              executor: str(p.executor),
              status: str(p.status),
              progress: str(p.progress),
            },
          ];
        }),
      },
    ];
  });
}

function normalizeBudget(budgets: unknown): BudgetLeft[] {
  if (!Array.isArray(budgets)) return [];
  return budgets.flatMap((budget): BudgetLeft[] => {
    const o = obj(budget);
    if (!o) return [];
    const micros = num(o.remaining_cost_micros);
    return [
      {
        scope: str(o.scope),
        period: str(o.period),
        remainingTokens: num(o.remaining_tokens),
        remainingCostUsd: micros === null ? null : micros / 1_000_000,
        resetsAt: toSeconds(o.resets_at),
      },
    ];
  });
}

/** A line for a running tool's progress update (a subagent's own run events come nested). */
function describeProgress(update: unknown): string | null {
  const o = obj(update);
  if (!o) return null;
  const kind = str(o.kind);
  if (!kind) return strOrNull(o.text);
  if (kind === "tool_call_started") return `→ ${str(o.name)}`;
  if (kind === "tool_call_completed") return `✓ ${str(o.name)}`;
  return null;
}

// -- the fold ----------------------------------------------------------------------------------

/** A batch's working copy: the item list and index are copied once, and an item is copied the
 * first time the batch changes it (later changes in the batch change the copy). */
class Draft {
  items: ChatItem[];
  index: Map<string, number>;
  operations: Map<string, string>;
  openTurn: string | null;
  starting: number[];
  todos: readonly Todo[] | null;
  lanes: readonly Lane[] | null;
  budget: readonly BudgetLeft[] | null;
  lastSeq: number;
  completedCalls: number;
  private copied = new Set<string>();

  constructor(t: Transcript) {
    this.items = t.items.slice();
    this.index = new Map(t.index);
    this.operations = new Map(t.operations);
    this.openTurn = t.openTurn;
    this.starting = t.starting.slice();
    this.todos = t.todos;
    this.lanes = t.lanes;
    this.budget = t.budget;
    this.lastSeq = t.lastSeq;
    this.completedCalls = t.completedCalls;
  }

  done(): Transcript {
    return {
      items: this.items,
      index: this.index,
      openTurn: this.openTurn,
      starting: this.starting,
      operations: this.operations,
      todos: this.todos,
      lanes: this.lanes,
      budget: this.budget,
      lastSeq: this.lastSeq,
      completedCalls: this.completedCalls,
    };
  }

  add(item: ChatItem): void {
    const at = this.index.get(item.key);
    if (at !== undefined) {
      this.items[at] = item; // the same key again (a replayed message): replaced in place
    } else {
      this.index.set(item.key, this.items.length);
      this.items.push(item);
    }
    this.copied.add(item.key);
  }

  /** The item to change in this batch (a copy of the stored one), or undefined. */
  edit<T extends ChatItem>(key: string | null | undefined, type: T["type"]): T | undefined {
    if (!key) return undefined;
    const at = this.index.get(key);
    if (at === undefined) return undefined;
    let item = this.items[at];
    if (!item || item.type !== type) return undefined;
    if (!this.copied.has(key)) {
      item = item.type === "turn" ? { ...item, parts: item.parts.slice() } : { ...item };
      this.items[at] = item;
      this.copied.add(key);
    }
    return item as T;
  }

  message(seq: unknown): MessageItem | undefined {
    return typeof seq === "number" ? this.edit<MessageItem>(`m${seq}`, "message") : undefined;
  }
}

function onMessage(d: Draft, event: SessionEvent): void {
  const data = event.data;
  const existing = d.message(event.seq);
  const continued = num(data.continued) ?? 0;
  d.add({
    type: "message",
    key: `m${event.seq}`,
    seq: event.seq,
    ts: event.ts,
    text: str(data.text),
    role: data.role === "teacher" ? "teacher" : "student",
    state: messageState(event.state, "pending"),
    continued: Math.max(continued, existing?.continuations ?? 0),
    continuations: existing?.continuations ?? 0,
    reason: existing?.reason ?? null,
    error: existing?.error ?? null,
  });
}

function onStatus(d: Draft, event: SessionEvent): void {
  const data = event.data;
  const what = str(data.event);
  const seq = num(data.message_seq);
  const message = d.message(seq);
  switch (what) {
    case "run_started":
      if (message) {
        message.state = "running";
        message.error = null;
      }
      if (seq !== null && !d.starting.includes(seq)) d.starting.push(seq);
      return;
    case "run_ended":
    case "run_interrupted": {
      const state = messageState(data.state, what === "run_interrupted" ? "interrupted" : "done");
      const reason = strOrNull(data.reason);
      if (message) {
        message.state = state;
        message.reason = reason;
        message.error = strOrNull(data.error);
      }
      if (seq !== null) endRun(d, seq, state, reason);
      return;
    }
    case "continued":
    case "resumed":
      if (message) {
        message.state = messageState(data.state, "pending");
        message.continuations += 1;
        message.continued = Math.max(message.continued, message.continuations);
        message.reason = what === "resumed" ? strOrNull(data.reason) : null;
      }
      return;
  }
}

/** Message `seq` stopped running: its turn ends once all its messages have. */
function endRun(d: Draft, seq: number, state: MessageState, reason: string | null): void {
  d.starting = d.starting.filter((s) => s !== seq);
  const turn = d.edit<TurnItem>(d.openTurn, "turn");
  if (!turn || !turn.open.includes(seq)) return;
  turn.open = turn.open.filter((s) => s !== seq);
  if (state === "failed" || state === "interrupted") {
    turn.state = state;
    turn.reason = reason;
  }
  if (turn.open.length === 0) {
    if (turn.state === "running") turn.state = "done";
    d.openTurn = null;
  }
}

function closeTurn(d: Draft): void {
  const turn = d.edit<TurnItem>(d.openTurn, "turn");
  if (turn && turn.state === "running") turn.state = "done";
  d.openTurn = null;
}

/** The open turn, opened at `event` for the messages that started if none is. */
function turnFor(d: Draft, event: SessionEvent): TurnItem {
  const open = d.edit<TurnItem>(d.openTurn, "turn");
  if (open) {
    if (d.starting.length) {
      open.messageSeqs = [...open.messageSeqs, ...d.starting];
      open.open = [...open.open, ...d.starting];
      d.starting = [];
    }
    return open;
  }
  const turn: TurnItem = {
    type: "turn",
    key: `t${event.seq}`,
    seq: event.seq,
    ts: event.ts,
    messageSeqs: d.starting.slice(),
    open: d.starting.slice(),
    parts: [],
    state: "running",
    reason: null,
    usage: null,
    model: null,
    duration: null,
    streamed: false,
  };
  d.starting = [];
  d.add(turn);
  d.openTurn = turn.key;
  return turn;
}

function appendText(turn: TurnItem, type: "text" | "reasoning", text: string): void {
  if (!text) return;
  const last = turn.parts[turn.parts.length - 1];
  if (last && last.type === type) {
    turn.parts[turn.parts.length - 1] = { type, text: last.text + text };
  } else {
    turn.parts.push({ type, text });
  }
}

function lastToolIndex(turn: TurnItem, match: (card: ToolCard) => boolean): number {
  for (let i = turn.parts.length - 1; i >= 0; i--) {
    const part = turn.parts[i];
    if (part && part.type === "tool" && match(part)) return i;
  }
  return -1;
}

function onRun(d: Draft, event: SessionEvent): void {
  const data = event.data;
  const kind = str(data.kind);
  // what changes no turn
  if (kind === "todos") {
    d.todos = normalizeTodos(data.items);
    return;
  }
  if (kind === "budget") {
    d.budget = normalizeBudget(data.budgets);
    return;
  }
  if (!TURN_KINDS.has(kind) && !REFUSALS.has(kind)) return; // one this page does not show
  if (kind === "run_started") {
    // a new run while one is open that already began: the old one is over
    const open = d.edit<TurnItem>(d.openTurn, "turn");
    if (open && open.parts.length > 0 && d.starting.length > 0) closeTurn(d);
  }
  const turn = turnFor(d, event);
  switch (kind) {
    case "model_request_started":
      turn.streamed = false;
      return;
    case "text_delta":
      turn.streamed = true;
      appendText(turn, "text", str(data.text));
      return;
    case "reasoning_delta":
      appendText(turn, "reasoning", str(data.text));
      return;
    case "model_response_received": {
      const model = strOrNull(data.model);
      if (model) turn.model = model;
      if (!turn.streamed) appendText(turn, "text", str(data.content));
      turn.streamed = false;
      return;
    }
    case "answer_sent_back":
      turn.parts.push({
        type: "sent_back",
        source: str(data.source),
        message: str(data.message),
      });
      return;
    case "tool_call_started":
      turn.parts.push({
        type: "tool",
        id: str(data.id),
        name: str(data.name),
        arguments: str(data.arguments),
        status: "running",
        result: null,
        error: null,
        duration: null,
        progress: null,
      });
      return;
    case "tool_progress": {
      const line = describeProgress(data.update);
      if (line === null) return;
      const tool = str(data.source).split(":")[0] ?? "";
      let at = lastToolIndex(turn, (c) => c.status === "running" && c.name === tool);
      if (at < 0) at = lastToolIndex(turn, (c) => c.status === "running");
      const card = turn.parts[at];
      if (card && card.type === "tool") turn.parts[at] = { ...card, progress: line };
      return;
    }
    case "tool_call_completed": {
      d.completedCalls += 1;
      const id = str(data.id);
      const at = lastToolIndex(turn, (c) => c.id === id);
      const base: ToolCard =
        at >= 0
          ? (turn.parts[at] as ToolCard)
          : {
              type: "tool",
              id,
              name: str(data.name),
              arguments: "",
              status: "running",
              result: null,
              error: null,
              duration: null,
              progress: null,
            };
      const card: ToolCard = {
        ...base,
        status: data.status === "error" ? "error" : "success",
        result: typeof data.result === "string" ? data.result : null,
        error: strOrNull(data.error),
        duration: num(data.duration),
        progress: null,
      };
      if (at >= 0) turn.parts[at] = card;
      else turn.parts.push(card);
      return;
    }
    case "context_compacted":
      turn.parts.push({
        type: "compacted",
        trigger: str(data.trigger),
        before: num(data.before) ?? 0,
        after: num(data.after) ?? 0,
        trimmed: num(data.trimmed) ?? 0,
        summarized: num(data.summarized) ?? 0,
        summaryError: strOrNull(data.summary_error),
      });
      return;
    case "run_failed":
      turn.parts.push({ type: "failed", error: str(data.error), message: str(data.message) });
      return;
    case "run_completed": {
      const usage = obj(data.usage);
      if (usage) {
        turn.usage = {
          inputTokens: num(usage.input_tokens) ?? 0,
          outputTokens: num(usage.output_tokens) ?? 0,
          cost: num(usage.cost),
        };
      }
      turn.model = strOrNull(data.model) ?? turn.model;
      turn.duration = num(data.duration);
      if (!turn.parts.some((part) => part.type === "text")) {
        appendText(turn, "text", str(data.content));
      }
      return;
    }
    default:
      if (REFUSALS.has(kind)) {
        turn.parts.push({ type: "refused", refusal: refusalOf(kind, data) });
      }
  }
}

function onLane(d: Draft, event: SessionEvent): void {
  const data = event.data;
  if (Array.isArray(data.lanes)) d.lanes = normalizeLanes(data.lanes);
  const kind = str(data.kind);
  const base = { seq: event.seq, ts: event.ts };
  switch (kind) {
    case "operation_started": {
      const key = `o${event.seq}`;
      const op = str(data.op);
      d.add({
        type: "operation",
        key,
        ...base,
        lane: str(data.lane),
        op,
        command: str(data.command),
        status: "running",
        exitCode: null,
        output: null,
        cancelReason: null,
      });
      d.operations.set(op, key);
      return;
    }
    case "operation_cancel_requested": {
      const item = d.edit<OperationItem>(d.operations.get(str(data.op)), "operation");
      if (item) {
        item.cancelReason = str(data.reason);
        if (item.status === "running") item.status = "cancelling";
      }
      return;
    }
    case "operation_ended": {
      d.completedCalls += 1;
      const item = d.edit<OperationItem>(d.operations.get(str(data.op)), "operation");
      if (item) {
        item.status = str(data.status) || "completed";
        item.exitCode = num(data.exit_code);
        item.output = typeof data.output === "string" ? data.output : null;
      }
      return;
    }
    case "answer":
      d.add({
        type: "answer",
        key: `a${event.seq}`,
        ...base,
        messageSeq: num(data.message_seq),
        lane: null,
        text: str(data.text),
      });
      return;
    case "lane_ended": {
      const lane = str(data.lane);
      const summary = str(data.summary);
      const reason = str(data.reason);
      if (summary) {
        d.add({ type: "answer", key: `a${event.seq}`, ...base, messageSeq: null, lane, text: summary });
      }
      if (reason !== "done" || !summary) {
        d.add({
          type: "notice",
          key: `n${event.seq}`,
          ...base,
          code: "lane_ended",
          lane,
          messageSeq: null,
          message: reason,
        });
      }
      return;
    }
    case "lane_failed":
    case "run_failed":
      d.add({
        type: "notice",
        key: `n${event.seq}`,
        ...base,
        code: kind,
        lane: strOrNull(data.lane),
        messageSeq: num(data.message_seq),
        message: str(data.error) || str(data.message),
      });
      return;
  }
}

/** `t` with `events` applied in order (those at or before `t.lastSeq` are skipped: a
 * reconnecting stream may send some again). `t` is not changed. */
export function applyEvents(t: Transcript, events: readonly SessionEvent[]): Transcript {
  if (!events.some((event) => event.seq > t.lastSeq)) return t;
  const d = new Draft(t);
  for (const event of events) {
    if (event.seq <= d.lastSeq) continue;
    d.lastSeq = event.seq;
    const data = obj(event.data);
    if (!data) continue;
    const safe = { ...event, data };
    if (event.kind === "message") onMessage(d, safe);
    else if (event.kind === "status") onStatus(d, safe);
    else if (event.kind === "run") onRun(d, safe);
    else if (event.kind === "lane") onLane(d, safe);
  }
  return d.done();
}

export function buildTranscript(events: readonly SessionEvent[]): Transcript {
  return applyEvents(emptyTranscript(), events);
}

// -- what the page asks --------------------------------------------------------------------------

export function messages(t: Transcript): MessageItem[] {
  return t.items.filter((item): item is MessageItem => item.type === "message");
}

/** Whether the agent is working: a message is running or a turn is open. */
export function isRunning(t: Transcript): boolean {
  return t.openTurn !== null || t.items.some((i) => i.type === "message" && i.state === "running");
}

/** How many messages wait for the agent. */
export function queuedCount(t: Transcript): number {
  return t.items.filter((i) => i.type === "message" && i.state === "pending").length;
}

/** The operations of the lanes that are running now (they can be stopped). */
export function runningOperations(t: Transcript): LaneOperation[] {
  return (t.lanes ?? []).flatMap((lane) => lane.operations.filter((op) => op.status === "running"));
}
