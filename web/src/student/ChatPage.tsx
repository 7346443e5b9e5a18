// A session's chat: the transcript as it streams (the session's event stream folded by
// transcript.ts), the composer (a message sent while the agent works is a new instruction),
// Stop and Continue, and the side panels: plan, lanes (with a Stop per running operation),
// files, budget. A teacher opening a student's session reads it and may guide or stop the
// agent; nobody else can change it.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { useTranslation } from "react-i18next";
import { Link, useParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { isStaff, useAuth } from "../auth";
import { ErrorBox, Loading, PageTitle } from "../components/common";
import { Composer } from "./chat/Composer";
import { type Connection, useSessionEvents, useStickToBottom } from "./chat/hooks";
import {
  AnswerView,
  MessageBubble,
  NoticeView,
  OperationView,
  RefusalBox,
  Typing,
  TurnView,
} from "./chat/Items";
import { BudgetPanel, FilesPanel, LanesPanel, PlanPanel } from "./chat/Panels";
import { courseName, keys, refusalOfError, useCourses, useServer } from "./queries";
import { isRunning, queuedCount, type Transcript } from "./transcript";
import { LiveStatus } from "./ui";

type MessageOut = Schemas["MessageOut"];

/** A message the service took that the stream has not brought yet. */
interface Sent {
  message: MessageOut;
  teacher: boolean;
}

export function ChatPage() {
  const { sessionId = "" } = useParams();
  // a fresh chat (stream, transcript, drafts) for each session
  return <Chat key={sessionId} sessionId={sessionId} />;
}

function useSession(sessionId: string) {
  return useQuery({
    queryKey: keys.session(sessionId),
    queryFn: async () =>
      unwrap(
        await api.GET("/api/sessions/{session_id}", {
          params: { path: { session_id: sessionId } },
        }),
      ),
  });
}

function ConnectionBadge({ connection, onReconnect }: { connection: Connection; onReconnect(): void }) {
  const { t } = useTranslation("student");
  if (connection === "live") return <span role="status" className="connection" />;
  return (
    <span className="row connection" role="status">
      <span className={`badge ${connection === "lost" ? "bad" : "warn"}`}>
        {t(`connection.${connection}`)}
      </span>
      {connection === "lost" && (
        <button type="button" className="secondary small" onClick={onReconnect}>
          {t("connection.reconnect")}
        </button>
      )}
    </span>
  );
}

function Chat({ sessionId }: { sessionId: string }) {
  const { t } = useTranslation("student");
  const { me } = useAuth();
  const client = useQueryClient();
  const session = useSession(sessionId);
  const courses = useCourses();
  const server = useServer();
  const { transcript, connection, reconnect } = useSessionEvents(sessionId);
  const [sent, setSent] = useState<Sent[]>([]);
  const [actionError, setActionError] = useState<unknown>(null);

  const mine = session.data !== undefined && me !== null && session.data.user_id === me.id;
  const teaching = session.data !== undefined && !mine && isStaff(me);
  const running = isRunning(transcript);
  const queued = queuedCount(transcript);

  // the files change when a run ends: list them again then
  const [filesVersion, setFilesVersion] = useState(0);
  const wasRunning = useRef(running);
  const [worked, setWorked] = useState(false); // the agent ran while the page was open
  useEffect(() => {
    if (wasRunning.current && !running) {
      setFilesVersion((v) => v + 1);
      setWorked(true);
    }
    wasRunning.current = running;
  }, [running]);
  const filesKey = `${filesVersion}.${transcript.completedCalls}`;

  // a renamed session (its first message names it) or a changed state: the lists learn of it
  const started = transcript.lastSeq > 0;
  useEffect(() => {
    if (started) void client.invalidateQueries({ queryKey: keys.sessions, exact: true });
  }, [running, started, client]);

  const pending = sent.filter((s) => !transcript.index.has(`m${s.message.seq}`));

  const post = async (text: string) => {
    setActionError(null);
    try {
      const path = { session_id: sessionId };
      const message = unwrap(
        teaching
          ? await api.POST("/api/sessions/{session_id}/teacher-messages", {
              params: { path },
              body: { text },
            })
          : await api.POST("/api/sessions/{session_id}/messages", { params: { path }, body: { text } }),
      );
      setSent((list) => [...list, { message, teacher: teaching }]);
      if (!session.data?.title) void client.invalidateQueries({ queryKey: keys.session(sessionId) });
    } catch (error) {
      setActionError(error);
      throw error;
    }
  };

  const stop = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.POST("/api/sessions/{session_id}/cancel", {
          params: { path: { session_id: sessionId } },
        }),
      ),
    onMutate: () => setActionError(null),
    onError: setActionError,
  });

  const continueMessage = useMutation({
    mutationFn: async (seq: number) =>
      unwrap(
        await api.POST("/api/sessions/{session_id}/continue", {
          params: { path: { session_id: sessionId } },
          body: { seq },
        }),
      ),
    onMutate: () => setActionError(null),
    onError: setActionError,
  });

  const stopOperation = useMutation({
    mutationFn: async (op: string) =>
      unwrap(
        await api.POST("/api/sessions/{session_id}/operations/{op_id}/cancel", {
          params: { path: { session_id: sessionId, op_id: op } },
        }),
      ),
    onMutate: () => setActionError(null),
    onError: setActionError,
  });

  // stable callbacks: the transcript's entries are memoised and stay put while text streams
  const { mutate: continueSeq } = continueMessage;
  const { mutate: stopOp } = stopOperation;
  const onContinue = useCallback((seq: number) => continueSeq(seq), [continueSeq]);
  const onStopOperation = useCallback((op: string) => stopOp(op), [stopOp]);

  const { away, jump } = useStickToBottom(
    `${transcript.items.length}.${transcript.lastSeq}.${pending.length}`,
  );

  if (session.isPending) return <Loading />;
  if (session.error) {
    return (
      <>
        <PageTitle title={t("chat.notFoundTitle")} />
        <ErrorBox error={session.error} />
        <p>
          <Link to="/sessions">{t("chat.back")}</Link>
        </p>
      </>
    );
  }

  const info = session.data;
  const course = courses.data?.find((c) => c.id === info.course_id);
  const runtime = info.runtime || server.data?.runtime || "";
  const canStop = mine || teaching;
  const title = info.title || t("sessions.untitled");
  const refusal = refusalOfError(actionError);

  return (
    <div className="chat-page">
      <div className="chat-head">
        {mine ? (
          <Link to="/sessions" className="back-link">
            ← {t("chat.back")}
          </Link>
        ) : teaching ? (
          <Link to="/teach" className="back-link">
            ← {t("chat.backTeaching")}
          </Link>
        ) : null}
        <PageTitle title={title}>
          <div className="row">
            <ConnectionBadge connection={connection} onReconnect={reconnect} />
            {running ? (
              <span className="badge busy">{t("state.running")}</span>
            ) : queued > 0 ? (
              <span className="badge busy">{t("chat.queued", { count: queued })}</span>
            ) : (
              <span className="badge">{t("chat.idle")}</span>
            )}
          </div>
        </PageTitle>
        <p className="chat-sub muted">
          {courseName(course, info.course_id)}
          {runtime && (
            <>
              {" · "}
              {t(`runtime.${runtime}`, { defaultValue: runtime })}
            </>
          )}
        </p>
        {!mine && (
          <p className="notice" role="note">
            {teaching ? t("chat.readOnlyTeacher") : t("chat.readOnly")}
          </p>
        )}
      </div>

      <div className="chat-body">
        <section className="chat-main" aria-labelledby="conversation-title">
          <h2 id="conversation-title" className="visually-hidden">
            {t("chat.conversation")}
          </h2>
          <TranscriptView
            transcript={transcript}
            pending={pending}
            canContinue={mine}
            onContinue={onContinue}
            continuing={continueMessage.isPending}
            onStopOperation={canStop ? onStopOperation : undefined}
            stoppingOperation={stopOperation.isPending ? (stopOperation.variables ?? null) : null}
            connection={connection}
          />
          {running && transcript.openTurn === null && (
            <div className="working muted" aria-hidden="true">
              <Typing /> {t("chat.working")}
            </div>
          )}
          <LiveStatus>{running ? t("chat.working") : worked ? t("chat.finished") : ""}</LiveStatus>

          <div className="composer-dock">
            {away && (
              <button type="button" className="jump secondary small" onClick={jump}>
                ↓ {t("chat.jump")}
              </button>
            )}
            {actionError !== null &&
              (refusal ? (
                <RefusalBox refusal={refusal} live />
              ) : (
                <ErrorBox error={actionError} />
              ))}
            {mine || teaching ? (
              <Composer
                onSend={post}
                running={running}
                onStop={canStop ? () => stop.mutate() : undefined}
                stopping={stop.isPending}
                asTeacher={teaching}
              />
            ) : null}
          </div>
        </section>

        <div className="chat-side">
          {transcript.todos && transcript.todos.length > 0 && <PlanPanel todos={transcript.todos} />}
          {transcript.lanes && transcript.lanes.length > 0 && (
            <LanesPanel
              lanes={transcript.lanes}
              onStop={canStop ? onStopOperation : undefined}
              stopping={stopOperation.isPending ? (stopOperation.variables ?? null) : null}
            />
          )}
          {mine && transcript.budget && transcript.budget.length > 0 && (
            <BudgetPanel budget={transcript.budget} />
          )}
          <FilesPanel sessionId={sessionId} version={filesKey} />
        </div>
      </div>
    </div>
  );
}

