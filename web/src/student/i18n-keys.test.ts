// Every string key the student view names literally exists in English (the shared test checks
// that Chinese has the same keys), and every key built from a value has its known values.
import { resources } from "../i18n";

const sources = import.meta.glob(["./**/*.tsx", "!./**/*.test.tsx"], {
  query: "?raw",
  import: "default",
  eager: true,
}) as Record<string, string>;

function lookup(tree: unknown, key: string): unknown {
  return key.split(".").reduce<unknown>((node, part) => {
    if (node === null || typeof node !== "object") return undefined;
    return (node as Record<string, unknown>)[part];
  }, tree);
}

function exists(key: string): boolean {
  const student = resources.en.student;
  const common = resources.en.common;
  return [key, `${key}_one`, `${key}_other`].some(
    (k) => lookup(student, k) !== undefined || lookup(common, k) !== undefined,
  );
}

describe("student strings", () => {
  it("has every key used literally in the code", () => {
    expect(Object.keys(sources).length).toBeGreaterThan(8);
    const missing: string[] = [];
    for (const [file, text] of Object.entries(sources)) {
      for (const match of text.matchAll(/\bt\(\s*"([\w.]+)"/g)) {
        const key = match[1] ?? "";
        if (!exists(key)) missing.push(`${file}: ${key}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("has the keys built from states, statuses, runtimes and periods", () => {
    const built = [
      ...["pending", "running", "done", "failed", "interrupted"].map((s) => `state.${s}`),
      ...["connecting", "reconnecting", "lost"].map((s) => `connection.${s}`),
      ...["serial", "batch", "lanes"].flatMap((r) => [`runtime.${r}`, `runtimeHelp.${r}`]),
      ...["day", "week", "course"].map((p) => `period.${p}`),
      ...["ready", "working", "waiting", "ended"].map((s) => `lanes.status.${s}`),
      ...["running", "cancelling", "completed", "failed"].map((s) => `op.status.${s}`),
      ...["pending", "in_progress", "completed"].map((s) => `plan.status.${s}`),
      ...["budget_exceeded", "rate_limited", "service_unavailable", "other"].map((k) => `refusal.${k}`),
      ...["active", "expired", "revoked"].map((s) => `tokens.${s}`),
      ...["commands", "files"].map((c) => `executors.can.${c}`),
    ];
    expect(built.filter((key) => !exists(key))).toEqual([]);
  });
});
