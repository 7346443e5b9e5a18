// The teacher view's queries: their keys (so a change can refresh exactly what it affects) and
// the reads several tabs share (the course, its members, the server's defaults).
import { useQuery } from "@tanstack/react-query";
import { useOutletContext } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";

export type Course = Schemas["CourseOut"];
export type Member = Schemas["MemberOut"];

export const keys = {
  courses: ["courses"] as const,
  course: (id: string) => ["course", id] as const,
  members: (id: string) => ["course", id, "members"] as const,
  budgets: (id: string) => ["course", id, "budgets"] as const,
  remaining: (id: string, userId: string) => ["course", id, "remaining", userId] as const,
  usage: (id: string, since: string, until: string) =>
    ["course", id, "usage", since, until] as const,
  sessions: (id: string, userId: string, limit: number) =>
    ["course", id, "sessions", userId, limit] as const,
  audit: (id: string, query: object) => ["course", id, "audit", query] as const,
  verify: (id: string) => ["course", id, "audit-verify"] as const,
  material: (id: string) => ["course", id, "knowledge"] as const,
  answers: (id: string) => ["course", id, "shared-answers"] as const,
  server: ["server"] as const,
};

export function useCourse(courseId: string) {
  return useQuery({
    queryKey: keys.course(courseId),
    queryFn: async () =>
      unwrap(await api.GET("/api/courses/{course_id}", { params: { path: { course_id: courseId } } })),
  });
}

export function useMembers(courseId: string) {
  return useQuery({
    queryKey: keys.members(courseId),
    queryFn: async () =>
      unwrap(
        await api.GET("/api/courses/{course_id}/members", {
          params: { path: { course_id: courseId } },
        }),
      ),
  });
}

/** The server's address, version and runtimes (its default runtime is what "" means). */
export function useServer() {
  return useQuery({
    queryKey: keys.server,
    queryFn: async () => unwrap(await api.GET("/api/server")),
    staleTime: 5 * 60_000,
  });
}

/** Members' e-mails by user id (an id not found shows as itself). */
export function emailsOf(members: readonly Member[] | undefined): Map<string, string> {
  return new Map((members ?? []).map((m) => [m.user.id, m.user.email]));
}

/** What the course page gives its tabs. */
export interface CourseContext {
  course: Course;
}

export function useCourseContext(): CourseContext {
  return useOutletContext<CourseContext>();
}
