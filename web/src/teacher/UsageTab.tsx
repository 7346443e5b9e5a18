// Usage: tokens and cost per student and per day over a range of (UTC) days, as charts with
// tables beside them; budgets near their limit; and the course's budgets, to set or remove.
import { useQuery } from "@tanstack/react-query";
import { useMemo, useState } from "react";
import { useTranslation } from "react-i18next";
import { api, unwrap } from "../api/client";
import { ErrorBox, Loading } from "../components/common";
import { formatNumber, formatUsd } from "../format";
import { BudgetsPanel, NearBudgetPanel } from "./BudgetsPanel";
import { PerStudentChart, TokensPerDayChart } from "./charts";
import { emailsOf, keys, useCourseContext, useMembers } from "./queries";
import { Field } from "./ui";
import { defaultRange, grandTotal, OTHERS, tokensPerDay, totalsByStudent } from "./usage";

const CHART_STUDENTS = 15;

export function UsageTab() {
  const { t } = useTranslation("teacher");
  const { course } = useCourseContext();
  const members = useMembers(course.id);
  const [range, setRange] = useState(() => defaultRange(new Date()));
  const [mode, setMode] = useState<"stacked" | "total">("stacked");
  const usage = useQuery({
    queryKey: keys.usage(course.id, range.since, range.until),
    queryFn: async () =>
      unwrap(
        await api.GET("/api/courses/{course_id}/usage", {
          params: {
            path: { course_id: course.id },
            query: { since: range.since || undefined, until: range.until || undefined },
          },
        }),
      ),
    placeholderData: (previous) => previous,
  });
  const emails = useMemo(() => emailsOf(members.data), [members.data]);
  const labelOf = (userId: string) =>
    userId === OTHERS ? t("usage.others") : (emails.get(userId) ?? userId);
  const rows = usage.data ?? [];
  const students = useMemo(() => totalsByStudent(rows), [rows]);
  const daily = useMemo(() => tokensPerDay(rows, range), [rows, range]);
  const total = grandTotal(students);
  const reversed = range.since && range.until && range.since > range.until;

  return (
    <section aria-labelledby="usage-title">
      <h2 id="usage-title" className="visually-hidden">
        {t("tabs.usage")}
      </h2>
      <div className="panel">
        <form className="t-form-row" onSubmit={(event) => event.preventDefault()}>
          <Field label={t("usage.since")}>
            {({ id }) => (
              <input
                id={id}
                type="date"
                value={range.since}
                max={range.until || undefined}
                onChange={(event) => setRange({ ...range, since: event.target.value })}
              />
            )}
          </Field>
          <Field label={t("usage.until")}>
            {({ id }) => (
              <input
                id={id}
                type="date"
                value={range.until}
                min={range.since || undefined}
                onChange={(event) => setRange({ ...range, until: event.target.value })}
              />
            )}
          </Field>
          <p className="muted t-form-note">{t("usage.utcNote")}</p>
        </form>
        {reversed && <p className="notice">{t("usage.reversed")}</p>}
        <dl className="t-stats" aria-label={t("usage.totals")}>
          <div>
            <dt>{t("usage.tokens")}</dt>
            <dd>{formatNumber(total.tokens)}</dd>
          </div>
          <div>
            <dt>{t("usage.cost")}</dt>
            <dd>{formatUsd(total.costUsd)}</dd>
          </div>
          <div>
            <dt>{t("usage.requests")}</dt>
            <dd>{formatNumber(total.requests)}</dd>
          </div>
          <div>
            <dt>{t("usage.studentsUsing")}</dt>
            <dd>{formatNumber(students.length)}</dd>
          </div>
        </dl>
      </div>
      {usage.isPending && <Loading />}
      <ErrorBox error={usage.error} />
      {usage.isSuccess && rows.length === 0 && (
        <p className="panel muted" role="status">
          {t("usage.none")}
        </p>
      )}
      {rows.length > 0 && (
        <>
          <section className="panel" aria-labelledby="per-day-title">
            <div className="t-panel-head">
              <h3 id="per-day-title" className="t-panel-title">
                {t("usage.perDay")}
              </h3>
              <fieldset className="t-segmented">
                <legend className="visually-hidden">{t("usage.chartMode")}</legend>
                {(["stacked", "total"] as const).map((value) => (
                  <label key={value} className={mode === value ? "on" : undefined}>
                    <input
                      type="radio"
                      name="usage-mode"
                      value={value}
                      checked={mode === value}
                      onChange={() => setMode(value)}
                    />
                    {t(`usage.mode.${value}`)}
                  </label>
                ))}
              </fieldset>
            </div>
            <TokensPerDayChart
              daily={daily}
              labelOf={labelOf}
              mode={mode}
              label={
                mode === "stacked"
                  ? t("usage.perDayChartStacked", { from: daily.days[0], to: daily.days.at(-1) })
                  : t("usage.perDayChartTotal", { from: daily.days[0], to: daily.days.at(-1) })
              }
              totalLabel={t("usage.allStudents")}
            />
            <details className="t-details">
              <summary>{t("usage.perDayTable")}</summary>
              <div className="t-table-wrap">
                <table className="t-table t-numbers">
                  <caption className="visually-hidden">{t("usage.perDayTable")}</caption>
                  <thead>
                    <tr>
                      <th scope="col">{t("usage.day")}</th>
                      {daily.series.map((series) => (
                        <th scope="col" key={series.userId}>
                          {labelOf(series.userId)}
                        </th>
                      ))}
                      <th scope="col">{t("usage.total")}</th>
                      <th scope="col">{t("usage.cost")}</th>
                    </tr>
                  </thead>
                  <tbody>
                    {daily.days.map((day, i) => (
                      <tr key={day}>
                        <th scope="row">{day}</th>
                        {daily.series.map((series) => (
                          <td key={series.userId}>{formatNumber(series.tokens[i] ?? 0)}</td>
                        ))}
                        <td>{formatNumber(daily.totals[i] ?? 0)}</td>
                        <td>{formatUsd(daily.costs[i] ?? 0)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </details>
          </section>
          <section className="panel" aria-labelledby="per-student-title">
            <h3 id="per-student-title" className="t-panel-title">
              {t("usage.perStudent")}
            </h3>
            <PerStudentChart
              students={students.slice(0, CHART_STUDENTS)}
              labelOf={labelOf}
              label={t("usage.perStudentChart", { count: Math.min(students.length, CHART_STUDENTS) })}
              tokensLabel={t("usage.tokens")}
              costLabel={t("usage.costUsd")}
            />
            {students.length > CHART_STUDENTS && (
              <p className="muted">{t("usage.chartTop", { count: CHART_STUDENTS })}</p>
            )}
            <div className="t-table-wrap">
              <table className="t-table t-numbers">
                <caption className="visually-hidden">{t("usage.perStudentTable")}</caption>
                <thead>
                  <tr>
                    <th scope="col">{t("usage.student")}</th>
                    <th scope="col">{t("usage.requests")}</th>
                    <th scope="col">{t("usage.input")}</th>
                    <th scope="col">{t("usage.output")}</th>
                    <th scope="col">{t("usage.tokens")}</th>
                    <th scope="col">{t("usage.cost")}</th>
                  </tr>
                </thead>
                <tbody>
                  {students.map((s) => (
                    <tr key={s.userId}>
                      <th scope="row">{labelOf(s.userId)}</th>
                      <td>{formatNumber(s.requests)}</td>
                      <td>{formatNumber(s.inputTokens)}</td>
                      <td>{formatNumber(s.outputTokens)}</td>
                      <td>{formatNumber(s.tokens)}</td>
                      <td>{formatUsd(s.costUsd)}</td>
                    </tr>
                  ))}
                </tbody>
                <tfoot>
                  <tr>
                    <th scope="row">{t("usage.total")}</th>
                    <td>{formatNumber(total.requests)}</td>
                    <td>{formatNumber(total.inputTokens)}</td>
                    <td>{formatNumber(total.outputTokens)}</td>
                    <td>{formatNumber(total.tokens)}</td>
                    <td>{formatUsd(total.costUsd)}</td>
                  </tr>
                </tfoot>
              </table>
            </div>
          </section>
        </>
      )}
      <NearBudgetPanel course={course} members={members.data} />
      <BudgetsPanel course={course} members={members.data} />
    </section>
  );
}
