// The student's budget and usage per course, their personal tokens (create, revoke), and how
// to use the class model from their own programs through the gateway.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useRef, useState } from "react";
import { useTranslation } from "react-i18next";
import { api, type Schemas, unwrap } from "../api/client";
import { useAuth } from "../auth";
import { CopyButton, ErrorBox, Loading, PageTitle } from "../components/common";
import { formatNumber, formatTime, formatTokens, formatUsd } from "../format";
import { ShownOnce } from "./ExecutorsPage";
import { type Course, courseName, keys, useCourses, useServer } from "./queries";
import { Ago, Meter } from "./ui";

type Remaining = Schemas["RemainingOut"];
type Usage = Schemas["UsageOut"];
type Token = Schemas["TokenOut"];

const USAGE_DAYS = 30;

function BudgetMeter({ budget }: { budget: Remaining }) {
  const { t } = useTranslation("student");
  const period = t(`period.${budget.period}`, { defaultValue: budget.period });
  const title = t(budget.scope === "course" ? "account.classBudget" : "account.yourBudget", {
    period,
  });
  const usedTokens = budget.used_tokens + budget.reserved_tokens;
  const usedCost = budget.used_cost_usd + budget.reserved_cost_usd;
  return (
    <div className="budget">
      <div className="budget-title">
        <strong>{title}</strong>
        {budget.resets_at !== null && (
          <span className="muted small-text">
            {t("account.resets", { time: formatTime(budget.resets_at) })}
          </span>
        )}
      </div>
      {budget.max_tokens !== null && (
        <div className="budget-line">
          <Meter used={usedTokens} max={budget.max_tokens} label={t("account.tokensMeter", { title })} />
          <span className="small-text">
            {t("account.tokensUsed", {
              used: formatNumber(usedTokens),
              max: formatNumber(budget.max_tokens),
            })}
            {" · "}
            <strong>
              {t("account.left", { amount: formatTokens(Math.max(0, budget.max_tokens - usedTokens)) })}
            </strong>
          </span>
        </div>
      )}
      {budget.max_cost_usd !== null && (
        <div className="budget-line">
          <Meter used={usedCost} max={budget.max_cost_usd} label={t("account.costMeter", { title })} />
          <span className="small-text">
            {t("account.costUsed", {
              used: formatUsd(usedCost),
              max: formatUsd(budget.max_cost_usd),
            })}
            {" · "}
            <strong>{t("account.left", { amount: formatUsd(Math.max(0, budget.max_cost_usd - usedCost)) })}</strong>
          </span>
        </div>
      )}
      {budget.max_tokens === null && budget.max_cost_usd === null && (
        <p className="muted small-text">
          {t("account.noLimit", { tokens: formatNumber(usedTokens), cost: formatUsd(usedCost) })}
        </p>
      )}
    </div>
  );
}

interface DayUsage {
  day: string;
  requests: number;
  input: number;
  output: number;
  cost: number;
}

/** Usage rows (one per day and source) summed per day, newest first. */
export function usageByDay(rows: readonly Usage[]): DayUsage[] {
  const days = new Map<string, DayUsage>();
  for (const row of rows) {
    const day = days.get(row.day) ?? { day: row.day, requests: 0, input: 0, output: 0, cost: 0 };
    day.requests += row.requests;
    day.input += row.input_tokens;
    day.output += row.output_tokens;
    day.cost += row.cost_usd;
    days.set(row.day, day);
  }
  return [...days.values()].sort((a, b) => b.day.localeCompare(a.day));
}

function since(days: number): string {
  return new Date(Date.now() - (days - 1) * 86_400_000).toISOString().slice(0, 10);
}

