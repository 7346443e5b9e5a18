import { Log } from "./testing";
import {
  applyEvents,
  buildTranscript,
  emptyTranscript,
  isRunning,
  messages,
  queuedCount,
  runningOperations,
  toSeconds,
  type AnswerItem,
  type MessageItem,
  type NoticeItem,
  type OperationItem,
  type ToolCard,
  type TurnItem,
} from "./transcript";

function turns(events: Log["events"]): TurnItem[] {
  return buildTranscript(events).items.filter((i): i is TurnItem => i.type === "turn");
}

describe("messages", () => {
  it("are listed with their role and state", () => {
    const log = new Log();
    log.message("sort this list");
    log.message("use merge sort", { role: "teacher" });
    const t = buildTranscript(log.events);
    expect(messages(t).map((m) => [m.seq, m.text, m.role, m.state])).toEqual([
      [1, "sort this list", "student", "pending"],
      [2, "use merge sort", "teacher", "pending"],
    ]);
    expect(queuedCount(t)).toBe(2);
    expect(isRunning(t)).toBe(false);
  });

  it("follow their status events: running, then done or failed", () => {
    const log = new Log();
    log.message("one");
    log.started(1);
    let t = buildTranscript(log.events);
    expect(messages(t)[0]?.state).toBe("running");
    expect(isRunning(t)).toBe(true);
    log.ended(1, "failed", { error: "budget_exceeded" });
    t = buildTranscript(log.events);
    expect(messages(t)[0]).toMatchObject({ state: "failed", error: "budget_exceeded" });
    expect(isRunning(t)).toBe(false);
  });

  it("interrupted, continued, then done", () => {
    const log = new Log();
    log.message("long job");
    log.started(1);
    log.status("run_interrupted", 1, { state: "interrupted", reason: "cancelled by the student" });
    let t = buildTranscript(log.events);
    expect(messages(t)[0]).toMatchObject({
      state: "interrupted",
      reason: "cancelled by the student",
    });
    log.status("continued", 1);
    t = buildTranscript(log.events);
    expect(messages(t)[0]).toMatchObject({ state: "pending", continued: 1, reason: null });
    log.started(1);
    log.ended(1);
    expect(messages(buildTranscript(log.events))[0]?.state).toBe("done");
  });

  it("count a continuation once when the stored message already counts it (replay)", () => {
    // the log as read after a continue: the message row says continued 1 (and its state now)
    const log = new Log();
    log.message("job", { continued: 1 }, "done");
    log.started(1);
    log.status("run_interrupted", 1, { state: "interrupted", reason: "stopped" });
    log.status("continued", 1);
    log.started(1);
    log.ended(1);
    expect(messages(buildTranscript(log.events))[0]).toMatchObject({ continued: 1, state: "done" });
  });

  it("resumed after a worker went away: pending with the reason", () => {
    const log = new Log();
    log.message("job");
    log.started(1);
    log.status("resumed", 1, { state: "pending", reason: "worker w1 is gone" });
    expect(messages(buildTranscript(log.events))[0]).toMatchObject({
      state: "pending",
      continued: 1,
      reason: "worker w1 is gone",
    });
  });
});

