// Every key the teacher view asks for is in its English strings (Chinese has the same keys:
// src/i18n.test.ts), so no control shows a raw key.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { resources } from "../i18n";

const strings = resources.en.teacher as unknown as Record<string, unknown>;

function has(key: string): boolean {
  const lookup = (path: string) =>
    path.split(".").reduce<unknown>(
      (node, part) =>
        node && typeof node === "object" ? (node as Record<string, unknown>)[part] : undefined,
      strings,
    );
  return (
    typeof lookup(key) === "string" ||
    (typeof lookup(`${key}_one`) === "string" && typeof lookup(`${key}_other`) === "string")
  );
}

const folder = join(process.cwd(), "src", "teacher");
const sources = readdirSync(folder)
  .filter((name) => name.endsWith(".tsx") && !name.includes(".test.") && name !== "testing.tsx")
  .map((name) => readFileSync(join(folder, name), "utf8"));

describe("teacher strings", () => {
  it("has every key used literally in the code", () => {
    const used = new Set(
      sources.flatMap((text) => [...text.matchAll(/\bt\(\s*"([^"]+)"/g)].map((m) => m[1]!)),
    );
    expect(used.size).toBeGreaterThan(100);
    expect([...used].filter((key) => !has(key))).toEqual([]);
  });

  it("has the keys built from values", () => {
    const built = [
      ...["roster", "usage", "activity", "knowledge", "audit", "settings"].map((tab) => `tabs.${tab}`),
      ...["teacher", "student", "admin"].map((role) => `roles.${role}`),
      ...["day", "week", "course"].map((period) => `budgets.periods.${period}`),
      ...["maxTokens", "maxCostUsd", "requestsPerMinute", "maxConcurrent"].map(
        (name) => `budgets.fields.${name}`,
      ),
      ...["students", "teachers"].map((group) => `audit.${group}`),
      ...["stacked", "total"].map((mode) => `usage.mode.${mode}`),
      ...["serial", "batch", "lanes"].map((runtime) => `runtimes.${runtime}.name`),
      ...["default", "serial", "batch", "lanes"].map((runtime) => `runtimes.${runtime}.text`),
    ];
    expect(built.filter((key) => !has(key))).toEqual([]);
  });
});
