// The chat's live parts: the session's event stream folded into a transcript (events arriving
// together are folded in one render), and the window's scroll following the newest entry
// while the reader is at the bottom (and only then: scrolling up to read stops it).
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "react";
import { type SessionEvent, subscribe } from "../../api/events";
import { applyEvents, emptyTranscript, type Transcript } from "../transcript";

export type Connection = "connecting" | "live" | "reconnecting" | "lost";

const FLUSH_MS = 40;
const RETRY_MS = 5000;

export function useSessionEvents(sessionId: string) {
  const [transcript, setTranscript] = useState<Transcript>(emptyTranscript);
  const [connection, setConnection] = useState<Connection>("connecting");
  const [attempt, setAttempt] = useState(0);
  const lastSeq = useRef(0);
  lastSeq.current = transcript.lastSeq;

  useEffect(() => {
    let buffer: SessionEvent[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    let retry: ReturnType<typeof setTimeout> | undefined;
    const flush = () => {
      timer = undefined;
      const batch = buffer;
      buffer = [];
      setTranscript((t) => applyEvents(t, batch));
    };
    const subscription = subscribe(
      sessionId,
      (event) => {
        buffer.push(event);
        setConnection("live");
        timer ??= setTimeout(flush, FLUSH_MS);
      },
      (closed) => {
        setConnection(closed ? "lost" : "reconnecting");
        if (closed) retry = setTimeout(() => setAttempt((n) => n + 1), RETRY_MS);
      },
      { after: lastSeq.current, onOpen: () => setConnection("live") },
    );
    return () => {
      subscription.close();
      clearTimeout(retry);
      if (timer !== undefined) {
        clearTimeout(timer);
        flush();
      }
    };
  }, [sessionId, attempt]);

  const reconnect = useCallback(() => {
    setConnection("connecting");
    setAttempt((n) => n + 1);
  }, []);
  return { transcript, connection, reconnect };
}

const NEAR_BOTTOM_PX = 120;

function atBottom(): boolean {
  const page = document.documentElement;
  return window.innerHeight + window.scrollY >= page.scrollHeight - NEAR_BOTTOM_PX;
}

/** Keep the window scrolled to the bottom when `version` changes, if the reader was there;
 * `away` says the reader scrolled up (show a "jump to latest" button), `jump` goes down. */
export function useStickToBottom(version: unknown) {
  const stuck = useRef(true);
  const [away, setAway] = useState(false);

  useEffect(() => {
    const onScroll = () => {
      stuck.current = atBottom();
      if (stuck.current) setAway(false);
    };
    // opening a tool card (a <details>) while the agent writes: the reader is reading it, so
    // new text must not scroll it away
    const onToggle = (event: Event) => {
      if (event.target instanceof HTMLDetailsElement && event.target.open) stuck.current = atBottom();
    };
    window.addEventListener("scroll", onScroll, { passive: true });
    document.addEventListener("toggle", onToggle, true);
    return () => {
      window.removeEventListener("scroll", onScroll);
      document.removeEventListener("toggle", onToggle, true);
    };
  }, []);

  useLayoutEffect(() => {
    if (stuck.current) {
      window.scrollTo({ top: document.documentElement.scrollHeight });
    } else {
      setAway(true);
    }
  }, [version]);

  const jump = useCallback(() => {
    stuck.current = true;
    setAway(false);
    window.scrollTo({ top: document.documentElement.scrollHeight, behavior: "smooth" });
  }, []);
  return { away, jump };
}
