// The Audit tab's filters as the API's query parameters and as export links.

export interface AuditFilters {
  /** A member's user id (`""`: anyone). */
  actorId: string;
  /** An audit kind, e.g. `model_call` (`""`: any). */
  kind: string;
  /** A `datetime-local` value (the browser's time zone) or `""`. */
  since: string;
  until: string;
}

export const emptyFilters: AuditFilters = { actorId: "", kind: "", since: "", until: "" };

export interface AuditQuery {
  actor_id?: string;
  kind?: string;
  since?: string;
  until?: string;
}

/** A `datetime-local` value (local time, no zone) as an ISO 8601 time in UTC; `undefined` for
 *  an empty or invalid one. */
export function localToIso(value: string): string | undefined {
  if (!value.trim()) return undefined;
  const moment = new Date(value);
  return Number.isNaN(moment.getTime()) ? undefined : moment.toISOString();
}

/** The filters as the query of `GET .../audit` and `.../audit/export` (empty ones left out). */
export function auditQuery(filters: AuditFilters): AuditQuery {
  const query: AuditQuery = {};
  if (filters.actorId) query.actor_id = filters.actorId;
  const kind = filters.kind.trim();
  if (kind) query.kind = kind;
  const since = localToIso(filters.since);
  if (since) query.since = since;
  const until = localToIso(filters.until);
  if (until) query.until = until;
  return query;
}

/** The link that downloads the course's records matching the filters (the login cookie
 *  authenticates a GET, so a plain link works). */
export function exportUrl(courseId: string, format: "jsonl" | "csv", filters: AuditFilters) {
  const params = new URLSearchParams({ format, ...auditQuery(filters) });
  return `/api/courses/${encodeURIComponent(courseId)}/audit/export?${params.toString()}`;
}

/** Kinds of record the service writes, offered as suggestions in the kind field. */
export const KNOWN_KINDS = [
  "model_call",
  "model_refused",
  "instruction",
  "tool_call",
  "tool_result",
  "session_created",
  "session_renamed",
  "session_deleted",
  "run_cancel_requested",
  "run_interrupted",
  "run_resumed",
  "operation_cancel_requested",
  "member_added",
  "member_removed",
  "token_issued",
  "token_revoked",
  "budget_set",
  "budget_deleted",
  "course_created",
  "course_changed",
  "knowledge_added",
  "knowledge_removed",
  "answer_shared",
  "answer_unshared",
  "executor_connected",
  "executor_disconnected",
] as const;