describe("turns", () => {
  it("stream text into one turn after the message, with usage at the end", () => {
    const log = new Log();
    log.message("hello");
    log.answer(1, "Hi there!");
    const t = buildTranscript(log.events);
    expect(t.items.map((i) => i.type)).toEqual(["message", "turn"]);
    const [turn] = turns(log.events);
    expect(turn).toMatchObject({
      messageSeqs: [1],
      state: "done",
      model: "m",
      duration: 1.5,
      usage: { inputTokens: 10, outputTokens: 5, cost: 0.001 },
    });
    expect(turn?.parts).toEqual([{ type: "text", text: "Hi there!" }]);
    expect(t.openTurn).toBeNull();
  });

  it("are created at the first run event, not at run_started", () => {
    const log = new Log();
    log.message("hello");
    log.started(1);
    let t = buildTranscript(log.events);
    expect(t.items.map((i) => i.type)).toEqual(["message"]);
    expect(t.starting).toEqual([1]);
    log.run("run_started");
    t = buildTranscript(log.events);
    expect(t.items.map((i) => i.type)).toEqual(["message", "turn"]);
    expect(t.starting).toEqual([]);
  });

  it("take a reply's whole text when it did not stream", () => {
    const log = new Log();
    log.message("q");
    log.started(1);
    log.run("model_request_started", { turn: 1 });
    log.run("model_response_received", { turn: 1, content: "whole answer", tool_calls: [] });
    log.run("run_completed", { content: "whole answer", usage: {}, duration: 1 });
    log.ended(1);
    expect(turns(log.events)[0]?.parts).toEqual([{ type: "text", text: "whole answer" }]);
  });

  it("do not repeat streamed text when the reply arrives", () => {
    const log = new Log();
    log.message("q");
    log.started(1);
    log.run("model_request_started", { turn: 1 });
    log.run("text_delta", { text: "ab" });
    log.run("model_response_received", { turn: 1, content: "ab", tool_calls: [] });
    log.run("model_request_started", { turn: 2 });
    log.run("model_response_received", { turn: 2, content: "cd", tool_calls: [] });
    expect(turns(log.events)[0]?.parts).toEqual([{ type: "text", text: "abcd" }]);
  });

  it("show tool calls as cards between the text, completed with result and duration", () => {
    const log = new Log();
    log.message("list files");
    log.started(1);
    log.run("model_request_started", { turn: 1 });
    log.run("text_delta", { text: "Let me look." });
    log.run("tool_call_started", { id: "c1", name: "ls", arguments: '{"path": "."}' });
    log.run("tool_call_started", { id: "c2", name: "read", arguments: '{"path": "x"}' });
    let parts = turns(log.events)[0]?.parts ?? [];
    expect(parts.map((p) => p.type)).toEqual(["text", "tool", "tool"]);
    expect(parts[1]).toMatchObject({ name: "ls", status: "running", result: null });
    log.run("tool_call_completed", {
      id: "c1",
      name: "ls",
      status: "success",
      result: "a.py\nb.py",
      error: null,
      duration: 0.25,
    });
    log.run("tool_call_completed", {
      id: "c2",
      name: "read",
      status: "error",
      result: "",
      error: "no file x",
      duration: 0.01,
    });
    log.run("model_request_started", { turn: 2 });
    log.run("text_delta", { text: "Two files." });
    parts = turns(log.events)[0]?.parts ?? [];
    expect(parts.map((p) => p.type)).toEqual(["text", "tool", "tool", "text"]);
    expect(parts[1]).toEqual({
      type: "tool",
      id: "c1",
      name: "ls",
      arguments: '{"path": "."}',
      status: "success",
      result: "a.py\nb.py",
      error: null,
      duration: 0.25,
      progress: null,
    });
    expect(parts[2]).toMatchObject({ status: "error", error: "no file x" });
    expect(buildTranscript(log.events).completedCalls).toBe(2);
    expect(parts[3]).toEqual({ type: "text", text: "Two files." });
  });

  it("show a running tool's progress", () => {
    const log = new Log();
    log.message("research");
    log.started(1);
    log.run("tool_call_started", { id: "c1", name: "task", arguments: "{}" });
    log.run("tool_progress", {
      source: "task:explore",
      update: { kind: "tool_call_started", name: "grep", id: "x", arguments: "{}" },
    });
    let card = turns(log.events)[0]?.parts[0] as ToolCard;
    expect(card.progress).toBe("→ grep");
    log.run("tool_progress", { source: "task", update: { text: "half way" } });
    card = turns(log.events)[0]?.parts[0] as ToolCard;
    expect(card.progress).toBe("half way");
    log.run("tool_progress", { source: "task", update: { kind: "text_delta", text: "x" } });
    expect((turns(log.events)[0]?.parts[0] as ToolCard).progress).toBe("half way");
  });

  it("keep reasoning apart from the answer", () => {
    const log = new Log();
    log.message("think");
    log.started(1);
    log.run("reasoning_delta", { text: "hmm " });
    log.run("reasoning_delta", { text: "ok" });
    log.run("text_delta", { text: "42" });
    expect(turns(log.events)[0]?.parts).toEqual([
      { type: "reasoning", text: "hmm ok" },
      { type: "text", text: "42" },
    ]);
  });

  it("note a compaction and an answer sent back", () => {
    const log = new Log();
    log.message("q");
    log.started(1);
    log.run("context_compacted", {
      turn: 3,
      trigger: "soft",
      before: 120_000,
      after: 30_000,
      trimmed: 4,
      summarized: 10,
      summary_error: null,
    });
    log.run("answer_sent_back", { turn: 3, source: "todos", message: "finish your plan" });
    expect(turns(log.events)[0]?.parts).toEqual([
      {
        type: "compacted",
        trigger: "soft",
        before: 120_000,
        after: 30_000,
        trimmed: 4,
        summarized: 10,
        summaryError: null,
      },
      { type: "sent_back", source: "todos", message: "finish your plan" },
    ]);
  });

  it("show a budget refusal with when it resets, and the turn fails", () => {
    const log = new Log();
    log.message("q");
    log.started(1);
    log.run("budget_exceeded", {
      message: "your daily budget of 10,000 tokens is spent",
      resets_at: "2026-03-02T00:00:00+00:00",
      remaining_tokens: 0,
    });
    log.ended(1, "failed", { error: "budget_exceeded" });
    const [turn] = turns(log.events);
    expect(turn?.state).toBe("failed");
    expect(turn?.parts).toEqual([
      {
        type: "refused",
        refusal: {
          kind: "budget_exceeded",
          message: "your daily budget of 10,000 tokens is spent",
          resetsAt: Date.parse("2026-03-02T00:00:00Z") / 1000,
          retryAfter: null,
        },
      },
    ]);
  });

  it("show a rate limit and a run failure", () => {
    const log = new Log();
    log.message("a");
    log.started(1);
    log.run("rate_limited", { message: "slow down", retry_after: 12 });
    log.ended(1, "failed", { error: "rate_limited" });
    log.message("b");
    log.started(5);
    log.run("run_failed", { error: "ModelError", message: "the model is down" });
    log.ended(5, "failed", { error: "ModelError" });
    const [first, second] = turns(log.events);
    expect(first?.parts[0]).toMatchObject({
      type: "refused",
      refusal: { kind: "rate_limited", retryAfter: 12, resetsAt: null },
    });
    expect(second?.parts).toEqual([
      { type: "failed", error: "ModelError", message: "the model is down" },
    ]);
    expect(second?.messageSeqs).toEqual([5]);
  });

  it("end interrupted when the run is stopped", () => {
    const log = new Log();
    log.message("q");
    log.started(1);
    log.run("text_delta", { text: "start" });
    expect(turns(log.events)[0]?.state).toBe("running");
    log.ended(1, "interrupted", { reason: "cancelled by the teacher" });
    expect(turns(log.events)[0]).toMatchObject({
      state: "interrupted",
      reason: "cancelled by the teacher",
    });
  });

  it("stay in place while a message is sent during the run", () => {
    const log = new Log();
    log.message("sort");
    log.started(1);
    log.run("text_delta", { text: "Using bubble" });
    log.message("wait, use merge sort instead");
    log.run("text_delta", { text: " sort." });
    log.ended(1);
    log.started(4);
    log.run("text_delta", { text: "Switching to merge sort." });
    log.ended(4);
    const t = buildTranscript(log.events);
    expect(t.items.map((i) => i.key)).toEqual(["m1", "t3", "m4", "t8"]);
    const all = turns(log.events);
    expect(all[0]?.parts).toEqual([{ type: "text", text: "Using bubble sort." }]);
    expect(all[1]?.messageSeqs).toEqual([4]);
  });

  it("answer several messages in one turn (batch runtime)", () => {
    const log = new Log();
    log.message("a");
    log.message("b");
    log.started(1);
    log.started(2);
    log.run("text_delta", { text: "both" });
    log.ended(1);
    let [turn] = turns(log.events);
    expect(turn).toMatchObject({ messageSeqs: [1, 2], open: [2], state: "running" });
    log.ended(2);
    [turn] = turns(log.events);
    expect(turn).toMatchObject({ open: [], state: "done" });
    expect(buildTranscript(log.events).openTurn).toBeNull();
  });

  it("keep the latest plan and budget", () => {
    const log = new Log();
    log.message("plan");
    log.started(1);
    log.run("todos", { items: [{ content: "read", status: "completed" }, "write"] });
    log.run("todos", {
      items: [
        { content: "read", status: "completed" },
        { content: "write", status: "in_progress" },
      ],
    });
    log.run("budget", {
      budgets: [
        {
          scope: "student",
          period: "day",
          remaining_tokens: 900,
          remaining_cost_micros: 1_500_000,
          resets_at: 1_700_086_400,
        },
      ],
    });
    const t = buildTranscript(log.events);
    expect(t.todos).toEqual([
      { content: "read", status: "completed" },
      { content: "write", status: "in_progress" },
    ]);
    expect(t.budget).toEqual([
      {
        scope: "student",
        period: "day",
        remainingTokens: 900,
        remainingCostUsd: 1.5,
        resetsAt: 1_700_086_400,
      },
    ]);
    expect(buildTranscript(new Log().events).todos).toBeNull();
  });
});

