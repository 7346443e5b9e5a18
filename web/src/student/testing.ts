// Test helpers: a session's log written the way the service writes it.
import type { SessionEvent } from "../api/events";

export class Log {
  events: SessionEvent[] = [];
  private seq = 0;
  private ts = 1_700_000_000;

  private add(kind: SessionEvent["kind"], data: Record<string, unknown>, state: string | null = null) {
    this.seq += 1;
    this.ts += 1;
    const event: SessionEvent = { seq: this.seq, ts: this.ts, kind, state, data };
    this.events.push(event);
    return event;
  }

  message(text: string, extra: Record<string, unknown> = {}, state = "pending") {
    return this.add("message", { text, ...extra }, state);
  }

  status(event: string, messageSeq: number, extra: Record<string, unknown> = {}) {
    return this.add("status", { event, message_seq: messageSeq, ...extra });
  }

  started(messageSeq: number) {
    return this.status("run_started", messageSeq, { state: "running" });
  }

  ended(messageSeq: number, state = "done", extra: Record<string, unknown> = {}) {
    return this.status("run_ended", messageSeq, { state, ...extra });
  }

  run(kind: string, data: Record<string, unknown> = {}) {
    return this.add("run", { kind, ...data });
  }

  lane(kind: string, data: Record<string, unknown> = {}) {
    return this.add("lane", { kind, ...data });
  }

  /** A whole serial run answering `messageSeq` with `text` (streamed in two pieces). */
  answer(messageSeq: number, text: string) {
    this.started(messageSeq);
    this.run("run_started", { run_id: "r", agent: "a", input: "" });
    this.run("model_request_started", { turn: 1 });
    const half = Math.floor(text.length / 2);
    this.run("text_delta", { text: text.slice(0, half) });
    this.run("text_delta", { text: text.slice(half) });
    this.run("model_response_received", { turn: 1, content: text, tool_calls: [], model: "m" });
    this.run("run_completed", {
      run_id: "r",
      content: text,
      usage: { input_tokens: 10, output_tokens: 5, cost: 0.001 },
      model: "m",
      duration: 1.5,
    });
    this.ended(messageSeq);
  }
}
