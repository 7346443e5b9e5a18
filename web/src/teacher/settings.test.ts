import type { Schemas } from "../api/client";
import { courseChange, settingsForm } from "./settings";

const course: Schemas["CourseOut"] = {
  id: "crs_1",
  name: "web",
  title: "Web 2026",
  owner_id: "usr_t",
  model: "deepseek:deepseek-chat",
  model_base_url: null,
  model_api_key_set: true,
  max_output_tokens: null,
  created_at: 0,
  runtime: "",
  role: "teacher",
};

describe("settings", () => {
  it("sends nothing when nothing changed", () => {
    expect(courseChange(course, settingsForm(course))).toEqual({ change: {} });
  });

  it("sends only the changed fields", () => {
    const form = { ...settingsForm(course), title: " Web ", maxOutputTokens: "2,048", runtime: "lanes" as const };
    expect(courseChange(course, form)).toEqual({
      change: { title: "Web", max_output_tokens: 2048, runtime: "lanes" },
    });
  });

  it("an emptied model goes back to the server's", () => {
    expect(courseChange(course, { ...settingsForm(course), model: "" })).toEqual({
      change: { model: null },
    });
  });

  it("replaces or removes the key, never sends it otherwise", () => {
    const form = settingsForm(course);
    expect(courseChange(course, { ...form, newKey: "sk-1" })).toEqual({ change: {} });
    expect(courseChange(course, { ...form, key: "replace", newKey: " sk-1 " })).toEqual({
      change: { model_api_key: "sk-1" },
    });
    expect(courseChange(course, { ...form, key: "remove" })).toEqual({
      change: { model_api_key: "" },
    });
    expect(courseChange(course, { ...form, key: "replace", newKey: "" })).toEqual({
      invalid: "newKey",
    });
  });

  it("refuses an empty title and a non-number output limit", () => {
    expect(courseChange(course, { ...settingsForm(course), title: " " })).toEqual({
      invalid: "title",
    });
    expect(courseChange(course, { ...settingsForm(course), maxOutputTokens: "1e3" })).toEqual({
      invalid: "maxOutputTokens",
    });
  });
});