describe("lanes", () => {
  const snapshot = (status: string, ops: Record<string, unknown>[] = []) => [
    {
      id: "L1",
      intent: "run the tests",
      status,
      active: status !== "ended",
      created: 1,
      termination: "",
      operations: ops,
    },
  ];

  it("keep the latest snapshot and the running operations", () => {
    const log = new Log();
    log.message("run the tests");
    log.started(1);
    log.lane("event", { event: { type: "user_message" }, lanes: snapshot("working") });
    log.lane("event", {
      event: { type: "operation_started" },
      lanes: snapshot("waiting", [
        { id: "op1", what: "pytest", executor: "x_1", status: "running", progress: "" },
      ]),
    });
    const t = buildTranscript(log.events);
    expect(t.lanes?.[0]).toMatchObject({ id: "L1", status: "waiting", active: true });
    expect(runningOperations(t).map((op) => op.id)).toEqual(["op1"]);
    // a lanes session's run_started makes no empty turn
    expect(t.items.map((i) => i.type)).toEqual(["message"]);
    expect(isRunning(t)).toBe(true);
  });

  it("show operations, with their end, and a cancel", () => {
    const log = new Log();
    log.message("build");
    log.lane("operation_started", { lane: "L1", op: "op1", command: "make" });
    log.lane("operation_started", { lane: "L1", op: "op2", command: "sleep 100" });
    log.lane("operation_ended", {
      lane: "L1",
      op: "op1",
      exit_code: 0,
      status: "completed",
      output: "ok",
    });
    log.lane("operation_cancel_requested", { lane: "L1", op: "op2", reason: "cancelled by the student" });
    const ops = buildTranscript(log.events).items.filter(
      (i): i is OperationItem => i.type === "operation",
    );
    expect(ops.map((o) => [o.op, o.command, o.status, o.exitCode, o.output])).toEqual([
      ["op1", "make", "completed", 0, "ok"],
      ["op2", "sleep 100", "cancelling", null, null],
    ]);
    expect(ops[1]?.cancelReason).toBe("cancelled by the student");
  });

  it("follow the latest operation of an id that repeats", () => {
    const log = new Log();
    log.lane("operation_started", { lane: "L1", op: "op1", command: "first" });
    log.lane("operation_ended", { lane: "L1", op: "op1", exit_code: 0, status: "completed" });
    log.lane("operation_started", { lane: "L2", op: "op1", command: "second" });
    log.lane("operation_ended", { lane: "L2", op: "op1", exit_code: 2, status: "failed" });
    const ops = buildTranscript(log.events).items as OperationItem[];
    expect(ops.map((o) => [o.command, o.exitCode])).toEqual([
      ["first", 0],
      ["second", 2],
    ]);
  });

  it("show answers, lane summaries and failures", () => {
    const log = new Log();
    log.message("what is 2+2?");
    log.started(1);
    log.lane("answer", { message_seq: 1, text: "4" });
    log.ended(1);
    log.lane("lane_ended", { lane: "L1", reason: "done", summary: "All tests pass." });
    log.lane("lane_ended", { lane: "L2", reason: "the student stopped it", summary: "" });
    log.lane("lane_failed", { lane: "L3", error: "model unavailable" });
    log.lane("run_failed", { message_seq: 1, message: "routing failed" });
    const items = buildTranscript(log.events).items;
    const answers = items.filter((i): i is AnswerItem => i.type === "answer");
    expect(answers.map((a) => [a.messageSeq, a.lane, a.text])).toEqual([
      [1, null, "4"],
      [null, "L1", "All tests pass."],
    ]);
    const notices = items.filter((i): i is NoticeItem => i.type === "notice");
    expect(notices.map((n) => [n.code, n.lane, n.message])).toEqual([
      ["lane_ended", "L2", "the student stopped it"],
      ["lane_failed", "L3", "model unavailable"],
      ["run_failed", null, "routing failed"],
    ]);
  });
});

