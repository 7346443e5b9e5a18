// The Usage tab's budget panels: which budgets are nearly used up (80% or more), and the
// course's budgets (the whole course, every student's default, one student's) to set or remove.
import { useMutation, useQueries, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useMemo, useRef, useState } from "react";
import { useTranslation } from "react-i18next";
import { api, unwrap } from "../api/client";
import { ErrorBox, Loading } from "../components/common";
import { formatNumber, formatTime, formatUsd } from "../format";
import {
  type Budget,
  type BudgetBody,
  type BudgetForm,
  budgetBody,
  budgetForm,
  emptyBudgetForm,
  type Period,
  sortBudgets,
  targetKey,
} from "./budgets";
import { type Course, emailsOf, keys, type Member } from "./queries";
import { ConfirmDialog, Field, LiveStatus } from "./ui";
import { nearBudget } from "./usage";

const PERIODS: Period[] = ["day", "week", "course"];

interface Props {
  course: Course;
  members: Member[] | undefined;
}

export function NearBudgetPanel({ course, members }: Props) {
  const { t } = useTranslation("teacher");
  const students = (members ?? []).filter((m) => m.role === "student");
  const results = useQueries({
    queries: students.map((m) => ({
      queryKey: keys.remaining(course.id, m.user.id),
      queryFn: async () =>
        unwrap(
          await api.GET("/api/courses/{course_id}/remaining", {
            params: { path: { course_id: course.id }, query: { user_id: m.user.id } },
          }),
        ),
      staleTime: 30_000,
    })),
  });
  const loading = results.some((r) => r.isPending);
  const error = results.find((r) => r.error)?.error;
  const near = nearBudget(
    students.map((m, i) => ({ userId: m.user.id, rows: results[i]?.data ?? [] })),
  );
  const emails = emailsOf(members);
  return (
    <section className="panel" aria-labelledby="near-title">
      <h3 id="near-title" className="t-panel-title">
        {t("budgets.nearTitle")}
      </h3>
      {loading && students.length > 0 && <Loading />}
      <ErrorBox error={error} />
      {!loading && near.length === 0 && <p className="muted">{t("budgets.nearNone")}</p>}
      {near.length > 0 && (
        <div className="t-table-wrap">
          <table className="t-table">
            <thead>
              <tr>
                <th scope="col">{t("budgets.appliesTo")}</th>
                <th scope="col">{t("budgets.period")}</th>
                <th scope="col">{t("budgets.used")}</th>
                <th scope="col">{t("budgets.resets")}</th>
              </tr>
            </thead>
            <tbody>
              {near.map((item) => {
                const percent = Math.round(item.fraction * 100);
                return (
                  <tr key={`${item.budgetId}:${item.userId ?? ""}`}>
                    <th scope="row">
                      {item.userId === null
                        ? t("budgets.wholeCourse")
                        : (emails.get(item.userId) ?? item.userId)}
                    </th>
                    <td>{t(`budgets.periods.${item.period}`, { defaultValue: item.period })}</td>
                    <td className="t-meter-cell">
                      <div
                        className={item.fraction >= 1 ? "meter high" : "meter warn"}
                        role="meter"
                        aria-valuemin={0}
                        aria-valuemax={100}
                        aria-valuenow={Math.min(percent, 100)}
                        aria-valuetext={t("budgets.percentUsed", { percent })}
                        aria-label={t("budgets.usedOf")}
                      >
                        <span style={{ width: `${Math.min(percent, 100)}%` }} />
                      </div>
                      <span className={item.fraction >= 1 ? "t-bad" : "t-warn"}>
                        {t("budgets.percentUsed", { percent })}
                      </span>{" "}
                      <span className="muted">
                        {[
                          item.maxTokens !== null
                            ? t("budgets.tokensOf", {
                                used: formatNumber(item.usedTokens),
                                max: formatNumber(item.maxTokens),
                              })
                            : null,
                          item.maxCostUsd !== null
                            ? t("budgets.costOf", {
                                used: formatUsd(item.usedCostUsd),
                                max: formatUsd(item.maxCostUsd),
                              })
                            : null,
                        ]
                          .filter(Boolean)
                          .join(" · ")}
                      </span>
                    </td>
                    <td>{item.resetsAt ? formatTime(item.resetsAt) : t("budgets.never")}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function BudgetsPanel({ course, members }: Props) {
  const { t } = useTranslation("teacher");
  const client = useQueryClient();
  const formId = useId();
  const firstField = useRef<HTMLSelectElement>(null);
  const [form, setForm] = useState<BudgetForm>(emptyBudgetForm);
  const [invalid, setInvalid] = useState<string[]>([]);
  const [status, setStatus] = useState("");
  const [deleting, setDeleting] = useState<Budget | null>(null);
  const budgets = useQuery({
    queryKey: keys.budgets(course.id),
    queryFn: async () =>
      unwrap(
        await api.GET("/api/courses/{course_id}/budgets", {
          params: { path: { course_id: course.id } },
        }),
      ),
  });
  const emails = useMemo(() => emailsOf(members), [members]);
  const students = (members ?? []).filter((m) => m.role === "student");
  const targetLabel = (b: Pick<Budget, "scope" | "user_id">) =>
    b.scope === "course"
      ? t("budgets.wholeCourse")
      : b.user_id
        ? (emails.get(b.user_id) ?? b.user_id)
        : t("budgets.everyStudent");
  const refresh = () => {
    void client.invalidateQueries({ queryKey: keys.budgets(course.id) });
    void client.invalidateQueries({ queryKey: ["course", course.id, "remaining"] });
  };
  const save = useMutation({
    mutationFn: async (body: BudgetBody) =>
      unwrap(
        await api.PUT("/api/courses/{course_id}/budgets", {
          params: { path: { course_id: course.id } },
          body,
        }),
      ),
    onSuccess: (budget) => {
      setStatus(t("budgets.saved", { target: targetLabel(budget) }));
      setForm(emptyBudgetForm);
      refresh();
    },
  });
  const remove = useMutation({
    mutationFn: async (budget: Budget) => {
      unwrap(
        await api.DELETE("/api/courses/{course_id}/budgets/{budget_id}", {
          params: { path: { course_id: course.id, budget_id: budget.id } },
        }),
      );
      return budget;
    },
    onSuccess: (budget) => {
      setDeleting(null);
      setStatus(t("budgets.deleted", { target: targetLabel(budget) }));
      refresh();
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setStatus("");
    const result = budgetBody(form);
    if ("invalid" in result) {
      setInvalid(result.invalid);
      return;
    }
    setInvalid([]);
    save.mutate(result.body);
  };
  const edit = (budget: Budget) => {
    setForm(budgetForm(budget));
    setInvalid([]);
    save.reset();
    firstField.current?.focus();
    firstField.current?.scrollIntoView({ block: "center" });
  };
  const set = (patch: Partial<BudgetForm>) => setForm({ ...form, ...patch });
  const existing = (budgets.data ?? []).find((b) => targetKey(b) === form.target);
  const limit = (value: number | null, format: (v: number) => string) =>
    value === null ? <span className="muted">—</span> : format(value);
  const numberField = (name: "maxTokens" | "maxCostUsd" | "requestsPerMinute" | "maxConcurrent") => (
    <Field label={t(`budgets.fields.${name}`)}>
      {({ id }) => (
        <input
          id={id}
          inputMode={name === "maxCostUsd" ? "decimal" : "numeric"}
          value={form[name]}
          aria-invalid={invalid.includes(name) || undefined}
          onChange={(event) => set({ [name]: event.target.value })}
          placeholder={t("budgets.noLimit")}
          size={10}
        />
      )}
    </Field>
  );
  return (
    <section className="panel" aria-labelledby="budgets-title">
      <h3 id="budgets-title" className="t-panel-title">
        {t("budgets.title")}
      </h3>
      <LiveStatus>{status}</LiveStatus>
      {budgets.isPending && <Loading />}
      <ErrorBox error={budgets.error} />
      {budgets.data && budgets.data.length === 0 && (
        <p className="muted">{t("budgets.none")}</p>
      )}
      {budgets.data && budgets.data.length > 0 && (
        <div className="t-table-wrap">
          <table className="t-table">
            <thead>
              <tr>
                <th scope="col">{t("budgets.appliesTo")}</th>
                <th scope="col">{t("budgets.period")}</th>
                <th scope="col">{t("budgets.fields.maxTokens")}</th>
                <th scope="col">{t("budgets.fields.maxCostUsd")}</th>
                <th scope="col">{t("budgets.fields.requestsPerMinute")}</th>
                <th scope="col">{t("budgets.fields.maxConcurrent")}</th>
                <th scope="col">{t("budgets.updated")}</th>
                <th scope="col">
                  <span className="visually-hidden">{t("actions")}</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {sortBudgets(budgets.data, (id) => emails.get(id) ?? id).map((budget) => {
                const exempt =
                  budget.max_tokens === null &&
                  budget.max_cost_usd === null &&
                  budget.requests_per_minute === null &&
                  budget.max_concurrent === null;
                return (
                  <tr key={budget.id}>
                    <th scope="row">{targetLabel(budget)}</th>
                    <td>
                      {t(`budgets.periods.${budget.period}`, { defaultValue: budget.period })}
                    </td>
                    {exempt ? (
                      <td colSpan={4} className="muted">
                        {t("budgets.exempt")}
                      </td>
                    ) : (
                      <>
                        <td>{limit(budget.max_tokens, formatNumber)}</td>
                        <td>{limit(budget.max_cost_usd, formatUsd)}</td>
                        <td>{limit(budget.requests_per_minute, formatNumber)}</td>
                        <td>{limit(budget.max_concurrent, formatNumber)}</td>
                      </>
                    )}
                    <td className="t-small">{formatTime(budget.updated_at)}</td>
                    <td className="t-row-actions">
                      <button
                        type="button"
                        className="secondary small"
                        onClick={() => edit(budget)}
                        aria-label={t("named", { action: t("budgets.edit"), who: targetLabel(budget) })}
                      >
                        {t("budgets.edit")}
                      </button>
                      <button
                        type="button"
                        className="danger small"
                        onClick={() => {
                          remove.reset();
                          setDeleting(budget);
                        }}
                        aria-label={t("named", { action: t("budgets.delete"), who: targetLabel(budget) })}
                      >
                        {t("budgets.delete")}
                      </button>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <h4 id={`${formId}-title`} className="t-subtitle">
        {t("budgets.setTitle")}
      </h4>
      <form className="t-form" onSubmit={submit} aria-labelledby={`${formId}-title`} noValidate>
        <div className="t-form-row">
          <Field label={t("budgets.appliesTo")}>
            {({ id }) => (
              <select
                id={id}
                ref={firstField}
                value={form.target}
                onChange={(event) => set({ target: event.target.value })}
              >
                <option value="course">{t("budgets.wholeCourse")}</option>
                <option value="student:">{t("budgets.everyStudent")}</option>
                {students.map((m) => (
                  <option key={m.user.id} value={`student:${m.user.id}`}>
                    {m.user.email}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label={t("budgets.period")}>
            {({ id }) => (
              <select
                id={id}
                value={form.period}
                onChange={(event) => set({ period: event.target.value as Period })}
              >
                {PERIODS.map((period) => (
                  <option key={period} value={period}>
                    {t(`budgets.periods.${period}`)}
                  </option>
                ))}
              </select>
            )}
          </Field>
          {numberField("maxTokens")}
          {numberField("maxCostUsd")}
          {numberField("requestsPerMinute")}
          {numberField("maxConcurrent")}
        </div>
        <p className="muted t-form-note">
          {existing ? t("budgets.replaces") : t("budgets.hint")}
        </p>
        {invalid.length > 0 && (
          <div role="alert" className="error-box">
            {t("budgets.invalid", {
              fields: invalid.map((name) => t(`budgets.fields.${name}`)).join(", "),
            })}
          </div>
        )}
        <ErrorBox error={save.error} />
        <div className="row">
          <button type="submit" disabled={save.isPending}>
            {t("budgets.save")}
          </button>
          <button
            type="button"
            className="secondary"
            onClick={() => {
              setForm(emptyBudgetForm);
              setInvalid([]);
              save.reset();
            }}
          >
            {t("budgets.clear")}
          </button>
        </div>
      </form>
      <ConfirmDialog
        open={deleting !== null}
        title={t("budgets.deleteTitle", { target: deleting ? targetLabel(deleting) : "" })}
        confirm={t("budgets.deleteConfirm")}
        danger
        pending={remove.isPending}
        error={remove.error}
        onConfirm={() => deleting && remove.mutate(deleting)}
        onCancel={() => setDeleting(null)}
      >
        <p>{t("budgets.deleteText")}</p>
      </ConfirmDialog>
    </section>
  );
}