interface TranscriptProps {
  transcript: Transcript;
  pending: Sent[];
  canContinue: boolean;
  onContinue(seq: number): void;
  continuing: boolean;
  onStopOperation?: (op: string) => void;
  stoppingOperation: string | null;
  connection: Connection;
}

export function TranscriptView({
  transcript,
  pending,
  canContinue,
  onContinue,
  continuing,
  onStopOperation,
  stoppingOperation,
  connection,
}: TranscriptProps) {
  const { t } = useTranslation("student");
  const intents = useMemo(
    () => new Map((transcript.lanes ?? []).map((lane) => [lane.id, lane.intent])),
    [transcript.lanes],
  );
  if (transcript.items.length === 0 && pending.length === 0) {
    if (connection === "connecting") return <Loading />;
    return (
      <div className="chat-empty">
        <p>{t("chat.empty")}</p>
      </div>
    );
  }
  return (
    <div className="transcript">
      {transcript.items.map((item) => {
        switch (item.type) {
          case "message":
            return (
              <MessageBubble
                key={item.key}
                item={item}
                onContinue={canContinue ? onContinue : undefined}
                continuing={continuing}
              />
            );
          case "turn":
            return <TurnView key={item.key} item={item} />;
          case "answer":
            return (
              <AnswerView
                key={item.key}
                item={item}
                intent={item.lane ? intents.get(item.lane) : undefined}
              />
            );
          case "operation":
            return (
              <OperationView
                key={item.key}
                item={item}
                onStop={onStopOperation}
                stopping={stoppingOperation === item.op}
              />
            );
          case "notice":
            return <NoticeView key={item.key} item={item} />;
        }
      })}
      {pending.map(({ message, teacher }) => (
        <MessageBubble
          key={`sent${message.seq}`}
          item={{
            type: "message",
            key: `sent${message.seq}`,
            seq: message.seq,
            ts: message.ts,
            text: message.text,
            role: teacher ? "teacher" : "student",
            state: "pending",
            continued: 0,
            continuations: 0,
            reason: null,
            error: null,
          }}
        />
      ))}
    </div>
  );
}
