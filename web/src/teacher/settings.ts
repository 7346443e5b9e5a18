// The Settings form: what changed, as the body of PATCH /api/courses/{id} (only the changed
// fields are sent, so a teacher's save never touches what they did not edit).
import type { Schemas } from "../api/client";

type Course = Schemas["CourseOut"];
export type CourseChange = Schemas["CourseChange"];
export type Runtime = "" | "serial" | "batch" | "lanes";
export const RUNTIMES: Runtime[] = ["", "serial", "batch", "lanes"];

export interface SettingsForm {
  title: string;
  model: string;
  maxOutputTokens: string;
  runtime: Runtime;
  /** `keep` the key as it is, `replace` it with `newKey`, or `remove` it. */
  key: "keep" | "replace" | "remove";
  newKey: string;
  baseUrl: string;
}

export function settingsForm(course: Course): SettingsForm {
  return {
    title: course.title,
    model: course.model ?? "",
    maxOutputTokens: course.max_output_tokens === null ? "" : String(course.max_output_tokens),
    runtime: (RUNTIMES as string[]).includes(course.runtime) ? (course.runtime as Runtime) : "",
    key: "keep",
    newKey: "",
    baseUrl: course.model_base_url ?? "",
  };
}

/** The changed fields (empty model or output limit: back to the server's); `invalid` names a
 *  field that cannot be sent as typed. */
export function courseChange(
  course: Course,
  form: SettingsForm,
): { change: CourseChange } | { invalid: keyof SettingsForm } {
  const change: CourseChange = {};
  const title = form.title.trim();
  if (title !== course.title) {
    if (!title) return { invalid: "title" };
    change.title = title;
  }
  const model = form.model.trim();
  if (model !== (course.model ?? "")) change.model = model || null;
  const cap = form.maxOutputTokens.trim().replaceAll(",", "");
  const current = course.max_output_tokens === null ? "" : String(course.max_output_tokens);
  if (cap !== current) {
    if (cap && !/^\d+$/.test(cap)) return { invalid: "maxOutputTokens" };
    change.max_output_tokens = cap ? Number(cap) : null;
  }
  if (form.runtime !== course.runtime) change.runtime = form.runtime;
  const baseUrl = form.baseUrl.trim();
  if (baseUrl !== (course.model_base_url ?? "")) change.model_base_url = baseUrl || null;
  if (form.key === "replace") {
    if (!form.newKey.trim()) return { invalid: "newKey" };
    change.model_api_key = form.newKey.trim();
  } else if (form.key === "remove") {
    change.model_api_key = "";
  }
  return { change };
}
