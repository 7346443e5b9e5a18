// Activity: the course's sessions, refreshed every few seconds, the running ones first. A
// teacher opens one (the chat page, read-only for them, with a box to guide the agent), sends
// the agent a quick message, or interrupts its run.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, Fragment, useMemo, useState } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { errorMessage, ErrorBox, Loading } from "../components/common";
import { formatAgo, formatTime } from "../format";
import { emailsOf, keys, useCourseContext, useMembers, useServer } from "./queries";
import { Field, LiveStatus } from "./ui";

type Session = Schemas["SessionOut"];

export const REFRESH_MS = 4000;
const LIMITS = [50, 100, 200, 500] as const;

/** Running sessions first, then the most recently active. */
export function sortSessions(sessions: readonly Session[]): Session[] {
  return [...sessions].sort(
    (a, b) => Number(b.active) - Number(a.active) || b.updated_at - a.updated_at,
  );
}

interface Note {
  ok: boolean;
  text: string;
}

export function ActivityTab() {
  const { t } = useTranslation("teacher");
  const { course } = useCourseContext();
  const members = useMembers(course.id);
  const server = useServer();
  const client = useQueryClient();
  const [student, setStudent] = useState("");
  const [limit, setLimit] = useState<number>(100);
  const [messaging, setMessaging] = useState<string | null>(null);
  const [note, setNote] = useState<Note | null>(null);
  const sessions = useQuery({
    queryKey: keys.sessions(course.id, student, limit),
    queryFn: async () =>
      unwrap(
        await api.GET("/api/sessions", {
          params: { query: { course_id: course.id, user_id: student || undefined, limit } },
        }),
      ),
    refetchInterval: REFRESH_MS,
    placeholderData: (previous) => previous,
  });
  const emails = useMemo(() => emailsOf(members.data), [members.data]);
  const students = (members.data ?? []).filter((m) => m.role === "student");
  const list = sortSessions(sessions.data ?? []);
  const running = list.filter((s) => s.active).length;
  const owner = (s: Session) => emails.get(s.user_id) ?? s.user_id;
  const runtimeOf = (s: Session) => s.runtime || course.runtime || server.data?.runtime || "";

  const interrupt = useMutation({
    mutationFn: async (session: Session) => {
      unwrap(
        await api.POST("/api/sessions/{session_id}/cancel", {
          params: { path: { session_id: session.id } },
        }),
      );
      return session;
    },
    onSuccess: (session) => {
      setNote({ ok: true, text: t("activity.interrupted", { who: owner(session) }) });
      void client.invalidateQueries({ queryKey: ["course", course.id, "sessions"] });
    },
    onError: (error) => setNote({ ok: false, text: errorMessage(error) }),
  });

  return (
    <section aria-labelledby="activity-title">
      <h2 id="activity-title" className="visually-hidden">
        {t("tabs.activity")}
      </h2>
      <div className="panel">
        <div className="t-form-row">
          <Field label={t("activity.student")}>
            {({ id }) => (
              <select id={id} value={student} onChange={(event) => setStudent(event.target.value)}>
                <option value="">{t("activity.everyone")}</option>
                {students.map((m) => (
                  <option key={m.user.id} value={m.user.id}>
                    {m.user.email}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label={t("activity.show")}>
            {({ id }) => (
              <select
                id={id}
                value={limit}
                onChange={(event) => setLimit(Number(event.target.value))}
              >
                {LIMITS.map((n) => (
                  <option key={n} value={n}>
                    {t("activity.latest", { count: n })}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <p className="muted t-form-note">
            {sessions.data &&
              t("activity.summary", { count: list.length, running })}{" "}
            · {t("activity.refreshes", { seconds: REFRESH_MS / 1000 })}
            {sessions.isFetching && <span className="t-spinner" aria-hidden="true" />}
          </p>
        </div>
      </div>
      <LiveStatus>
        {note && <span className={note.ok ? "t-ok" : "t-bad"}>{note.text}</span>}
      </LiveStatus>
      {sessions.isPending && <Loading />}
      <ErrorBox error={sessions.error} />
      {sessions.isSuccess && list.length === 0 && (
        <p className="panel muted">{t("activity.none")}</p>
      )}
      {list.length > 0 && (
        <div className="t-table-wrap panel t-flush">
          <table className="t-table">
            <thead>
              <tr>
                <th scope="col">{t("activity.status")}</th>
                <th scope="col">{t("activity.student")}</th>
                <th scope="col">{t("activity.sessionTitle")}</th>
                <th scope="col">{t("activity.runtime")}</th>
                <th scope="col">{t("activity.lastActivity")}</th>
                <th scope="col">
                  <span className="visually-hidden">{t("actions")}</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((session) => {
                const who = owner(session);
                const name = session.title || t("activity.untitled");
                return (
                  <Fragment key={session.id}>
                    <tr className={session.active ? "t-running" : undefined}>
                      <td>
                        {session.active ? (
                          <span className="badge busy">{t("activity.running")}</span>
                        ) : (
                          <span className="badge">{t("activity.idle")}</span>
                        )}
                      </td>
                      <th scope="row" className="t-cell-email">
                        {who}
                      </th>
                      <td>{session.title || <span className="muted">{name}</span>}</td>
                      <td>{runtimeOf(session) ? t(`runtimes.${runtimeOf(session)}.name`, { defaultValue: runtimeOf(session) }) : "—"}</td>
                      <td className="t-nowrap" title={formatTime(session.updated_at)}>
                        {formatAgo(session.updated_at)}
                      </td>
                      <td className="t-row-actions">
                        <Link
                          className="button secondary small"
                          to={`/sessions/${encodeURIComponent(session.id)}`}
                          aria-label={t("named", { action: t("activity.open"), who: `${who}: ${name}` })}
                        >
                          {t("activity.open")}
                        </Link>
                        <button
                          type="button"
                          className="secondary small"
                          aria-expanded={messaging === session.id}
                          aria-controls={`message-${session.id}`}
                          onClick={() => setMessaging(messaging === session.id ? null : session.id)}
                          aria-label={t("named", { action: t("activity.message"), who: `${who}: ${name}` })}
                        >
                          {t("activity.message")}
                        </button>
                        <button
                          type="button"
                          className="danger small"
                          disabled={!session.active || interrupt.isPending}
                          onClick={() => {
                            setNote(null);
                            interrupt.mutate(session);
                          }}
                          aria-label={t("named", { action: t("activity.interrupt"), who: `${who}: ${name}` })}
                        >
                          {t("activity.interrupt")}
                        </button>
                      </td>
                    </tr>
                    {messaging === session.id && (
                      <tr className="t-subrow">
                        <td colSpan={6} id={`message-${session.id}`}>
                          <MessageBox
                            session={session}
                            who={who}
                            onSent={() => {
                              setMessaging(null);
                              setNote({ ok: true, text: t("activity.sent", { who }) });
                            }}
                            onCancel={() => setMessaging(null)}
                          />
                        </td>
                      </tr>
                    )}
                  </Fragment>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function MessageBox({
  session,
  who,
  onSent,
  onCancel,
}: {
  session: Session;
  who: string;
  onSent(): void;
  onCancel(): void;
}) {
  const { t } = useTranslation("teacher");
  const [text, setText] = useState("");
  const send = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.POST("/api/sessions/{session_id}/teacher-messages", {
          params: { path: { session_id: session.id } },
          body: { text },
        }),
      ),
    onSuccess: onSent,
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (text.trim()) send.mutate();
  };
  return (
    <form className="t-form t-message" onSubmit={submit}>
      <Field label={t("activity.messageLabel", { who })} hint={t("activity.messageHint")}>
        {({ id, describedBy }) => (
          <textarea
            id={id}
            aria-describedby={describedBy}
            rows={2}
            value={text}
            autoFocus
            onChange={(event) => setText(event.target.value)}
            onKeyDown={(event) => {
              if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) submit(event);
              if (event.key === "Escape") onCancel();
            }}
          />
        )}
      </Field>
      <ErrorBox error={send.error} />
      <div className="row">
        <button type="submit" disabled={send.isPending || !text.trim()}>
          {t("activity.send")}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          {t("cancel")}
        </button>
      </div>
    </form>
  );
}
