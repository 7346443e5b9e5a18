// What a course shares with its students' agents: its material (files the agents search) and
// its shared answers (offered to an agent when a student asks something similar). The types
// are written here, and the calls go through the API client (its CSRF middleware, its errors)
// by paths the generated schema need not hold.
import { api, unwrap } from "../api/client";

/** A file of the course material (`chunks`: what an upload wrote; `null` in the list). */
export interface Material {
  name: string;
  chunks: number | null;
}

/** A shared answer, with how often it was offered and the tokens that saved. */
export interface SharedAnswer {
  id: string;
  question: string;
  answer: string;
  /** The tokens writing the answer again would take (the server's estimate). */
  tokens: number;
  created_at: number;
  offered: number;
  tokens_saved: number;
}

/** The kinds of file the course material takes (the server decides; this guides the picker). */
export const MATERIAL_TYPES = [
  ...[".md", ".markdown", ".txt", ".rst", ".html", ".htm"],
  ...[".pdf", ".py", ".json", ".csv"],
];

/** The server's limits on a shared answer. */
export const MAX_QUESTION_CHARS = 2_000;
export const MAX_ANSWER_CHARS = 20_000;

interface Init {
  params: { path: Record<string, string> };
  body?: unknown;
  bodySerializer?: (body: never) => BodyInit;
  headers?: Record<string, string>;
}
type Call = <T>(
  path: string,
  init: Init,
) => Promise<{ data?: T; error?: unknown; response: Response }>;

/** The API client, typed by the declarations above instead of the generated schema. */
const client = api as unknown as Record<"GET" | "PUT" | "POST" | "DELETE", Call>;

const MATERIAL = "/api/courses/{course_id}/knowledge";
const ANSWERS = "/api/courses/{course_id}/shared-answers";

export async function listMaterial(courseId: string): Promise<Material[]> {
  return unwrap(
    await client.GET<Material[]>(MATERIAL, { params: { path: { course_id: courseId } } }),
  );
}

/** Upload `bytes` as the material `name` (the path encodes it), replacing a file of that name. */
export async function putMaterial(
  courseId: string,
  name: string,
  bytes: ArrayBuffer,
): Promise<Material> {
  return unwrap(
    await client.PUT<Material>(`${MATERIAL}/{name}`, {
      params: { path: { course_id: courseId, name } },
      body: bytes,
      bodySerializer: (body: ArrayBuffer) => body,
      headers: { "Content-Type": "application/octet-stream" },
    }),
  );
}

export async function removeMaterial(courseId: string, name: string): Promise<void> {
  unwrap(
    await client.DELETE<undefined>(`${MATERIAL}/{name}`, {
      params: { path: { course_id: courseId, name } },
    }),
  );
}

export async function listAnswers(courseId: string): Promise<SharedAnswer[]> {
  return unwrap(
    await client.GET<SharedAnswer[]>(ANSWERS, { params: { path: { course_id: courseId } } }),
  );
}

export async function shareAnswer(
  courseId: string,
  body: { question: string; answer: string },
): Promise<SharedAnswer> {
  return unwrap(
    await client.POST<SharedAnswer>(ANSWERS, { params: { path: { course_id: courseId } }, body }),
  );
}

export async function unshareAnswer(courseId: string, id: string): Promise<void> {
  unwrap(
    await client.DELETE<undefined>(`${ANSWERS}/{answer_id}`, {
      params: { path: { course_id: courseId, answer_id: id } },
    }),
  );
}

/** The tokens the shared answers saved, together. */
export function tokensSaved(answers: readonly SharedAnswer[]): number {
  return answers.reduce((sum, a) => sum + a.tokens_saved, 0);
}

/** A file's bytes. */
export function readBytes(file: File): Promise<ArrayBuffer> {
  if (typeof file.arrayBuffer === "function") return file.arrayBuffer();
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result as ArrayBuffer);
    reader.onerror = () => reject(reader.error ?? new Error("cannot read the file"));
    reader.readAsArrayBuffer(file);
  });
}
