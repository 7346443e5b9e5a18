// The student view's reads, as react-query hooks (one key per resource, so a change made on
// one page refreshes the others), and a few shared helpers.
import { useQuery } from "@tanstack/react-query";
import { api, ApiError, type Schemas, unwrap } from "../api/client";
import { refusalOf, type Refusal } from "./transcript";

export type Session = Schemas["SessionOut"];
export type Course = Schemas["CourseOut"];
export type Server = Schemas["ServerOut"];

export const keys = {
  sessions: ["sessions"] as const,
  session: (id: string) => ["sessions", id] as const,
  files: (id: string) => ["sessions", id, "files"] as const,
  file: (id: string, path: string) => ["sessions", id, "files", path] as const,
  courses: ["courses"] as const,
  server: ["server"] as const,
  executors: ["executors"] as const,
  tokens: ["me", "tokens"] as const,
  remaining: (courseId: string) => ["courses", courseId, "remaining"] as const,
  usage: (courseId: string) => ["courses", courseId, "usage"] as const,
};

export function useCourses() {
  return useQuery({
    queryKey: keys.courses,
    queryFn: async () => unwrap(await api.GET("/api/courses")),
    staleTime: 60_000,
  });
}

export function useServer() {
  return useQuery({
    queryKey: keys.server,
    queryFn: async () => unwrap(await api.GET("/api/server")),
    staleTime: Infinity,
  });
}

/** A course's display name: its title, else its short name. */
export function courseName(course: Course | undefined, fallback = ""): string {
  return course ? course.title || course.name : fallback;
}

/** A refused request (429: a budget spent, a rate limit, a full queue) as a `Refusal`. */
export function refusalOfError(error: unknown): Refusal | null {
  if (!(error instanceof ApiError) || error.status !== 429) return null;
  return refusalOf(error.type, { message: error.message, ...error.detail });
}
