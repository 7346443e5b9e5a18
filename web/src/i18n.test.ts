import { resources } from "./i18n";

function keys(value: unknown, prefix = ""): string[] {
  if (value === null || typeof value !== "object") return [prefix];
  return Object.entries(value).flatMap(([key, inner]) =>
    keys(inner, prefix ? `${prefix}.${key}` : key),
  );
}

describe("translations", () => {
  for (const ns of ["common", "student", "teacher"] as const) {
    it(`Chinese has every English key of ${ns}, and no other`, () => {
      expect(keys(resources.zh[ns]).sort()).toEqual(keys(resources.en[ns]).sort());
    });
  }
});
