// A session's event stream: the stored events, then live ones, over server-sent events. The
// browser's EventSource reconnects by itself and sends Last-Event-ID, so nothing is missed.
import type { Schemas } from "./client";

export type SessionEvent = Schemas["EventOut"];

export interface Subscription {
  close(): void;
}

export interface SubscribeOptions {
  /** Send the events after this seq (a resubscription continues where it stopped). */
  after?: number;
  /** The stream is open (again): events flow. */
  onOpen?: () => void;
}

/** `onError` is told whether the browser gave up (`closed`: the server refused the stream, so
 * it will not reconnect by itself) or is reconnecting. */
export function subscribe(
  sessionId: string,
  onEvent: (event: SessionEvent) => void,
  onError?: (closed: boolean) => void,
  options: SubscribeOptions = {},
): Subscription {
  const query = options.after ? `?after=${options.after}` : "";
  const url = `/api/sessions/${encodeURIComponent(sessionId)}/events${query}`;
  const source = new EventSource(url, { withCredentials: true });
  source.onopen = () => options.onOpen?.();
  source.onmessage = (message: MessageEvent<string>) => {
    try {
      onEvent(JSON.parse(message.data) as SessionEvent);
    } catch {
      // a malformed frame is skipped; the log still holds the event
    }
  };
  source.onerror = () => onError?.(source.readyState === EventSource.CLOSED);
  return { close: () => source.close() };
}
