// The budget form: its fields (text, as typed) to the body of PUT .../budgets and back.
import type { Schemas } from "../api/client";

export type Budget = Schemas["BudgetOut"];
export type BudgetBody = Schemas["BudgetBody"];
export type Period = BudgetBody["period"];

/** Whom a budget applies to: the whole course, every student (the default) or one student. */
export type Target = { scope: "course" } | { scope: "student"; userId: string };

export interface BudgetForm {
  /** `course`, `student:` (every student) or `student:<user id>`. */
  target: string;
  period: Period;
  maxTokens: string;
  maxCostUsd: string;
  requestsPerMinute: string;
  maxConcurrent: string;
}

export const emptyBudgetForm: BudgetForm = {
  target: "student:",
  period: "day",
  maxTokens: "",
  maxCostUsd: "",
  requestsPerMinute: "",
  maxConcurrent: "",
};

export function targetKey(budget: Pick<Budget, "scope" | "user_id">): string {
  return budget.scope === "course" ? "course" : `student:${budget.user_id}`;
}

export function parseTarget(key: string): Target {
  if (key === "course") return { scope: "course" };
  return { scope: "student", userId: key.startsWith("student:") ? key.slice(8) : "" };
}

/** A number field: `null` when empty; `NaN` when it is not a number. */
function amount(text: string, whole: boolean): number | null {
  const clean = text.trim().replaceAll(",", "").replaceAll("_", "");
  if (!clean) return null;
  const value = Number(clean);
  if (!Number.isFinite(value) || (whole && !Number.isInteger(value))) return Number.NaN;
  return value;
}

/** The form as the body of `PUT .../budgets`, or the names of the fields that are not numbers
 *  of the right kind (the server checks the ranges and says what is wrong). */
export function budgetBody(form: BudgetForm): { body: BudgetBody } | { invalid: (keyof BudgetForm)[] } {
  const target = parseTarget(form.target);
  const values = {
    maxTokens: amount(form.maxTokens, true),
    maxCostUsd: amount(form.maxCostUsd, false),
    requestsPerMinute: amount(form.requestsPerMinute, true),
    maxConcurrent: amount(form.maxConcurrent, true),
  };
  const invalid = (Object.keys(values) as (keyof typeof values)[]).filter((key) =>
    Number.isNaN(values[key]),
  );
  if (invalid.length) return { invalid };
  return {
    body: {
      scope: target.scope,
      user_id: target.scope === "student" ? target.userId : "",
      period: form.period,
      max_tokens: values.maxTokens,
      max_cost_usd: values.maxCostUsd,
      requests_per_minute: values.requestsPerMinute,
      max_concurrent: values.maxConcurrent,
    },
  };
}

/** A budget back in the form, to change it. */
export function budgetForm(budget: Budget): BudgetForm {
  const text = (value: number | null) => (value === null ? "" : String(value));
  return {
    target: targetKey(budget),
    period: (["day", "week", "course"].includes(budget.period) ? budget.period : "day") as Period,
    maxTokens: text(budget.max_tokens),
    maxCostUsd: text(budget.max_cost_usd),
    requestsPerMinute: text(budget.requests_per_minute),
    maxConcurrent: text(budget.max_concurrent),
  };
}

/** Course first, then every student's default, then students' own (by e-mail). */
export function sortBudgets(budgets: readonly Budget[], emailOf: (id: string) => string): Budget[] {
  const rank = (b: Budget) => (b.scope === "course" ? 0 : b.user_id ? 2 : 1);
  return [...budgets].sort(
    (a, b) => rank(a) - rank(b) || emailOf(a.user_id).localeCompare(emailOf(b.user_id)),
  );
}
