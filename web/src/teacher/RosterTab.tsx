// Roster: the course's members; adding students from pasted e-mails or a CSV file (each gets
// an account, a place in the course and a course token, shown this once with its connect
// line); re-issuing a student's token; removing a member.
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type ChangeEvent, type FormEvent, useEffect, useRef, useState } from "react";
import { type TFunction } from "i18next";
import { useTranslation } from "react-i18next";
import { api, type Schemas, unwrap } from "../api/client";
import { useAuth } from "../auth";
import { download, ErrorBox, Loading } from "../components/common";
import { formatTime } from "../format";
import { type Course, keys, type Member, useCourseContext, useMembers } from "./queries";
import { type ConnectLine, connectLinesCsv, fileName, rosterEmails } from "./roster";
import { ConfirmDialog, Field, LiveStatus, SecretLines } from "./ui";

type Provisioned = Schemas["ProvisionedOut"];

/** Tokens just issued, shown until dismissed (they cannot be read again). */
interface Issued {
  kind: "added" | "reissued";
  rows: Provisioned[];
}

export function RosterTab() {
  const { t } = useTranslation("teacher");
  const { course } = useCourseContext();
  const members = useMembers(course.id);
  const [issued, setIssued] = useState<Issued | null>(null);
  const students = (members.data ?? []).filter((m) => m.role === "student").length;
  return (
    <section aria-labelledby="roster-title">
      <h2 id="roster-title" className="visually-hidden">
        {t("tabs.roster")}
      </h2>
      <LiveStatus className="visually-hidden">{issued ? issuedSummary(t, issued) : ""}</LiveStatus>
      {issued && <IssuedPanel course={course} issued={issued} onDismiss={() => setIssued(null)} />}
      <AddStudents course={course} onAdded={(rows) => setIssued({ kind: "added", rows })} />
      <section className="panel" aria-labelledby="members-title">
        <div className="t-panel-head">
          <h3 id="members-title" className="t-panel-title">
            {t("roster.members")}
          </h3>
          {members.data && (
            <span className="muted">
              {t("roster.counts", { count: members.data.length, students })}
            </span>
          )}
        </div>
        {members.isPending && <Loading />}
        <ErrorBox error={members.error} />
        {members.data && (
          <MembersTable
            course={course}
            members={members.data}
            onReissued={(row) => setIssued({ kind: "reissued", rows: [row] })}
          />
        )}
      </section>
    </section>
  );
}

function AddStudents({ course, onAdded }: { course: Course; onAdded(rows: Provisioned[]): void }) {
  const { t } = useTranslation("teacher");
  const client = useQueryClient();
  const [roster, setRoster] = useState("");
  const [read, setRead] = useState<string | null>(null);
  const [readError, setReadError] = useState<unknown>(null);
  const count = rosterEmails(roster).length;
  const add = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.POST("/api/courses/{course_id}/students", {
          params: { path: { course_id: course.id } },
          body: { roster },
        }),
      ),
    onSuccess: (rows) => {
      onAdded(rows);
      setRoster("");
      setRead(null);
      void client.invalidateQueries({ queryKey: keys.members(course.id) });
    },
  });
  const readFile = async (event: ChangeEvent<HTMLInputElement>) => {
    const file = event.target.files?.[0];
    setReadError(null);
    if (!file) return;
    try {
      if (file.size > 500_000) throw new Error(t("roster.fileTooLarge"));
      setRoster(await readText(file));
      setRead(file.name);
    } catch (error) {
      setReadError(error);
    } finally {
      event.target.value = "";
    }
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate();
  };
  return (
    <section className="panel" aria-labelledby="add-students-title">
      <h3 id="add-students-title" className="t-panel-title">
        {t("roster.add")}
      </h3>
      <form onSubmit={submit} className="t-form">
        <Field label={t("roster.rosterLabel")} hint={t("roster.rosterHint")}>
          {({ id, describedBy }) => (
            <textarea
              id={id}
              aria-describedby={describedBy}
              rows={5}
              value={roster}
              onChange={(event) => setRoster(event.target.value)}
              spellCheck={false}
              placeholder={"ann@school.edu,Ann Lee\nbob@school.edu"}
              className="mono"
            />
          )}
        </Field>
        <div className="t-form-row">
          <Field label={t("roster.fileLabel")}>
            {({ id }) => (
              <input
                id={id}
                type="file"
                accept=".csv,.txt,text/csv,text/plain"
                onChange={(event) => void readFile(event)}
              />
            )}
          </Field>
          <div className="t-actions-end">
            <span className="muted" aria-live="polite">
              {roster.trim() ? t("roster.found", { count }) : ""}
            </span>
            <button type="submit" disabled={add.isPending || !roster.trim()}>
              {add.isPending ? t("roster.adding") : t("roster.addButton")}
            </button>
          </div>
        </div>
        <LiveStatus>{read ? t("roster.fileRead", { name: read }) : null}</LiveStatus>
      </form>
      <ErrorBox error={readError} />
      <ErrorBox error={add.error} />
    </section>
  );
}

