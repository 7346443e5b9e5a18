// The student's sessions, most recently active first: open one, start one (in a course, with
// an optional title and runtime), rename one in place, delete one after a confirmation.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, type KeyboardEvent, useEffect, useId, useRef, useState } from "react";
import { useTranslation } from "react-i18next";
import { Link, useNavigate } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { ErrorBox, Loading, PageTitle } from "../components/common";
import { courseName, type Course, keys, type Session, useCourses, useServer } from "./queries";
import { Ago } from "./ui";

const RUNTIMES = ["serial", "batch", "lanes"] as const;
type Runtime = Schemas["SessionBody"]["runtime"];

function NewSession({ courses, onDone }: { courses: Course[]; onDone?: () => void }) {
  const { t } = useTranslation("student");
  const navigate = useNavigate();
  const client = useQueryClient();
  const server = useServer();
  const [courseId, setCourseId] = useState(courses[0]?.id ?? "");
  const [title, setTitle] = useState("");
  const [runtime, setRuntime] = useState<Runtime>("");
  const id = useId();
  const create = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.POST("/api/sessions", {
          body: { course_id: courseId, title: title.trim(), runtime },
        }),
      ),
    onSuccess: (session) => {
      void client.invalidateQueries({ queryKey: keys.sessions, exact: true });
      onDone?.();
      navigate(`/sessions/${encodeURIComponent(session.id)}`);
    },
  });
  const course = courses.find((c) => c.id === courseId);
  const inherited = course?.runtime || server.data?.runtime || "";
  const runtimes = server.data?.runtimes.length ? server.data.runtimes : RUNTIMES;

  function submit(event: FormEvent) {
    event.preventDefault();
    if (courseId) create.mutate();
  }

  return (
    <form className="panel new-session" onSubmit={submit} aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>{t("sessions.newTitle")}</h2>
      <div className="form-grid">
        <label>
          {t("sessions.course")}
          <select value={courseId} onChange={(e) => setCourseId(e.target.value)} required>
            {courses.map((c) => (
              <option key={c.id} value={c.id}>
                {courseName(c)}
              </option>
            ))}
          </select>
        </label>
        <label>
          {t("sessions.titleLabel")}
          <input
            value={title}
            maxLength={500}
            placeholder={t("sessions.titlePlaceholder")}
            onChange={(e) => setTitle(e.target.value)}
          />
        </label>
        <label>
          {t("sessions.runtime")}
          <select
            value={runtime}
            onChange={(e) => setRuntime(e.target.value as Runtime)}
            aria-describedby={`${id}-runtime`}
          >
            <option value="">
              {inherited
                ? t("sessions.runtimeDefaultIs", {
                    runtime: t(`runtime.${inherited}`, { defaultValue: inherited }),
                  })
                : t("sessions.runtimeDefault")}
            </option>
            {runtimes.map((name) => (
              <option key={name} value={name}>
                {t(`runtime.${name}`, { defaultValue: name })}
              </option>
            ))}
          </select>
        </label>
      </div>
      <p id={`${id}-runtime`} className="muted small-text">
        {t(`runtimeHelp.${runtime || inherited || "serial"}`, { defaultValue: "" })}
      </p>
      <ErrorBox error={create.error} />
      <div className="row">
        <button type="submit" disabled={!courseId || create.isPending}>
          {t("sessions.create")}
        </button>
      </div>
    </form>
  );
}

function RenameForm({ session, onDone }: { session: Session; onDone(): void }) {
  const { t } = useTranslation("student");
  const client = useQueryClient();
  const [title, setTitle] = useState(session.title);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    input.current?.focus();
    input.current?.select();
  }, []);
  const rename = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.PATCH("/api/sessions/{session_id}", {
          params: { path: { session_id: session.id } },
          body: { title: title.trim() },
        }),
      ),
    onSuccess: (renamed) => {
      client.setQueryData(keys.session(session.id), renamed);
      void client.invalidateQueries({ queryKey: keys.sessions, exact: true });
      onDone();
    },
  });
  function onKeyDown(event: KeyboardEvent) {
    if (event.key === "Escape") {
      event.preventDefault();
      onDone();
    }
  }
  return (
    <form
      className="rename"
      onSubmit={(event) => {
        event.preventDefault();
        if (title.trim()) rename.mutate();
      }}
    >
      <div className="row">
        <label className="grow">
          <span className="visually-hidden">{t("sessions.newName")}</span>
          <input
            ref={input}
            value={title}
            maxLength={500}
            required
            onChange={(e) => setTitle(e.target.value)}
            onKeyDown={onKeyDown}
          />
        </label>
        <button type="submit" className="small" disabled={!title.trim() || rename.isPending}>
          {t("sessions.saveName")}
        </button>
        <button type="button" className="secondary small" onClick={onDone}>
          {t("sessions.cancel")}
        </button>
      </div>
      <ErrorBox error={rename.error} />
    </form>
  );
}