function CourseBudget({ course }: { course: Course }) {
  const { t } = useTranslation("student");
  const path = { course_id: course.id };
  const remaining = useQuery({
    queryKey: keys.remaining(course.id),
    queryFn: async () =>
      unwrap(await api.GET("/api/courses/{course_id}/remaining", { params: { path } })),
    refetchInterval: 30_000,
  });
  const usage = useQuery({
    queryKey: keys.usage(course.id),
    queryFn: async () =>
      unwrap(
        await api.GET("/api/courses/{course_id}/usage", {
          params: { path, query: { since: since(USAGE_DAYS) } },
        }),
      ),
  });
  const days = usageByDay(usage.data ?? []);
  const total = days.reduce(
    (sum, d) => ({
      requests: sum.requests + d.requests,
      input: sum.input + d.input,
      output: sum.output + d.output,
      cost: sum.cost + d.cost,
    }),
    { requests: 0, input: 0, output: 0, cost: 0 },
  );
  const id = useId();
  return (
    <section className="panel course-budget" aria-labelledby={`${id}-course`}>
      <h2 id={`${id}-course`}>{courseName(course)}</h2>
      <h3>{t("account.budget")}</h3>
      {remaining.isPending && <Loading />}
      <ErrorBox error={remaining.error} />
      {remaining.data && remaining.data.length === 0 && (
        <p className="muted">{t("account.noBudget")}</p>
      )}
      {remaining.data?.map((budget) => <BudgetMeter key={budget.budget_id} budget={budget} />)}

      <h3 id={`${id}-usage`}>{t("account.usage", { days: USAGE_DAYS })}</h3>
      {usage.isPending && <Loading />}
      <ErrorBox error={usage.error} />
      {usage.data && days.length === 0 && <p className="muted">{t("account.noUsage")}</p>}
      {days.length > 0 && (
        <div className="table-scroll">
          <table aria-labelledby={`${id}-usage`}>
            <thead>
              <tr>
                <th scope="col">{t("account.day")}</th>
                <th scope="col" className="num">{t("account.requests")}</th>
                <th scope="col" className="num">{t("account.inputTokens")}</th>
                <th scope="col" className="num">{t("account.outputTokens")}</th>
                <th scope="col" className="num">{t("account.cost")}</th>
              </tr>
            </thead>
            <tbody>
              {days.map((d) => (
                <tr key={d.day}>
                  <th scope="row">{d.day}</th>
                  <td className="num">{formatNumber(d.requests)}</td>
                  <td className="num">{formatNumber(d.input)}</td>
                  <td className="num">{formatNumber(d.output)}</td>
                  <td className="num">{formatUsd(d.cost)}</td>
                </tr>
              ))}
            </tbody>
            {days.length > 1 && (
              <tfoot>
                <tr>
                  <th scope="row">{t("account.total")}</th>
                  <td className="num">{formatNumber(total.requests)}</td>
                  <td className="num">{formatNumber(total.input)}</td>
                  <td className="num">{formatNumber(total.output)}</td>
                  <td className="num">{formatUsd(total.cost)}</td>
                </tr>
              </tfoot>
            )}
          </table>
        </div>
      )}
    </section>
  );
}

function tokenStatus(token: Token, now: number): "revoked" | "expired" | "active" {
  if (token.revoked_at !== null) return "revoked";
  if (token.expires_at && token.expires_at < now) return "expired";
  return "active";
}

function RevokeButton({ token }: { token: Token }) {
  const { t } = useTranslation("student");
  const client = useQueryClient();
  const [asking, setAsking] = useState(false);
  const confirm = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) confirm.current?.focus();
  }, [asking]);
  const revoke = useMutation({
    mutationFn: async () =>
      unwrap(
        await api.DELETE("/api/me/tokens/{token_id}", {
          params: { path: { token_id: token.id } },
        }),
      ),
    onSuccess: () => {
      setAsking(false);
      void client.invalidateQueries({ queryKey: keys.tokens });
    },
  });
  if (!asking) {
    return (
      <button
        type="button"
        className="danger small"
        aria-label={t("tokens.revokeName", { name: token.name })}
        onClick={() => setAsking(true)}
      >
        {t("tokens.revoke")}
      </button>
    );
  }
  return (
    <div className="confirm compact" role="group" aria-label={t("tokens.revokeQuestion", { name: token.name })}>
      <span>{t("tokens.revokeQuestion", { name: token.name })}</span>
      <div className="row">
        <button
          ref={confirm}
          type="button"
          className="danger-solid small"
          disabled={revoke.isPending}
          onClick={() => revoke.mutate()}
        >
          {t("tokens.revokeConfirm")}
        </button>
        <button type="button" className="secondary small" onClick={() => setAsking(false)}>
          {t("sessions.cancel")}
        </button>
      </div>
      <ErrorBox error={revoke.error} />
    </div>
  );
}

