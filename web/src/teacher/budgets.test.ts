import { budgetBody, budgetForm, emptyBudgetForm, parseTarget, sortBudgets, type Budget } from "./budgets";

function budget(partial: Partial<Budget>): Budget {
  return {
    id: "b",
    course_id: "c",
    scope: "student",
    user_id: "",
    period: "day",
    max_tokens: null,
    max_cost_usd: null,
    requests_per_minute: null,
    max_concurrent: null,
    updated_at: 0,
    ...partial,
  };
}

describe("budget form", () => {
  it("reads the target", () => {
    expect(parseTarget("course")).toEqual({ scope: "course" });
    expect(parseTarget("student:")).toEqual({ scope: "student", userId: "" });
    expect(parseTarget("student:usr_1")).toEqual({ scope: "student", userId: "usr_1" });
  });

  it("makes the PUT body: empty fields are no limit, thousands separators allowed", () => {
    const result = budgetBody({
      ...emptyBudgetForm,
      target: "student:usr_1",
      period: "week",
      maxTokens: "200,000",
      maxCostUsd: "1.5",
    });
    expect(result).toEqual({
      body: {
        scope: "student",
        user_id: "usr_1",
        period: "week",
        max_tokens: 200000,
        max_cost_usd: 1.5,
        requests_per_minute: null,
        max_concurrent: null,
      },
    });
  });

  it("a course budget has no user", () => {
    const result = budgetBody({ ...emptyBudgetForm, target: "course", period: "course", maxTokens: "5" });
    expect("body" in result && result.body.user_id).toBe("");
    expect("body" in result && result.body.scope).toBe("course");
  });

  it("names the fields that are not numbers of the right kind", () => {
    expect(budgetBody({ ...emptyBudgetForm, maxTokens: "1.5", maxConcurrent: "x" })).toEqual({
      invalid: ["maxTokens", "maxConcurrent"],
    });
  });

  it("goes back into the form to be changed", () => {
    const form = budgetForm(budget({ user_id: "usr_1", max_tokens: 100, max_cost_usd: 2 }));
    expect(form).toEqual({
      target: "student:usr_1",
      period: "day",
      maxTokens: "100",
      maxCostUsd: "2",
      requestsPerMinute: "",
      maxConcurrent: "",
    });
  });

  it("sorts course, default, then students by e-mail", () => {
    const emails: Record<string, string> = { u1: "zed@x", u2: "amy@x" };
    const sorted = sortBudgets(
      [
        budget({ id: "s1", user_id: "u1" }),
        budget({ id: "d" }),
        budget({ id: "s2", user_id: "u2" }),
        budget({ id: "c", scope: "course" }),
      ],
      (id) => emails[id] ?? "",
    );
    expect(sorted.map((b) => b.id)).toEqual(["c", "d", "s2", "s1"]);
  });
});