function DeleteConfirm({ session, onDone }: { session: Session; onDone(): void }) {
  const { t } = useTranslation("student");
  const client = useQueryClient();
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => cancel.current?.focus(), []);
  const remove = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.DELETE("/api/sessions/{session_id}", {
          params: { path: { session_id: session.id } },
        }),
      ),
    onSuccess: () => {
      client.setQueryData<Session[]>(keys.sessions, (list) =>
        list?.filter((s) => s.id !== session.id),
      );
      client.removeQueries({ queryKey: keys.session(session.id) });
      void client.invalidateQueries({ queryKey: keys.sessions, exact: true });
      onDone();
    },
  });
  return (
    <div className="confirm" role="group" aria-label={t("sessions.deleteQuestion")}>
      <p>
        <strong>{t("sessions.deleteQuestion")}</strong> {t("sessions.deleteWarning")}
      </p>
      <div className="row">
        <button
          type="button"
          className="danger-solid small"
          onClick={() => remove.mutate()}
          disabled={remove.isPending}
        >
          {t("sessions.deleteConfirm")}
        </button>
        <button ref={cancel} type="button" className="secondary small" onClick={onDone}>
          {t("sessions.cancel")}
        </button>
      </div>
      <ErrorBox error={remove.error} />
    </div>
  );
}

function SessionRow({
  session,
  course,
  defaultRuntime,
}: {
  session: Session;
  course?: Course;
  defaultRuntime: string;
}) {
  const { t } = useTranslation("student");
  const runtime = session.runtime || defaultRuntime;
  const [mode, setMode] = useState<"view" | "rename" | "delete">("view");
  const title = session.title || t("sessions.untitled");
  return (
    <li className={`session-row ${session.active ? "active" : ""}`}>
      <div className="session-main">
        {mode === "rename" ? (
          <RenameForm session={session} onDone={() => setMode("view")} />
        ) : (
          <Link to={`/sessions/${encodeURIComponent(session.id)}`} className="session-link">
            {title}
          </Link>
        )}
        <div className="session-meta muted">
          {session.active && <span className="badge busy">{t("sessions.active")}</span>}
          <span>{courseName(course, session.course_id)}</span>
          {runtime && <span>{t(`runtime.${runtime}`, { defaultValue: runtime })}</span>}
          <span>
            {t("sessions.updated")} <Ago ts={session.updated_at} />
          </span>
        </div>
        {mode === "delete" && <DeleteConfirm session={session} onDone={() => setMode("view")} />}
      </div>
      {mode === "view" && (
        <div className="session-actions">
          <button
            type="button"
            className="secondary small"
            aria-label={t("sessions.renameName", { title })}
            onClick={() => setMode("rename")}
          >
            {t("sessions.rename")}
          </button>
          <button
            type="button"
            className="danger small"
            aria-label={t("sessions.deleteName", { title })}
            onClick={() => setMode("delete")}
          >
            {t("sessions.delete")}
          </button>
        </div>
      )}
    </li>
  );
}

export function SessionsPage() {
  const { t } = useTranslation("student");
  const courses = useCourses();
  const server = useServer();
  const sessions = useQuery({
    queryKey: keys.sessions,
    queryFn: async () => unwrap(await api.GET("/api/sessions", { params: { query: { limit: 500 } } })),
    refetchInterval: 5000,
  });
  const sorted = [...(sessions.data ?? [])].sort((a, b) => b.updated_at - a.updated_at);
  const byId = new Map((courses.data ?? []).map((c) => [c.id, c]));
  const myCourses = (courses.data ?? []).filter((c) => c.role !== "teacher");
  const choices = myCourses.length ? myCourses : (courses.data ?? []);

  return (
    <>
      <PageTitle title={t("sessions.title")} />
      {courses.isPending ? (
        <Loading />
      ) : courses.error ? (
        <ErrorBox error={courses.error} />
      ) : choices.length === 0 ? (
        <p className="notice">{t("sessions.noCourse")}</p>
      ) : (
        <NewSession courses={choices} />
      )}

      <section aria-labelledby="my-sessions">
        <h2 id="my-sessions">{t("sessions.mine")}</h2>
        {sessions.isPending && <Loading />}
        <ErrorBox error={sessions.error} />
        {sessions.data && sorted.length === 0 && <p className="muted">{t("sessions.empty")}</p>}
        {sorted.length > 0 && (
          <ul className="session-list">
            {sorted.map((session) => (
              <SessionRow
                key={session.id}
                session={session}
                course={byId.get(session.course_id)}
                defaultRuntime={server.data?.runtime ?? ""}
              />
            ))}
          </ul>
        )}
      </section>
    </>
  );
}