describe("applyEvents", () => {
  it("folds in pieces to the same result as all at once", () => {
    const log = new Log();
    log.message("hello");
    log.answer(1, "Hi there, how are you?");
    log.message("fine");
    log.started(10);
    log.run("tool_call_started", { id: "c", name: "t", arguments: "" });
    const whole = buildTranscript(log.events);
    let t = emptyTranscript();
    for (const event of log.events) t = applyEvents(t, [event]);
    expect(t.items).toEqual(whole.items);
    expect(t.openTurn).toBe(whole.openTurn);
    expect(t.lastSeq).toBe(whole.lastSeq);
  });

  it("skips events it has seen (a reconnect) and returns the same transcript", () => {
    const log = new Log();
    log.message("hello");
    log.answer(1, "Hi!");
    const t = buildTranscript(log.events);
    expect(applyEvents(t, log.events.slice(2))).toBe(t);
    expect(applyEvents(t, log.events).items).toHaveLength(2);
  });

  it("does not change the transcript it was given, and keeps unchanged items", () => {
    const log = new Log();
    log.message("hello");
    log.started(1);
    log.run("text_delta", { text: "a" });
    const before = buildTranscript(log.events);
    const turnBefore = before.items[1] as TurnItem;
    const message = before.items[0] as MessageItem;
    const after = applyEvents(before, [
      { seq: 4, ts: 1, kind: "run", state: null, data: { kind: "text_delta", text: "b" } },
    ]);
    expect(turnBefore.parts).toEqual([{ type: "text", text: "a" }]);
    expect((after.items[1] as TurnItem).parts).toEqual([{ type: "text", text: "ab" }]);
    expect(after.items[0]).toBe(message);
  });

  it("ignores unknown kinds and malformed data", () => {
    const t = buildTranscript([
      { seq: 1, ts: 1, kind: "run", state: null, data: { kind: "something_new" } },
      { seq: 2, ts: 1, kind: "status", state: null, data: { event: "run_ended" } },
      { seq: 3, ts: 1, kind: "lane", state: null, data: { kind: "event", lanes: "no" } },
      { seq: 4, ts: 1, kind: "message", state: "weird", data: { text: 5 } },
    ]);
    expect(t.lastSeq).toBe(4);
    expect(t.lanes).toBeNull();
    expect(messages(t)[0]).toMatchObject({ text: "", state: "pending" });
  });
});

describe("toSeconds", () => {
  it("reads numbers and ISO times", () => {
    expect(toSeconds(12)).toBe(12);
    expect(toSeconds("1970-01-01T00:01:00Z")).toBe(60);
    expect(toSeconds("never")).toBeNull();
    expect(toSeconds(null)).toBeNull();
  });
});