function Tokens() {
  const { t } = useTranslation("student");
  const client = useQueryClient();
  const [name, setName] = useState("");
  const tokens = useQuery({
    queryKey: keys.tokens,
    queryFn: async () => unwrap(await api.GET("/api/me/tokens")),
  });
  const create = useMutation({
    mutationFn: async () =>
      unwrap(await api.POST("/api/me/tokens", { body: { name: name.trim() || "token" } })),
    onSuccess: () => {
      setName("");
      void client.invalidateQueries({ queryKey: keys.tokens });
    },
  });
  const now = Date.now() / 1000;
  const order = { active: 0, expired: 1, revoked: 2 };
  const list = [...(tokens.data ?? [])].sort(
    (a, b) =>
      order[tokenStatus(a, now)] - order[tokenStatus(b, now)] || b.created_at - a.created_at,
  );
  function submit(event: FormEvent) {
    event.preventDefault();
    create.mutate();
  }
  return (
    <section className="panel" aria-labelledby="tokens-title">
      <h2 id="tokens-title">{t("tokens.title")}</h2>
      <p className="muted">{t("tokens.lead")}</p>
      <form className="inline" onSubmit={submit}>
        <label>
          {t("tokens.name")}
          <input
            value={name}
            maxLength={200}
            placeholder={t("tokens.namePlaceholder")}
            onChange={(e) => setName(e.target.value)}
          />
        </label>
        <button type="submit" disabled={create.isPending}>
          {t("tokens.create")}
        </button>
      </form>
      <ErrorBox error={create.error} />
      {create.data && <ShownOnce label={t("tokens.newToken")} text={create.data.token} />}
      {tokens.isPending && <Loading />}
      <ErrorBox error={tokens.error} />
      {tokens.data && list.length === 0 && <p className="muted">{t("tokens.none")}</p>}
      {list.length > 0 && (
        <div className="table-scroll">
          <table>
            <caption className="visually-hidden">{t("tokens.title")}</caption>
            <thead>
              <tr>
                <th scope="col">{t("tokens.name")}</th>
                <th scope="col">{t("tokens.hint")}</th>
                <th scope="col">{t("tokens.created")}</th>
                <th scope="col">{t("tokens.lastUsed")}</th>
                <th scope="col">{t("tokens.expires")}</th>
                <th scope="col">{t("tokens.status")}</th>
                <th scope="col">
                  <span className="visually-hidden">{t("tokens.actions")}</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((token) => {
                const status = tokenStatus(token, now);
                return (
                  <tr key={token.id} className={status === "active" ? "" : "dim"}>
                    <th scope="row">{token.name}</th>
                    <td className="mono">{token.hint}</td>
                    <td>
                      <Ago ts={token.created_at} />
                    </td>
                    <td>{token.last_used_at ? <Ago ts={token.last_used_at} /> : t("tokens.never")}</td>
                    <td>{token.expires_at ? <Ago ts={token.expires_at} /> : "—"}</td>
                    <td>
                      <span className={`badge ${status === "active" ? "ok" : ""}`}>
                        {t(`tokens.${status}`)}
                      </span>
                    </td>
                    <td>{status === "active" && <RevokeButton token={token} />}</td>
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

function Gateway({ model }: { model: string }) {
  const { t } = useTranslation("student");
  const server = useServer();
  const url = server.data?.gateway_url ?? `${window.location.origin}/v1`;
  const example = [
    "import os",
    "from openai import OpenAI",
    "",
    `client = OpenAI(base_url="${url}", api_key=os.environ["AGENTICA_TOKEN"])`,
    "reply = client.chat.completions.create(",
    `    model="${model}",`,
    '    messages=[{"role": "user", "content": "Hello!"}],',
    ")",
    "print(reply.choices[0].message.content)",
  ].join("\n");
  return (
    <section className="panel" aria-labelledby="gateway-title">
      <h2 id="gateway-title">{t("gateway.title")}</h2>
      <p className="muted">{t("gateway.lead")}</p>
      <ErrorBox error={server.error} />
      <div className="row">
        <span>{t("gateway.baseUrl")}</span>
        <code className="url">{url}</code>
        <CopyButton text={url} />
      </div>
      <div className="code-block">
        <div className="code-head">
          <span className="mono">python</span>
          <CopyButton text={example} />
        </div>
        <pre>
          <code>{example}</code>
        </pre>
      </div>
      <p className="muted small-text">{t("gateway.note")}</p>
    </section>
  );
}

function Password() {
  const { t } = useTranslation("student");
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const { me, login } = useAuth();
  const change = useMutation({
    // setting it ends every browser login of the account, this one too: log in again with it
    mutationFn: async () => {
      unwrap(
        await api.POST("/api/me/password", {
          body: { password: next, current_password: current || null },
        }),
      );
      if (me) await login(me.email, { password: next });
    },
    onSuccess: () => {
      setCurrent("");
      setNext("");
    },
  });
  function submit(event: FormEvent) {
    event.preventDefault();
    change.mutate();
  }
  return (
    <section className="panel" aria-labelledby="password-title">
      <h2 id="password-title">{t("password.title")}</h2>
      <p className="muted">{t("password.lead")}</p>
      <form className="inline" onSubmit={submit}>
        <label>
          {t("password.current")}
          <input
            type="password"
            autoComplete="current-password"
            value={current}
            onChange={(event) => setCurrent(event.target.value)}
          />
        </label>
        <label>
          {t("password.new")}
          <input
            type="password"
            autoComplete="new-password"
            minLength={8}
            required
            value={next}
            onChange={(event) => setNext(event.target.value)}
          />
        </label>
        <button type="submit" disabled={change.isPending}>
          {t("password.save")}
        </button>
      </form>
      <ErrorBox error={change.error} />
      <p role="status">{change.isSuccess ? t("password.saved") : ""}</p>
    </section>
  );
}

export function AccountPage() {
  const { t } = useTranslation("student");
  const courses = useCourses();
  const mine = (courses.data ?? []).filter((c) => c.role === "student");
  const shown = mine.length ? mine : (courses.data ?? []);
  return (
    <>
      <PageTitle title={t("account.title")} />
      {courses.isPending && <Loading />}
      <ErrorBox error={courses.error} />
      {courses.data && shown.length === 0 && <p className="notice">{t("sessions.noCourse")}</p>}
      <div className="grid-2">
        {shown.map((course) => (
          <CourseBudget key={course.id} course={course} />
        ))}
      </div>
      <Tokens />
      <Password />
      <Gateway model={shown[0]?.name ?? "COURSE"} />
    </>
  );
}
