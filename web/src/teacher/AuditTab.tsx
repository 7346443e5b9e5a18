// Audit: the course's tamper-evident records, searched by student, kind and time, a page at a
// time; a record's full JSON in a dialog; exports (JSONL, CSV) with the same filters; and the
// verification of the hash chain.
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { type FormEvent, useId, useMemo, useState } from "react";
import { useTranslation } from "react-i18next";
import { api, type Schemas, unwrap } from "../api/client";
import { ErrorBox, Loading } from "../components/common";
import { formatNumber, formatTime } from "../format";
import { type AuditFilters, auditQuery, emptyFilters, exportUrl, KNOWN_KINDS } from "./audit";
import { emailsOf, keys, useCourseContext, useMembers } from "./queries";
import { Dialog, Field, LiveStatus } from "./ui";

type Record_ = Schemas["AuditOut"];

export const PAGE = 100;

export function AuditTab() {
  const { t } = useTranslation("teacher");
  const { course } = useCourseContext();
  const members = useMembers(course.id);
  const [draft, setDraft] = useState<AuditFilters>(emptyFilters);
  const [filters, setFilters] = useState<AuditFilters>(emptyFilters);
  const [open, setOpen] = useState<Record_ | null>(null);
  const kindsId = useId();
  const query = auditQuery(filters);
  const records = useInfiniteQuery({
    queryKey: keys.audit(course.id, query),
    initialPageParam: undefined as number | undefined,
    queryFn: async ({ pageParam }) =>
      unwrap(
        await api.GET("/api/courses/{course_id}/audit", {
          params: {
            path: { course_id: course.id },
            query: { ...query, after_id: pageParam, limit: PAGE },
          },
        }),
      ),
    getNextPageParam: (last) => (last.length < PAGE ? undefined : last[last.length - 1]?.id),
  });
  const emails = useMemo(() => emailsOf(members.data), [members.data]);
  const actor = (id: string) => (id ? (emails.get(id) ?? id) : t("audit.system"));
  const rows = records.data?.pages.flat() ?? [];
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setFilters(draft);
  };
  const set = (patch: Partial<AuditFilters>) => setDraft({ ...draft, ...patch });

  return (
    <section aria-labelledby="audit-title">
      <h2 id="audit-title" className="visually-hidden">
        {t("tabs.audit")}
      </h2>
      <ChainPanel courseId={course.id} />
      <div className="panel">
        <form className="t-form-row" onSubmit={submit} aria-label={t("audit.search")}>
          <Field label={t("audit.member")}>
            {({ id }) => (
              <select id={id} value={draft.actorId} onChange={(e) => set({ actorId: e.target.value })}>
                <option value="">{t("audit.anyone")}</option>
                {(["student", "teacher"] as const).map((role) => {
                  const group = (members.data ?? []).filter((m) => m.role === role);
                  return group.length === 0 ? null : (
                    <optgroup key={role} label={t(`audit.${role}s`)}>
                      {group.map((m) => (
                        <option key={m.user.id} value={m.user.id}>
                          {m.user.email}
                        </option>
                      ))}
                    </optgroup>
                  );
                })}
              </select>
            )}
          </Field>
          <Field label={t("audit.kind")}>
            {({ id }) => (
              <>
                <input
                  id={id}
                  list={kindsId}
                  value={draft.kind}
                  onChange={(e) => set({ kind: e.target.value })}
                  placeholder={t("audit.anyKind")}
                  autoComplete="off"
                  spellCheck={false}
                  size={18}
                />
                <datalist id={kindsId}>
                  {KNOWN_KINDS.map((kind) => (
                    <option key={kind} value={kind} />
                  ))}
                </datalist>
              </>
            )}
          </Field>
          <Field label={t("audit.since")}>
            {({ id }) => (
              <input
                id={id}
                type="datetime-local"
                value={draft.since}
                onChange={(e) => set({ since: e.target.value })}
              />
            )}
          </Field>
          <Field label={t("audit.until")}>
            {({ id }) => (
              <input
                id={id}
                type="datetime-local"
                value={draft.until}
                onChange={(e) => set({ until: e.target.value })}
              />
            )}
          </Field>
          <div className="row">
            <button type="submit">{t("audit.searchButton")}</button>
            <button
              type="button"
              className="secondary"
              onClick={() => {
                setDraft(emptyFilters);
                setFilters(emptyFilters);
              }}
            >
              {t("audit.reset")}
            </button>
          </div>
        </form>
        <div className="row t-export">
          <span className="muted">{t("audit.exportLead")}</span>
          <a className="button secondary small" href={exportUrl(course.id, "jsonl", filters)} download>
            {t("audit.exportJsonl")}
          </a>
          <a className="button secondary small" href={exportUrl(course.id, "csv", filters)} download>
            {t("audit.exportCsv")}
          </a>
        </div>
      </div>
      <LiveStatus>
        {records.isSuccess &&
          (records.hasNextPage
            ? t("audit.shownMore", { count: rows.length })
            : t("audit.shown", { count: rows.length }))}
      </LiveStatus>
      {records.isPending && <Loading />}
      <ErrorBox error={records.error} />
      {rows.length > 0 && (
        <div className="t-table-wrap panel t-flush">
          <table className="t-table t-audit">
            <thead>
              <tr>
                <th scope="col">{t("audit.seq")}</th>
                <th scope="col">{t("audit.time")}</th>
                <th scope="col">{t("audit.actor")}</th>
                <th scope="col">{t("audit.kind")}</th>
                <th scope="col">{t("audit.subject")}</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((record) => (
                <tr key={record.id} className="t-clickable" onClick={() => setOpen(record)}>
                  <td>
                    <button
                      type="button"
                      className="t-link-button"
                      aria-label={t("audit.showRecord", { seq: record.seq })}
                      onClick={(event) => {
                        event.stopPropagation();
                        setOpen(record);
                      }}
                    >
                      #{record.seq}
                    </button>
                  </td>
                  <td className="t-nowrap">{formatTime(record.ts)}</td>
                  <td className="t-cell-email">{actor(record.actor_id)}</td>
                  <td>
                    <code>{record.kind}</code>
                  </td>
                  <td className="t-cell-subject mono">{record.subject}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {records.hasNextPage && (
        <p>
          <button
            type="button"
            className="secondary"
            disabled={records.isFetchingNextPage}
            onClick={() => void records.fetchNextPage()}
          >
            {records.isFetchingNextPage ? t("loadingMore") : t("audit.loadMore")}
          </button>
        </p>
      )}
      <Dialog
        open={open !== null}
        title={open ? t("audit.recordTitle", { seq: open.seq, kind: open.kind }) : ""}
        onClose={() => setOpen(null)}
        wide
      >
        {open && (
          <>
            <dl className="t-record-meta">
              <dt>{t("audit.time")}</dt>
              <dd>{formatTime(open.ts)}</dd>
              <dt>{t("audit.actor")}</dt>
              <dd>{actor(open.actor_id)}</dd>
            </dl>
            <pre className="t-json" tabIndex={0} aria-label={t("audit.json")}>
              {JSON.stringify(open, null, 2)}
            </pre>
          </>
        )}
      </Dialog>
    </section>
  );
}

function ChainPanel({ courseId }: { courseId: string }) {
  const { t } = useTranslation("teacher");
  const verify = useQuery({
    queryKey: keys.verify(courseId),
    queryFn: async () =>
      unwrap(
        await api.GET("/api/courses/{course_id}/audit/verify", {
          params: { path: { course_id: courseId } },
        }),
      ),
  });
  const chains = verify.data ?? [];
  const records = chains.reduce((sum, c) => sum + c.records, 0);
  const broken = chains.filter((c) => !c.ok);
  return (
    <section className="panel t-chain" aria-labelledby="chain-title">
      <div className="t-panel-head">
        <h3 id="chain-title" className="t-panel-title">
          {t("audit.chainTitle")}
        </h3>
        <button
          type="button"
          className="secondary small"
          disabled={verify.isFetching}
          onClick={() => void verify.refetch()}
        >
          {t("audit.verify")}
        </button>
      </div>
      <LiveStatus>
        {verify.isFetching ? (
          t("audit.verifying")
        ) : verify.isSuccess && broken.length === 0 ? (
          <>
            <span className="badge ok t-badge-lg">{t("audit.chainOk")}</span>{" "}
            {t("audit.chainOkText", { count: records, records: formatNumber(records) })}
          </>
        ) : verify.isSuccess ? (
          broken.map((chain) => (
            <span key={chain.chain} className="t-broken">
              <span className="badge bad t-badge-lg">{t("audit.chainBroken")}</span>{" "}
              {chain.first_bad_seq !== null
                ? t("audit.firstBad", { seq: chain.first_bad_seq })
                : null}{" "}
              {chain.problem}
            </span>
          ))
        ) : null}
      </LiveStatus>
      <ErrorBox error={verify.error} />
    </section>
  );
}