function issuedSummary(t: TFunction<"teacher">, issued: Issued): string {
  if (issued.kind === "reissued") {
    return t("roster.reissuedSummary", { email: issued.rows[0]?.user.email ?? "" });
  }
  return t("roster.addedSummary", {
    count: issued.rows.length,
    created: issued.rows.filter((row) => row.created).length,
    tokens: issued.rows.filter((row) => row.token).length,
  });
}

/** A file's text (UTF-8). */
function readText(file: File): Promise<string> {
  if (typeof file.text === "function") return file.text();
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result ?? ""));
    reader.onerror = () => reject(reader.error ?? new Error("cannot read the file"));
    reader.readAsText(file);
  });
}

function IssuedPanel({
  course,
  issued,
  onDismiss,
}: {
  course: Course;
  issued: Issued;
  onDismiss(): void;
}) {
  const { t } = useTranslation("teacher");
  const lines: ConnectLine[] = issued.rows
    .filter((row) => row.token)
    .map((row) => ({
      email: row.user.email,
      name: row.user.name,
      token: row.token ?? "",
      connect: row.connect ?? "",
    }));
  const kept = issued.rows.length - lines.length;
  const title = issued.kind === "added" ? t("roster.addedTitle") : t("roster.reissuedTitle");
  return (
    <section className="panel t-issued" aria-labelledby="issued-title">
      <div className="t-panel-head">
        <h3 id="issued-title" className="t-panel-title">
          {title}
        </h3>
        <div className="row">
          <button
            type="button"
            disabled={lines.length === 0}
            onClick={() =>
              download(fileName(course.name, "connect-lines", "csv"), connectLinesCsv(lines), "text/csv;charset=utf-8")
            }
          >
            {t("roster.downloadCsv")}
          </button>
          <button type="button" className="secondary" onClick={onDismiss}>
            {t("roster.dismiss")}
          </button>
        </div>
      </div>
      <p>{issuedSummary(t, issued)}</p>
      <p className="notice">{t("roster.shownOnce")}</p>
      <div className="t-table-wrap">
        <table className="t-table">
          <thead>
            <tr>
              <th scope="col">{t("roster.email")}</th>
              <th scope="col">{t("roster.name")}</th>
              <th scope="col">{t("roster.account")}</th>
              <th scope="col">{t("roster.tokenAndConnect")}</th>
            </tr>
          </thead>
          <tbody>
            {issued.rows.map((row) => (
              <tr key={row.user.id}>
                <th scope="row">{row.user.email}</th>
                <td>{row.user.name}</td>
                <td>
                  {issued.kind === "reissued" ? (
                    <span className="badge">{t("roster.reissued")}</span>
                  ) : row.created ? (
                    <span className="badge ok">{t("roster.newAccount")}</span>
                  ) : (
                    <span className="badge">{t("roster.existingAccount")}</span>
                  )}
                </td>
                <td>
                  {row.token ? (
                    <SecretLines token={row.token} connect={row.connect} />
                  ) : (
                    <span className="muted">{t("roster.alreadyHasToken")}</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {kept > 0 && <p className="muted">{t("roster.keptNote", { count: kept })}</p>}
    </section>
  );
}

type Pending = { action: "remove" | "reissue"; member: Member } | null;

function MembersTable({
  course,
  members,
  onReissued,
}: {
  course: Course;
  members: Member[];
  onReissued(row: Provisioned): void;
}) {
  const { t } = useTranslation("teacher");
  const { me } = useAuth();
  const client = useQueryClient();
  const [pending, setPending] = useState<Pending>(null);
  const [done, setDone] = useState("");
  const table = useRef<HTMLTableElement>(null);
  const [removals, setRemovals] = useState(0);
  // the button that opened the dialog went with its row: focus its table instead (after the
  // dialog closed, which runs first, being a child)
  useEffect(() => {
    if (removals > 0) table.current?.focus();
  }, [removals]);
  const remove = useMutation({
    mutationFn: async (member: Member) => {
      unwrap(
        await api.DELETE("/api/courses/{course_id}/members/{user_id}", {
          params: { path: { course_id: course.id, user_id: member.user.id } },
        }),
      );
      return member;
    },
    onSuccess: async (member) => {
      await client.invalidateQueries({ queryKey: keys.members(course.id) });
      setPending(null);
      setDone(t("roster.removed", { email: member.user.email }));
      setRemovals((n) => n + 1);
    },
  });
  const reissue = useMutation({
    mutationFn: async (member: Member) => {
      const issued = unwrap(
        await api.POST("/api/courses/{course_id}/students/{user_id}/token", {
          params: { path: { course_id: course.id, user_id: member.user.id } },
        }),
      );
      return { member, issued };
    },
    onSuccess: ({ member, issued }) => {
      setPending(null);
      setDone("");
      onReissued({
        user: member.user,
        created: false,
        token: issued.token,
        connect: issued.connect ?? null,
      });
    },
  });
  const close = () => {
    setPending(null);
    remove.reset();
    reissue.reset();
  };
  const email = pending?.member.user.email ?? "";
  return (
    <>
      <LiveStatus>{done}</LiveStatus>
      {members.length === 0 ? (
        <p className="muted">{t("roster.noMembers")}</p>
      ) : (
        <div className="t-table-wrap">
          <table className="t-table" ref={table} tabIndex={-1} aria-labelledby="members-title">
            <thead>
              <tr>
                <th scope="col">{t("roster.email")}</th>
                <th scope="col">{t("roster.name")}</th>
                <th scope="col">{t("roster.role")}</th>
                <th scope="col">{t("roster.active")}</th>
                <th scope="col">{t("roster.added")}</th>
                <th scope="col">
                  <span className="visually-hidden">{t("actions")}</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {members.map((member) => (
                <tr key={member.user.id}>
                  <th scope="row" className="t-cell-email">
                    {member.user.email}
                  </th>
                  <td>{member.user.name}</td>
                  <td>{t(`roles.${member.role === "teacher" ? "teacher" : "student"}`)}</td>
                  <td>
                    {member.user.active ? (
                      <span className="badge ok">{t("roster.isActive")}</span>
                    ) : (
                      <span className="badge bad">{t("roster.deactivated")}</span>
                    )}
                  </td>
                  <td className="t-nowrap">{formatTime(member.added_at)}</td>
                  <td className="t-row-actions">
                    {member.role === "student" && (
                      <button
                        type="button"
                        className="secondary small"
                        onClick={() => setPending({ action: "reissue", member })}
                        aria-label={t("named", { action: t("roster.reissue"), who: member.user.email })}
                      >
                        {t("roster.reissue")}
                      </button>
                    )}
                    {member.user.id !== me?.id && (
                      <button
                        type="button"
                        className="danger small"
                        onClick={() => setPending({ action: "remove", member })}
                        aria-label={t("named", { action: t("roster.remove"), who: member.user.email })}
                      >
                        {t("roster.remove")}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ConfirmDialog
        open={pending?.action === "remove"}
        title={t("roster.removeTitle", { email })}
        confirm={t("roster.removeConfirm")}
        danger
        pending={remove.isPending}
        error={remove.error}
        onConfirm={() => pending && remove.mutate(pending.member)}
        onCancel={close}
      >
        <p>{t("roster.removeText")}</p>
      </ConfirmDialog>
      <ConfirmDialog
        open={pending?.action === "reissue"}
        title={t("roster.reissueTitle", { email })}
        confirm={t("roster.reissueConfirm")}
        pending={reissue.isPending}
        error={reissue.error}
        onConfirm={() => pending && reissue.mutate(pending.member)}
        onCancel={close}
      >
        <p>{t("roster.reissueText")}</p>
      </ConfirmDialog>
    </>
  );
}
