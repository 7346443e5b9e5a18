// A session's event stream: the stored events, then live ones, over server-sent events. The
// browser's EventSource reconnects by itself and sends Last-Event-ID, so nothing is missed.
import type { Schemas } from "./client";

export type SessionEvent = Schemas["EventOut"];

export interface Subscription {
  close(): void;
}

export function subscribe(
  sessionId: string,
  onEvent: (event: SessionEvent) => void,
  onError?: () => void,
): Subscription {
  const url = `/api/sessions/${encodeURIComponent(sessionId)}/events`;
  const source = new EventSource(url, { withCredentials: true });
  source.onmessage = (message: MessageEvent<string>) => {
    try {
      onEvent(JSON.parse(message.data) as SessionEvent);
    } catch {
      // a malformed frame is skipped; the log still holds the event
    }
  };
  source.onerror = () => onError?.();
  return { close: () => source.close() };
}
